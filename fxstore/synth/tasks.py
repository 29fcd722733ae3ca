"""The synthetic market's DBN files as independent tasks, one per file, for worker processes.

Every trading day is made from the seed, its date and its plan alone (:mod:`fxstore.synth.day`;
the plan carries the only state one day hands the next, the index anchors, computed first
and serially by :func:`fxstore.synth.prices.anchor_levels`). So each file can be written by
its own process, and the bytes are those of a serial run whatever the number of processes.

A file per trading day is one day's records. A UTC-day file holds the end of the trading day
that closes on its date and the start of the one whose session opens on it: its task runs
the second day's kernels from its pre-open up to midnight and stops there, and the task of
the next date runs that day again from the start (the evening before midnight UTC, 2-3%
of a day's records, is made twice). The task where a day ends writes the day's planted-signal
file and reports its volumes.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.config import SynthConfig
from fxstore.ingest import MBP10_DTYPE, DbnMetadata
from fxstore.market.calendar import NS_PER_DAY
from fxstore.store import os_errors
from fxstore.synth.day import DayPlan, DaySimulation, DayVolume
from fxstore.synth.signal import SAMPLES_PER_HALF_LIFE, SignalLog, signal_file_name
from fxstore.synth.writer import DbnFileWriter, dbn_file_name, mbp10_metadata, utc_date_of

__all__ = [
    "DayPart",
    "DayWritten",
    "FileTask",
    "FileWritten",
    "trading_day_tasks",
    "utc_day_tasks",
    "write_file",
]

logger = logging.getLogger(__name__)

#: Past every timestamp: a part that ends with its day.
_NEVER: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class DayPart:
    """The records of one trading day that go into one file."""

    plan: DayPlan
    #: ts_recv range of the day's records that go into the file: [start_ns, end_ns).
    start_ns: int
    end_ns: int
    #: The day ends in this file: its task writes the day's signal file and reports it.
    is_last: bool


@dataclass(frozen=True, slots=True)
class FileTask:
    """One DBN file to write: its path, header and the parts of days it holds, in time
    order. Picklable: a worker process gets it whole."""

    config: SynthConfig
    path: Path
    metadata: DbnMetadata
    parts: tuple[DayPart, ...]
    #: Records generated per kernel call (the buffer's length; it does not change the bytes).
    chunk_records: int

    def describe(self) -> str:
        """The file, for error lines."""
        return self.path.name


@dataclass(frozen=True, slots=True)
class DayWritten:
    """A trading day whose records are all written: its side file and volumes."""

    trading_day: dt.date
    signal_file: Path
    volumes: tuple[DayVolume, ...]


@dataclass(frozen=True, slots=True)
class FileWritten:
    """What :func:`write_file` wrote: the DBN file and the days that end in it."""

    path: Path
    days: tuple[DayWritten, ...]


def trading_day_tasks(
    config: SynthConfig, out_dir: Path, plans: list[DayPlan], chunk_records: int
) -> list[FileTask]:
    """One task per trading day of `plans`: the day's file, spanning its session; its
    mappings cover the session's two UTC dates."""
    return [
        FileTask(
            config=config,
            path=out_dir / dbn_file_name(plan.trading_day),
            metadata=mbp10_metadata(
                config.parent_symbol,
                plan.first_ns,
                plan.close_ns,
                list(plan.instruments),
                utc_date_of(plan.first_ns),
                utc_date_of(plan.close_ns) + dt.timedelta(days=1),
            ),
            parts=(DayPart(plan, 0, _NEVER, is_last=True),),
            chunk_records=chunk_records,
        )
        for plan in plans
    ]


def utc_day_tasks(
    config: SynthConfig, out_dir: Path, plans: list[DayPlan], chunk_records: int
) -> list[FileTask]:
    """One task per UTC date that `plans` (consecutive trading days, ascending) have
    records on, as Databento splits batch downloads."""
    dates = sorted(
        {
            utc_date_of(plan.first_ns) + dt.timedelta(days=k)
            for plan in plans
            for k in range((utc_date_of(plan.close_ns) - utc_date_of(plan.first_ns)).days + 1)
        }
    )
    tasks = []
    for date in dates:
        day_start = (date - dt.date(1970, 1, 1)).days * NS_PER_DAY
        day_end = day_start + NS_PER_DAY
        touching = [p for p in plans if p.first_ns < day_end and p.close_ns > day_start]
        meta = mbp10_metadata(
            config.parent_symbol,
            max(day_start, plans[0].first_ns),
            min(day_end, plans[-1].close_ns),
            [inst for p in touching for inst in p.instruments],
            date,
            date + dt.timedelta(days=1),
        )
        parts = tuple(
            DayPart(p, day_start, day_end, is_last=utc_date_of(p.close_ns) == date)
            for p in touching
        )
        tasks.append(FileTask(config, out_dir / dbn_file_name(date), meta, parts, chunk_records))
    return tasks


def write_file(task: FileTask) -> FileWritten:
    """Run the kernels of `task`'s days and write its file (and the side files of the days
    that end in it). Runs in a worker process or in the caller's."""
    buffer = np.empty(task.chunk_records, dtype=MBP10_DTYPE)
    days = []
    # An OSError names the file it was writing (a worker's too: the error travels back).
    with (
        os_errors(task.path, "write"),
        DbnFileWriter(task.path, task.metadata, task.config.compression_level) as writer,
    ):
        for part in task.parts:
            day = _write_part(task.config, part, writer, buffer)
            if day is not None:
                days.append(day)
        path = writer.commit()
    return FileWritten(path, tuple(days))


def _write_part(
    config: SynthConfig, part: DayPart, writer: DbnFileWriter, buffer: npt.NDArray[np.void]
) -> DayWritten | None:
    """Write the records of `part` into `writer`; the day's side file and volumes when it
    ends here."""
    plan = part.plan
    sim = DaySimulation(config, plan)
    signal = SignalLog(writer.path.parent, config.signal_half_life // SAMPLES_PER_HALF_LIFE)
    signal.start_day()
    for records in sim.iter_chunks(buffer):
        ts = records["ts_recv"]
        if not part.is_last and int(ts[0]) >= part.end_ns:
            return None  # the rest of the day goes into the next file
        # Packets never straddle UTC midnight (the kernels see to it), so cutting at it is safe.
        lo, hi = np.searchsorted(ts, [part.start_ns, part.end_ns])
        if hi > lo:
            writer.write(records[lo:hi])
        if int(ts[0]) >= plan.open_ns:  # not the pre-open's chunks
            signal.observe(records)
    if not part.is_last:
        return None
    with os_errors(writer.path.parent / signal_file_name(plan.trading_day), "write"):
        signal_file = signal.end_day(plan.trading_day, *sim.signal_stream())
    logger.debug("generated trading day %s", plan.trading_day)
    return DayWritten(plan.trading_day, signal_file, sim.volumes())
