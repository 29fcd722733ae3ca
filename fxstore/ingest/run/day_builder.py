"""Worker side of ingest: stream a group of DBN files and build each trading day's bars.

A group is a run of files no trading day crosses out of, so groups are independent and run
in a process pool. Per day the worker streams the records of the candidate instruments (one
in id mode; every outright of the root listed that day in front-month mode, since which one
is the front month depends on earlier groups; the chosen one when the selector runs in the
same process) chunk by chunk into one BarBuilder each, counts every instrument's activity,
and finishes the bars once the day is over: no day's records are ever held in memory.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pyarrow as pa

from fxstore.config import InstrumentSelection
from fxstore.errors import InvalidInputError, SchemaError
from fxstore.ingest.bars.builder import BarBuilder
from fxstore.ingest.dbn.merge import Mbp10Chunk
from fxstore.ingest.dbn.reader import DbnSource, open_dbn
from fxstore.ingest.dbn.symbology import Symbology
from fxstore.ingest.run.day_files import DayFile, combine_instruments, write_day_file
from fxstore.ingest.run.fragments import FragmentSource
from fxstore.ingest.run.plan import IngestPlan
from fxstore.ingest.select.activity import (
    DaySplitter,
    count_by_instrument,
    last_trade_by_instrument,
)
from fxstore.ingest.select.front_month import symbols_listed
from fxstore.market.contracts import parse_outright
from fxstore.market.master import contract_expiry
from fxstore.market.plausible import plausible_range

if TYPE_CHECKING:
    from fxstore.remote import InputObject
    from fxstore.remote.s3 import StoreUrl

#: Instrument ids to keep on a day, given the symbols listed that day; None keeps all.
Chooser = Callable[[dt.date, dict[int, str]], set[int] | None]


class RecordSource(Protocol):
    """Where a group's records come from: its DBN files, or one day's fragments."""

    @property
    def symbology(self) -> Symbology: ...

    def iter_chunks(self, *, chunk_records: int) -> Iterator[Mbp10Chunk]: ...


@dataclass(frozen=True, slots=True)
class ObjectIO:
    """What a task needs to do its I/O in S3 from any node (no folder shared with the driver):
    :func:`fxstore.ingest.run.objects.build_group_in_task` reads it."""

    #: The task's inputs kept in object storage (its paths name them:
    #: :func:`fxstore.ingest.run.objects.object_path`).
    inputs: tuple[InputObject, ...] = ()
    #: The store's bucket and prefix, where the task puts its day files; None: into the
    #: task's parts folder (a folder the driver shares).
    store: StoreUrl | None = None
    #: The store's S3-compatible endpoint (None: AWS, or ``AWS_ENDPOINT_URL`` of the node).
    endpoint: str | None = None
    #: The store-relative folder of the task's parts folder (the version's parts folder).
    parts_rel: str = ""


@dataclass(frozen=True, slots=True)
class GroupTask:
    """One unit of parallel work: files whose trading days no other group has."""

    paths: tuple[Path, ...]
    #: Trading days the files may hold (from their metadata spans); None: any.
    days: frozenset[dt.date] | None
    #: The run's plan: instrument selection, root, bar rule, chunk size.
    plan: IngestPlan
    #: Worker mode: write each built day's files here (see :mod:`._day_files`) and send
    #: back only their descriptions; None: keep the tables (in-process runs).
    parts_dir: Path | None = None
    #: Parquet metadata of the day files (worker mode).
    metadata: dict[bytes, bytes] | None = None
    #: Split-file mode (:mod:`._resplit`): the day's fragments, each with the input file
    #: it came from, read instead of `paths`; with the symbology of the whole input.
    fragments: tuple[tuple[Path, Path], ...] | None = None
    symbology: Symbology | None = None
    #: Tasks that share no folder with the driver: inputs and day files in S3
    #: (:mod:`fxstore.ingest.run.objects`); None: paths and `parts_dir` are shared folders.
    objects: ObjectIO | None = None
    #: Build only this (trading day, instrument_id): a day built again for the front month
    #: the driver chose, when it was not among the task's candidates; None: every day.
    only: tuple[dt.date, int] | None = None
    #: Trading days taken from the series' current version (:mod:`.reuse`): their records
    #: (in a file read for other days) are counted, never built into bars.
    skip: frozenset[dt.date] = frozenset()

    def describe(self) -> str:
        """The group's files and trading days, for an error line ("a.dbn.zst … (2024-03-05)")."""
        names = self.paths[0].name + (f" … {self.paths[-1].name}" if len(self.paths) > 1 else "")
        if not self.days:
            return names
        days = sorted(self.days)
        span = days[0].isoformat() + (f" … {days[-1].isoformat()}" if len(days) > 1 else "")
        return f"{names} (trading day{'s' if len(days) > 1 else ''} {span})"


#: The key of the one file of a day in modes all and id=N (all instruments together).
ALL_INSTRUMENTS = -1


@dataclass(slots=True)
class DayResult:
    """What one trading day produced: activity of every instrument, bars of the candidates."""

    day: dt.date
    #: instrument_id → raw symbol of every instrument the symbology lists that day.
    listed: dict[int, str]
    #: instrument_id → (records, traded volume) of every instrument with records that day.
    activity: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: instrument_id → that day's bars (candidates only).
    bars: dict[int, pa.Table] = field(default_factory=dict)
    #: Instruments whose bars were built (with or without bars).
    built: set[int] = field(default_factory=set)
    #: instrument_id → (records, traded volume) outside the session: its pre-open (the
    #: maintenance window, a weekend or a holiday) and post-close; in no bar.
    out_of_session: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: Worker mode: the day's files in the parts folder, by instrument id (front month) or
    #: ALL_INSTRUMENTS; a built instrument with no bars has none.
    parts: dict[int, DayFile] | None = None
    #: instrument_id → price (DBN fixed point) of its last trade of the day; kept only when
    #: the run records roll transitions (``IngestPlan.records_transitions``).
    last_trade: dict[int, int] = field(default_factory=dict)
    #: ts_recv of the day's last record (any instrument), ns UTC; -1 before any.
    last_ts_recv: int = -1


@dataclass(frozen=True, slots=True)
class GroupResult:
    """A finished group: its days in order, and facts about its input files."""

    days: list[DayResult]
    #: (file name, size in bytes, sha256) of each file of the group.
    inputs: list[tuple[str, int, str]]
    n_records: int
    #: Inputs that ended in a partial record (see ``ReadStats.truncated``).
    truncated: dict[str, list[int]]
    #: Seconds the group took to build (wall time in its process).
    build_s: float
    #: Inputs with records passed over, by rtype (see ``ReadStats.passed_over``).
    passed_over: dict[str, dict[str, int]] = field(default_factory=dict)


def outright_chooser(root: str, months: str | None = None, depth: int = 1) -> Chooser:
    """The ``depth + 1`` nearest live outrights of `root` listed that day (front-month
    mode, in parallel), of the series' `months` when it holds only some: the front month is
    one of the two nearest, and the contract `depth` - 1 places after it one of these,
    unless a contract further out led yesterday's volume, and then the parent builds that
    day again for the contract it chose."""

    def choose(day: dt.date, listed: dict[int, str]) -> set[int] | None:
        live = []
        for instrument_id, symbol in listed.items():
            contract = parse_outright(symbol, root, day)
            if contract is None or (months is not None and contract.month_code not in months):
                continue
            if contract_expiry(root, contract) >= day:
                live.append((contract, instrument_id))
        return {instrument_id for _, instrument_id in sorted(live)[: depth + 1]}

    return choose


#: Front-month workers drop a candidate for the rest of a day once the candidates have
#: traded PRUNE_MIN_VOLUME contracts that day and its share of that volume is below
#: PRUNE_SHARE. The front month is chosen from the previous day's volume, and a contract that
#: led yesterday does not trade under 15% of the pair today (if one ever did, the parent
#: builds that day again, so the output cannot change). Outside roll weeks a worker then
#: builds one contract, not two: the second costs 5-8% more CPU on one core
#: (``bench_ingest.py --parts candidates``, bench/results/ingest_candidates.json).
PRUNE_MIN_VOLUME = 2000
PRUNE_SHARE = 0.15


def _pruned(wanted: set[int], activity: dict[int, tuple[int, int]]) -> set[int]:
    """The candidates worth building on: all of them until enough volume has traded."""
    volume = {key: activity.get(key, (0, 0))[1] for key in wanted}
    total = sum(volume.values())
    if total < PRUNE_MIN_VOLUME:
        return wanted
    return {key for key, v in volume.items() if v >= PRUNE_SHARE * total}


def selection_chooser(
    selection: InstrumentSelection, root: str | None, months: str | None = None, depth: int = 1
) -> Chooser:
    """The chooser of a parallel group for `selection` (front month: of `months` only, the
    contracts around the one at `depth`)."""
    if selection.mode == "all":
        return lambda _day, _listed: None
    if selection.mode == "id":
        wanted = {int(selection.instrument_id or 0)}
        return lambda _day, _listed: wanted
    return outright_chooser(root or "", months, depth)


def _only_chooser(only_day: dt.date, instrument_id: int) -> Chooser:
    """The chooser that builds `instrument_id` on `only_day` and nothing else."""
    return lambda day, _listed: {instrument_id} if day == only_day else set()


def _start_builder(day: DayResult, instrument_id: int, plan: IngestPlan) -> BarBuilder:
    open_ns, close_ns = plan.sessions.bounds(day.day)
    contract = day.listed.get(instrument_id, f"id{instrument_id}")
    lo, hi, _ = plausible_range(contract)
    try:
        tick: float | None = plan.master.facts(contract, day.day).tick_size
    except InvalidInputError:  # a spread fxstore cannot parse and no definition names
        tick = None
    return BarBuilder(
        plan.bars_for(contract, day.day),
        trading_day=day.day,
        contract=contract,
        instrument_id=instrument_id,
        session_open_ns=open_ns,
        session_close_ns=close_ns,
        price_range=(lo, hi),
        tick_size=tick,
    )


def _finish_day(day: DayResult, builders: dict[int, BarBuilder], task: GroupTask) -> None:
    for instrument_id, builder in sorted(builders.items()):
        day.bars[instrument_id] = builder.finish()
        day.built.add(instrument_id)
    builders.clear()
    if task.parts_dir is not None:
        _write_parts(day, task.parts_dir, task.metadata or {}, task.plan.selection.mode)


def _write_parts(day: DayResult, parts_dir: Path, metadata: dict[bytes, bytes], mode: str) -> None:
    """Write the day's files into the parts folder and drop its tables (worker mode)."""
    if mode == "front-month":
        tables = {i: t for i, t in day.bars.items() if t.num_rows}
    else:
        combined = combine_instruments(day.bars)
        tables = {ALL_INSTRUMENTS: combined} if combined is not None and combined.num_rows else {}
    stem = day.day.isoformat()
    day.parts = {
        key: write_day_file(table, parts_dir / f"{stem}.{key}.parquet", metadata)
        for key, table in tables.items()
    }
    day.bars.clear()


def _count_out_of_session(day: DayResult, run: np.ndarray, plan: IngestPlan) -> None:
    """Count `run`'s records outside the session: before its open (the pre-open) and after
    its close (a weekend's post-close); a run is sorted by ts_recv."""
    open_ns, close_ns = plan.sessions.bounds(day.day)
    ts = run["ts_recv"]
    if not len(ts) or (int(ts[0]) >= open_ns and int(ts[-1]) < close_ns):
        return
    n_pre, n_in = (int(i) for i in np.searchsorted(ts, np.array([open_ns, close_ns], np.uint64)))
    for part in (run[:n_pre], run[n_in:]):
        for key, (n, v) in count_by_instrument(part).items():
            old = day.out_of_session.get(key, (0, 0))
            day.out_of_session[key] = (old[0] + n, old[1] + v)


def _iter_days(
    source: RecordSource,
    task: GroupTask,
    chooser: Chooser,
    on_day_end: Callable[[DayResult], None] | None,
    prune: bool = False,
) -> Iterator[DayResult]:
    """Stream the group's records; yield each trading day once it is over and built.

    Each kept instrument's records go to its day's BarBuilder chunk by chunk: the chunk
    itself, with the rows of that instrument when it holds others too. With `prune`,
    candidates that trade little that day are dropped (:data:`PRUNE_SHARE`).
    """
    current: DayResult | None = None
    wanted: set[int] | None = None
    builders: dict[int, BarBuilder] = {}
    splitter = DaySplitter(task.plan.sessions)
    track_trades = task.plan.records_transitions
    for chunk in source.iter_chunks(chunk_records=task.plan.chunk_records):
        for day, run in splitter.split(chunk.records):
            if current is None or day != current.day:
                if current is not None:
                    _finish_day(current, builders, task)
                    if on_day_end:
                        on_day_end(current)
                    yield current
                if task.days is not None and day not in task.days:
                    raise SchemaError(
                        f"{chunk.path}: holds records of trading day {day}, outside the span "
                        "its metadata header declares; re-run with --workers 1."
                    )
                current = DayResult(day, symbols_listed(source.symbology, day, task.plan.sessions))
                wanted = set() if day in task.skip else chooser(day, current.listed)
            _count_out_of_session(current, run, task.plan)
            current.last_ts_recv = max(current.last_ts_recv, int(run["ts_recv"][-1]))
            if track_trades:  # the prices of a roll, as known when the next session opens
                current.last_trade |= last_trade_by_instrument(run)
            counts = count_by_instrument(run)
            for key, (n, v) in counts.items():
                old = current.activity.get(key, (0, 0))
                current.activity[key] = (old[0] + n, old[1] + v)
                if wanted is None or key in wanted:
                    if key not in builders:
                        builders[key] = _start_builder(current, key, task.plan)
                    if n == len(run):
                        builders[key].update(run)
                    else:  # read in place: a copy would move the records through memory again
                        builders[key].update(run, np.flatnonzero(run["instrument_id"] == key))
            if prune and wanted is not None and len(wanted) > 1:
                wanted = _pruned(wanted, current.activity)
                for key in set(builders) - wanted:
                    del builders[key]
    if current is not None:
        _finish_day(current, builders, task)
        if on_day_end:
            on_day_end(current)
        yield current


def build_group(
    task: GroupTask,
    *,
    choose: Chooser | None = None,
    on_day: Callable[[DayResult], None] | None = None,
    source: DbnSource | None = None,
) -> GroupResult:
    """Build every trading day of one group (in a worker process, or in-process).

    Parameters
    ----------
    task
        The group's files and settings.
    choose
        Which instruments to build each day; default: by ``task.plan.selection`` (in front-month
        mode the two nearest live outrights, less one that trades little that day). An
        in-process run passes the front-month selector here, so one core builds only what
        the output needs.
    on_day
        Called with each day as soon as it is built (in-process writing).
    source
        The group's files already opened and checked (in-process runs); a worker process
        opens ``task.paths`` itself.
    """
    started = time.perf_counter()
    plan = task.plan
    roll = plan.roll
    if task.only is not None and choose is None:
        choose = _only_chooser(*task.only)
    chooser = choose or selection_chooser(plan.selection, plan.root, roll.months, roll.depth)
    # Pruning drops a candidate that trades little today: right for the volume rule's front
    # month (a contract that led yesterday trades well today), not for rules that may pick
    # one that trades less (a calendar roll ahead of the volume, open interest, a depth).
    prune = (
        choose is None
        and plan.selection.mode == "front-month"
        and roll.rule == "volume"
        and roll.depth == 1
    )
    if task.fragments is not None:  # one day of split files: their inputs are counted there
        assert task.symbology is not None
        fragments = FragmentSource(task.fragments, task.symbology)
        days = list(_iter_days(fragments, task, chooser, on_day, prune))
        elapsed = time.perf_counter() - started
        return GroupResult(days, [], fragments.n_records, {}, elapsed)
    if source is None:
        source = open_dbn(list(task.paths))
    days = list(_iter_days(source, task, chooser, on_day, prune))
    stats = source.stats
    inputs = stats.inputs(task.paths)
    elapsed = time.perf_counter() - started
    return GroupResult(
        days, inputs, stats.n_records, stats.truncated(), elapsed, stats.passed_over()
    )
