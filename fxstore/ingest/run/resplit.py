"""Parallel ingest of files whose sessions cross file boundaries (UTC-day or multi-day files).

Databento splits batch downloads by UTC day, but a CME session runs from 17:00 Chicago on
D-1 to 16:00 on D, so every file holds the end of one trading day and the start of the next
and no day can be built from one file. Such files form one group (see
:func:`fxstore.ingest.run.pipeline.plan_groups`); with several workers the group is built in
windows of `workers` files:

1. *split*, one task per file: decompress and decode it, and append each trading day's
   MBP-10 records to that day's fragment file (raw MBP10_DTYPE records, no header; made
   and read only by fxstore) in the scratch folder ``.split/`` beside the store's files;
2. *build*, one task per trading day whose files are all split: stream its fragments, in
   file order, through the same day builder a one-core run uses.

Fragments of a day are the day's records in one ts_recv order only if the files do not
overlap in time, and the symbology a day sees is the same only if no file carries
SymbolMapping records in its stream; where either fails the group is built on one core,
as before. A day's bars depend only on its records, so the files written are byte-identical
to a one-core run. At most about `workers` + 1 days of raw records are on disk at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final

import numpy as np

from fxstore.executor import TaskPool
from fxstore.ingest.dbn.reader import DbnFile, open_dbn
from fxstore.ingest.dbn.symbology import Symbology
from fxstore.ingest.run.day_builder import DayResult, GroupResult, GroupTask, build_group
from fxstore.ingest.select.activity import DaySplitter
from fxstore.market.calendar import DEFAULT_CALENDAR, sessions
from fxstore.store import os_errors

__all__ = ["SPLIT_DIR", "SplitResult", "build_split_groups", "can_split", "split_file"]

#: Scratch folder (inside a bar-key folder) for the fragments of split files.
SPLIT_DIR: Final = ".split"


@dataclass(frozen=True, slots=True)
class SplitTask:
    """Split one file of a group into per-trading-day fragments."""

    path: Path
    #: The file's position among the files being split (fragment files are named by it).
    index: int
    split_dir: Path
    chunk_records: int
    #: The calendar whose trading days the file is split by (see IngestPlan.calendar).
    calendar: str

    def describe(self) -> str:
        """The file being split, for an error line."""
        return f"{self.path.name} (splitting it by trading day)"


@dataclass(frozen=True, slots=True)
class SplitResult:
    """A split file: its fragments by trading day and what reading it found."""

    #: The input file.
    path: Path
    #: trading day → its fragment file
    fragments: dict[dt.date, Path]
    #: (file name, size in bytes, sha256)
    input: tuple[str, int, str]
    n_records: int
    #: The file, when its stream ended in a partial record (see ``ReadStats.truncated``).
    truncated: dict[str, list[int]]
    #: SymbolMapping records met while reading (0: the symbology is all in the header).
    n_symbol_mappings: int
    first_ts: int | None
    last_ts: int | None
    split_s: float
    #: The file, when records of it were passed over (see ``ReadStats.passed_over``).
    passed_over: dict[str, dict[str, int]] = field(default_factory=dict)


def can_split(group: Sequence[DbnFile]) -> bool:
    """Whether a group of files may be split and built in parallel: several files, each
    ending (by its header) no later than the next one's first record."""
    if len(group) < 2:
        return False
    for file, following in itertools.pairwise(group):
        end = file.metadata.end
        if end is None or following.first_ts_recv is None or end > following.first_ts_recv:
            return False
    return True


def split_file(task: SplitTask) -> SplitResult:
    """Stream one file and append each trading day's records to its fragment (worker side)."""
    started = time.perf_counter()
    source = open_dbn([task.path])
    splitter = DaySplitter(sessions(task.calendar))
    handles: dict[dt.date, BinaryIO] = {}
    first_ts: int | None = None
    last_ts: int | None = None
    paths: dict[dt.date, Path] = {}
    with contextlib.ExitStack() as stack:
        for chunk in source.iter_chunks(chunk_records=task.chunk_records):
            records = chunk.records
            if first_ts is None:
                first_ts = int(records["ts_recv"][0])
            last_ts = int(records["ts_recv"][-1])
            for day, run in splitter.split(records):
                if day not in handles:
                    folder = task.split_dir / day.isoformat()
                    paths[day] = folder / f"{task.index:06d}.rec"
                    with os_errors(paths[day], "write"):
                        folder.mkdir(parents=True, exist_ok=True)
                        handles[day] = stack.enter_context(open(paths[day], "wb"))
                # flushed here, so a full disk is met inside os_errors, not when closing
                with os_errors(paths[day], "write"):
                    handles[day].write(np.ascontiguousarray(run).data)
                    handles[day].flush()
    stats = source.stats
    return SplitResult(
        path=task.path,
        fragments={day: paths[day] for day in sorted(paths)},
        input=stats.inputs([task.path])[0],
        n_records=stats.n_records,
        truncated=stats.truncated(),
        n_symbol_mappings=sum(f.n_symbol_mappings for f in stats.files),
        first_ts=first_ts,
        last_ts=last_ts,
        split_s=time.perf_counter() - started,
        passed_over=stats.passed_over(),
    )


def _day_tasks(
    remote: GroupTask,
    splits: Sequence[SplitResult],
    days: Sequence[dt.date],
    symbology: Symbology,
) -> list[GroupTask]:
    """One build task per trading day, over its fragments in file order."""
    tasks = []
    for day in days:
        fragments = tuple((s.fragments[day], s.path) for s in splits if day in s.fragments)
        tasks.append(
            dataclasses.replace(
                remote,
                paths=tuple(origin for _, origin in fragments),
                days=frozenset({day}),
                fragments=fragments,
                symbology=symbology,
            )
        )
    return tasks


@dataclass(slots=True)
class _Group:
    """A group being split and built: its tasks, the files split so far, the days built."""

    remote: GroupTask
    splits: list[SplitResult] = field(default_factory=list)
    pending: dict[dt.date, None] = field(default_factory=dict)
    days: list[DayResult] = field(default_factory=list)
    build_s: float = 0.0
    ok: bool = True

    @property
    def split_done(self) -> bool:
        return len(self.splits) == len(self.remote.paths)

    @property
    def finished(self) -> bool:
        """Every file split and every day built (or given up: the caller builds it)."""
        return self.split_done and (not self.ok or not self.pending)

    def result(self) -> GroupResult | None:
        if not self.ok:
            return None
        return GroupResult(
            days=sorted(self.days, key=lambda d: d.day),
            inputs=[s.input for s in self.splits],
            n_records=sum(s.n_records for s in self.splits),
            truncated={k: v for s in self.splits for k, v in s.truncated.items()},
            build_s=self.build_s,
            passed_over={k: v for s in self.splits for k, v in s.passed_over.items()},
        )


def build_split_groups(
    pool: TaskPool,
    remotes: Sequence[GroupTask],
    split_dir: Path,
    workers: int,
    symbology: Symbology,
) -> Iterator[GroupResult | None]:
    """Build consecutive groups of files window by window: split `workers` files at once
    (across group boundaries), then build every trading day all of whose files are split.

    `remotes` are the groups' tasks as workers run them (with the parts folder). Yields
    one result per group, in order: None where its files turn out to overlap in time or
    carry SymbolMapping records, and the caller must build it on one core.
    """
    groups = [_Group(r) for r in remotes]
    files = [(g, p) for g in groups for p in g.remote.paths]
    chunk_records = remotes[0].plan.chunk_records if remotes else 1
    calendar = remotes[0].plan.calendar if remotes else DEFAULT_CALENDAR
    emitted = 0
    try:
        for lo in range(0, len(files), workers):
            window = files[lo : lo + workers]
            tasks = [
                SplitTask(p, lo + i, split_dir, chunk_records, calendar)
                for i, (_, p) in enumerate(window)
            ]
            for (group, _), split in zip(window, pool.map(split_file, tasks), strict=True):
                group.ok = group.ok and _consistent([*group.splits[-1:], split])
                group.splits.append(split)
                group.pending |= dict.fromkeys(split.fragments)
            builds: list[tuple[_Group, GroupTask]] = []
            for group in groups:
                if not group.ok or not group.pending:
                    continue
                # Files do not overlap: only a group's latest day can go on in its next file.
                last = max(group.pending)
                ready = [d for d in sorted(group.pending) if group.split_done or d < last]
                for task in _day_tasks(group.remote, group.splits, ready, symbology):
                    builds.append((group, task))
                for day in ready:
                    del group.pending[day]
            results = pool.map(build_group, [t for _, t in builds])
            for (group, task), result in zip(builds, results, strict=True):
                group.days += result.days
                group.build_s += result.build_s
                shutil.rmtree(split_dir / min(task.days or ()).isoformat(), ignore_errors=True)
            while emitted < len(groups) and groups[emitted].finished:
                group = groups[emitted]
                group.build_s += sum(s.split_s for s in group.splits)
                yield group.result()
                emitted += 1
    finally:
        shutil.rmtree(split_dir, ignore_errors=True)


def _consistent(splits: Sequence[SplitResult]) -> bool:
    """No SymbolMapping records in the streams, and each file ends before the next begins."""
    if any(s.n_symbol_mappings for s in splits):
        return False
    stamps = [(s.first_ts, s.last_ts) for s in splits if s.first_ts is not None]
    return all(
        a[1] is not None and b[0] is not None and a[1] <= b[0]
        for a, b in itertools.pairwise(stamps)
    )
