"""Days a build takes from the series' current version instead of building them again.

A trading day's file and manifest entry are a function of the records of the input files
whose span holds the day, the day's symbology, the settings that shape bars (symbol,
instrument mode, bar rule, roll rule and depth; never the price adjustment, which lives in
the manifest's transitions and is applied when bars are read), the contract facts, the
session calendar and the fxstore version; in front-month mode also of the contract the
selector picks, which depends on the days before. The first group is hashed into a **day
key** that every manifest records per trading day (``day_keys``), also for days without
records. A later build whose day key of a day equals the current version's (same input
bytes, same settings, same code) takes that day's file (a hard link, else a copy) and entry
from it, as long as

- the file still holds the bytes the manifest recorded,
- no input covering the day was truncated (its stats come only from reading it),
- the entry has what this build records (last trade prices when it prices rolls), and
- in front-month mode the selector, fed the days before, picks the same contract (checked
  as the days are written, in order; a day whose pick changed is built again).

So changing ``--adjust`` or ``--adjust-direction``, or adding days to the inputs, builds only
what differs, and the result is byte-identical to a full build. ``--force`` reuses nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fxstore import __version__
from fxstore.config import IngestConfig
from fxstore.ingest.dbn.symbology import Symbology
from fxstore.ingest.run.day_builder import DayResult, GroupTask, build_group
from fxstore.ingest.run.day_files import bars_metadata
from fxstore.ingest.run.plan import IngestPlan
from fxstore.ingest.select.front_month import symbols_listed
from fxstore.market.calendar import Sessions
from fxstore.store import (
    BarVersion,
    atomic_path,
    file_sha256,
    list_bar_versions,
    matches_manifest,
    os_errors,
    read_bar_manifest,
    resolve_manifest_file,
)

__all__ = [
    "Reuse",
    "as_digest",
    "build_day",
    "day_keys",
    "find_reuse",
    "input_digests",
    "link_day_file",
    "plan_reuse",
    "tasks_to_build",
]

logger = logging.getLogger(__name__)

#: (name, size in bytes, sha256) of a file.
Digest = tuple[str, int, str]


def input_digests(paths: Sequence[Path]) -> list[Digest]:
    """(name, size, sha256) of each of `paths`, hashed now."""
    out: list[Digest] = []
    for path in paths:
        with os_errors(path, "read"):
            size = path.stat().st_size
        out.append((path.name, size, file_sha256(path)))
    return out


def day_keys(
    plan: IngestPlan,
    spans: Mapping[Digest, tuple[dt.date, dt.date]],
    side: Sequence[Digest],
    symbology: Symbology,
) -> dict[str, str]:
    """The day key of every trading day an input's span holds (see the module docstring).

    Parameters
    ----------
    spans
        Each input file with records (its digest) → first and last trading day its records
        may belong to.
    side
        The digests of the files besides the inputs that decide facts (definitions,
        statistics, the Databento symbology answer).
    symbology
        The inputs' symbology: which instruments each day lists.
    """
    settings = {
        "version": __version__,
        "calendar": plan.calendar,
        "bars": json.loads(bars_metadata(plan.config)[b"fxstore"]),
        "facts": sorted(side),
    }
    covering: dict[dt.date, list[Digest]] = {}
    for digest, (first, last) in spans.items():
        for day in plan.sessions.between(first, last):
            covering.setdefault(day, []).append(digest)
    keys: dict[str, str] = {}
    for day in sorted(covering):
        listed = symbols_listed(symbology, day, plan.sessions)
        blob = settings | {
            "trading_day": day.isoformat(),
            "inputs": sorted(covering[day]),
            "listed": sorted(listed.items()),
        }
        text = json.dumps(blob, sort_keys=True, separators=(",", ":"))
        keys[day.isoformat()] = hashlib.sha256(text.encode()).hexdigest()
    return keys


@dataclass(slots=True)
class Reuse:
    """What a build takes from the current version: its folder, and per trading day the
    entry to take (None: the day had no records and still has none)."""

    folder: Path
    days: dict[dt.date, dict[str, Any] | None] = field(default_factory=dict)


def plan_reuse(
    current: BarVersion | None,
    keys: Mapping[str, str],
    plan: IngestPlan,
) -> Reuse | None:
    """The days of `current` (the series' current version) whose day key equals this
    build's (`keys`) and whose file and entry can be taken as they are; None when none can.
    """
    if current is None:
        return None
    manifest = read_bar_manifest(current)
    recorded = manifest.get("day_keys")
    entries = manifest.get("days")
    if not isinstance(recorded, dict) or not isinstance(entries, list):
        return None  # a version built before day keys: nothing is known to be the same
    by_day = {str(e.get("trading_day")): e for e in entries if isinstance(e, dict)}
    if set(by_day) - set(recorded):
        return None  # records outside every input's declared span: trust no span
    truncated = _truncated_days(manifest)
    reuse = Reuse(current.folder)
    for day, key in keys.items():
        if recorded.get(day) != key or day in truncated:
            continue
        entry = by_day.get(day)
        if entry is not None and not _usable(entry, current, plan):
            continue
        reuse.days[dt.date.fromisoformat(day)] = None if entry is None else _as_built(entry, plan)
    return reuse if reuse.days else None


def _truncated_days(manifest: Mapping[str, object]) -> set[str]:
    """Trading days on which an input of `manifest` that ended in a partial record ends."""
    inputs = manifest.get("inputs")
    days: set[str] = set()
    for entry in inputs if isinstance(inputs, list) else []:
        cut = entry.get("truncated") if isinstance(entry, dict) else None
        if isinstance(cut, dict):
            days.add(str(cut.get("last_trading_day")))
    entries = manifest.get("days")
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("truncated"):
            days.add(str(entry.get("trading_day")))
    return days


def _usable(entry: Mapping[str, Any], current: BarVersion, plan: IngestPlan) -> bool:
    """Whether the day of `entry` can be taken: its file intact, its facts complete."""
    if plan.records_transitions and "last_trade_px" not in entry:
        return False  # priced rolls need the day's last trades: only its records hold them
    if "file" not in entry:
        return True
    file = resolve_manifest_file(current.manifest, str(entry["file"]))
    return matches_manifest(file, current.manifest, str(entry.get("sha256")))


def _as_built(entry: Mapping[str, Any], plan: IngestPlan) -> dict[str, Any]:
    """The entry as this build writes it: without what the manifest adds last (truncated
    inputs) and without the last trades when the build does not price rolls."""
    out = {k: v for k, v in entry.items() if k != "truncated"}
    if not plan.records_transitions:
        out.pop("last_trade_px", None)
    return out


def link_day_file(source: Path, target: Path) -> None:
    """Put the bytes of the day file `source` at `target`: a hard link where the file
    system allows one (no bytes copied), else a copy; atomically, replacing a stale file."""
    with atomic_path(target) as tmp:
        tmp.unlink()
        try:
            os.link(source, tmp)
        except OSError:  # another file system, or links refused: copy the bytes
            tmp.unlink(missing_ok=True)
            shutil.copyfile(source, tmp)


def find_reuse(
    config: IngestConfig,
    series_dir: Path,
    spans: dict[Path, tuple[dt.date, dt.date]],
    side: list[Digest],
    plan: IngestPlan,
    symbology: Symbology,
) -> tuple[dict[Path, Digest], Reuse] | None:
    """The inputs' digests and the days this build takes from the series' current version;
    None with --force, or without a current version of this fxstore version whose manifest
    has day keys (the inputs are hashed only then), or a day whose key is unchanged."""
    if config.force:
        return None
    current = next((v for v in list_bar_versions(series_dir) if v.is_current), None)
    manifest = None if current is None else read_bar_manifest(current)
    if manifest is None or "day_keys" not in manifest:
        return None
    if manifest.get("fxstore_version") != __version__:
        return None  # every day key holds the version: none can match
    digests = dict(zip(spans, input_digests(list(spans)), strict=True))
    keys = day_keys(plan, {digests[p]: span for p, span in spans.items()}, side, symbology)
    reuse = plan_reuse(current, keys, plan)
    return None if reuse is None else (digests, reuse)


def tasks_to_build(
    tasks: list[tuple[str, GroupTask]],
    spans: dict[Path, tuple[dt.date, dt.date]],
    reuse: Reuse,
    table: Sessions,
) -> list[tuple[str, GroupTask]]:
    """The groups with days to build, each over the files that hold those days; a file's
    days taken from the current version are skipped (counted, not built)."""
    out = []
    for key, task in tasks:
        paths = tuple(
            p
            for p in task.paths
            if p in spans and any(d not in reuse.days for d in table.between(*spans[p]))
        )
        if paths:
            read = {d for p in paths for d in table.between(*spans[p])}
            skip = frozenset(d for d in read if d in reuse.days)
            out.append((key, dataclasses.replace(task, paths=paths, skip=skip)))
    return out


def build_day(
    plan: IngestPlan,
    spans: dict[Path, tuple[dt.date, dt.date]],
    day: dt.date,
    instrument_id: int | None,
) -> DayResult:
    """Build one trading day from every input that holds it, for `instrument_id` (the
    front month chosen; None: none): a day to be taken from the current version whose
    front month is no longer the one that version chose."""
    paths = tuple(p for p, (first, last) in spans.items() if first <= day <= last)
    logger.info("building %s again: its front month is not the one of the last version", day)
    wanted = set() if instrument_id is None else {instrument_id}
    result = build_group(
        GroupTask(paths=paths, days=None, plan=plan),
        choose=lambda d, _listed: wanted if d == day else set(),
    )
    return next(d for d in result.days if d.day == day)


def as_digest(entry: list[object]) -> Digest:
    """A manifest's [name, size, sha256] as a digest."""
    name, size, sha256 = entry
    return str(name), int(str(size)), str(sha256)
