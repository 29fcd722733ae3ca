"""The progress log of an ingest run: which groups of input files are finished.

An append-only file of JSON lines: a header line with the run's fingerprint (inputs, config,
version), then one line per finished group, each flushed and fsynced before the next group
is taken. Saving progress costs one line per group, not a rewrite of everything so far (a
year of days is a few hundred lines). A killed run leaves at worst a torn last line: the
groups before it are resumed and that group is built again.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import TracebackType
from typing import IO, Final

from fxstore.store import atomic_write_bytes, os_errors

__all__ = ["PROGRESS", "ProgressLog", "load_progress"]

logger = logging.getLogger(__name__)

PROGRESS: Final = ".progress.jsonl"

#: What a finished group saved: its days' manifest entries, inputs and records read.
Entry = dict[str, object]


def _line(obj: object) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def load_progress(out_dir: Path, fingerprint: str) -> dict[str, Entry]:
    """Finished groups of an interrupted run with the same fingerprint, by group key, in
    the order they finished (empty when there is no log or it is of another run)."""
    path = out_dir / PROGRESS
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return {}
    groups: dict[str, Entry] = {}
    for number, line in enumerate(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict) or (number and not isinstance(entry.get("group"), str)):
            logger.info("%s: line %d is torn; resuming before it", path, number + 1)
            break
        if number == 0:
            if entry.get("fingerprint") != fingerprint:
                return {}
            continue
        groups[str(entry.pop("group"))] = entry
    return groups


class ProgressLog:
    """Writes the progress log of a run (use as a context manager)."""

    def __init__(self, out_dir: Path, fingerprint: str, resumed: dict[str, Entry]) -> None:
        """Start the log with `resumed` (the groups this run takes over, in order),
        written atomically, so a torn line of the killed run is gone."""
        self.path = out_dir / PROGRESS
        lines = [_line({"fingerprint": fingerprint})]
        lines += [_line({"group": key, **entry}) for key, entry in resumed.items()]
        atomic_write_bytes(self.path, b"".join(lines))
        with os_errors(self.path, "write"):
            self._fh: IO[bytes] = self.path.open("ab")

    def append(self, key: str, entry: Entry) -> None:
        """Record one finished group durably."""
        with os_errors(self.path, "write"):
            self._fh.write(_line({"group": key, **entry}))
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        with os_errors(self.path, "write"):
            self._fh.close()

    def __enter__(self) -> ProgressLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
