"""What a synthetic market's folder holds: ``fxstore-synth.json``, so that ``synth`` with the
same options leaves the files as they are, and a stopped one resumes at the first day missing.

Every trading day is generated from (seed, day) alone, so a day written by an earlier run
with the same options is the day this run would write, byte for byte. A day counts as
written when the record lists it and every file it lists is there with the size and
modification time it had when written: a file replaced or touched since is written again,
and leaving the others untouched keeps ``ingest``'s fingerprint (names, sizes, mtimes) and
so its bars up to date. Ingest ignores the record (it reads only DBN files).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path
from typing import Final, cast

from fxstore import __version__
from fxstore.config import SynthConfig
from fxstore.errors import FxStoreError
from fxstore.store import atomic_write_json, os_errors, read_json
from fxstore.synth.day import DayVolume

__all__ = ["RECORD_NAME", "SynthRecord"]

#: The record's file name, beside the DBN files.
RECORD_NAME: Final = "fxstore-synth.json"
_FORMAT: Final = "fxstore-synth/1"

#: A file as written: name (in the folder), size in bytes, modification time in ns.
FileStamp = list[object]


def _stamp(path: Path) -> FileStamp:
    with os_errors(path, "read"):
        stat = path.stat()
    return [path.name, stat.st_size, stat.st_mtime_ns]


def _config_json(config: SynthConfig) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(json.dumps(asdict(config), default=str))
    return loaded


class SynthRecord:
    """The days of one market (one config) written into a folder, with their files and
    volumes; saved as days are written (about once a second: a save rewrites the whole
    record) and when a run stops, so a stopped run resumes."""

    def __init__(self, out_dir: Path, config: SynthConfig) -> None:
        self.path = out_dir / RECORD_NAME
        self._out_dir = out_dir
        self._identity = {"config": _config_json(config), "fxstore_version": __version__}
        self._days: dict[str, dict[str, list[object]]] = {}
        self._is_saved = True
        self._shared: list[FileStamp] = []
        try:
            data = read_json(self.path) if self.path.is_file() else {}
        except FxStoreError:
            data = {}  # damaged: every day is written again, and the record with them
        same = all(data.get(k) == v for k, v in self._identity.items())
        if data.get("format") == _FORMAT and same:
            days, shared = data.get("days"), data.get("shared")
            self._days = days if isinstance(days, dict) else {}
            self._shared = shared if isinstance(shared, list) else []

    def _matches(self, stamps: object) -> bool:
        if not isinstance(stamps, list) or not stamps:
            return False
        for stamp in stamps:
            if not isinstance(stamp, list) or len(stamp) != 3:
                return False
            path = self._out_dir / str(stamp[0])
            if Path(str(stamp[0])).name != stamp[0] or not path.is_file():
                return False
            if _stamp(path) != stamp:
                return False
        return True

    def written_day(self, day: dt.date) -> tuple[list[Path], list[DayVolume]] | None:
        """The files and volumes of `day` as an earlier run wrote them; None when it must be
        written (never written with these options, or a file of it changed since)."""
        entry = self._days.get(day.isoformat())
        if not isinstance(entry, dict) or not self._matches(entry.get("files")):
            return None
        volumes = []
        for row in entry.get("volumes") or [None]:
            if not isinstance(row, list) or len(row) != 5:
                return None
            symbol, *counts = row
            if not all(isinstance(x, int) for x in counts):
                return None
            volumes.append(DayVolume(day, str(symbol), *cast(list[int], counts)))
        return [self._out_dir / str(s[0]) for s in cast(list[FileStamp], entry["files"])], volumes

    def shared_paths(self) -> list[Path]:
        """The files of several days, as recorded (in the order written)."""
        return [self._out_dir / str(s[0]) for s in self._shared if isinstance(s, list) and s]

    def shared_intact(self) -> bool:
        """Whether every file of several days the record lists is as written."""
        return self._matches(self._shared)

    def shared_written(self, names: list[str]) -> bool:
        """Whether the files of several days (definitions; UTC-day DBN files) are as written."""
        return self._matches(self._shared) and sorted(str(s[0]) for s in self._shared) == sorted(
            names
        )

    def add_day(self, day: dt.date, files: list[Path], volumes: list[DayVolume]) -> None:
        """Record `day` as written (its `files` and `volumes`); :meth:`flush` saves it."""
        self._days[day.isoformat()] = {
            "files": [_stamp(p) for p in files],
            "volumes": [
                [v.raw_symbol, v.instrument_id, v.volume, v.n_trades, v.n_records] for v in volumes
            ],
        }
        self._is_saved = False

    def flush(self) -> None:
        """Save the record if a day was added since it was last saved."""
        if not self._is_saved:
            self.save()

    def set_shared(self, files: list[Path]) -> None:
        """Record the files every day shares, and save the record."""
        self._shared = [_stamp(p) for p in files]
        self.save()

    def forget_shared(self) -> None:
        """Drop the shared files from the record before they are rewritten."""
        if self._shared:
            self._shared = []
            self.save()

    def save(self) -> None:
        """Write the record (atomically)."""
        atomic_write_json(
            self.path,
            {"format": _FORMAT, **self._identity, "days": self._days, "shared": self._shared},
        )
        self._is_saved = True
