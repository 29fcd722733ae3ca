"""Generate the synthetic market: plan the trading days, then write their files, in this
process or in parallel over files (:mod:`fxstore.synth.tasks`), with the same bytes."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from fxstore.config import SynthConfig
from fxstore.config._validate import validate_int
from fxstore.errors import InvalidInputError
from fxstore.executor import open_local_pool
from fxstore.market.calendar import is_trading_day, trading_days_between
from fxstore.store import list_temps
from fxstore.synth.day import DayPlan, DayVolume, daily_log_vol, plan_day
from fxstore.synth.definitions import definition_file_name, write_definitions
from fxstore.synth.prices import anchor_levels
from fxstore.synth.record import SynthRecord
from fxstore.synth.signal import signal_file_name
from fxstore.synth.tasks import (
    FileTask,
    FileWritten,
    trading_day_tasks,
    utc_day_tasks,
    write_file,
)

__all__ = ["SynthSummary", "generate_market"]

logger = logging.getLogger(__name__)

#: Records generated per kernel call (about 12 MB of buffer).
_CHUNK_RECORDS: Final = 32_768
#: The record of written days is saved at most this often while days are written (a save
#: rewrites it whole: at one save per day, a pool writing 40 days a second would wait on it).
_SAVE_EVERY_S: Final = 1.0
#: Most worker processes `generate_market` takes.
MAX_WORKERS: Final = 1024


@dataclass(frozen=True, slots=True)
class SynthSummary:
    """What :func:`generate_market` wrote."""

    #: The DBN MBP-10 files, in time order.
    files: tuple[Path, ...]
    #: The definition file: one record per instrument listed, as Databento delivers one.
    definitions: Path
    trading_days: tuple[dt.date, ...]
    #: Records over all files.
    n_records: int
    #: Per trading day and instrument: volume, trades and records (the roll schedule's truth).
    day_volumes: tuple[DayVolume, ...]
    elapsed_s: float
    #: Trading days left as an earlier run with the same options wrote them (all of them:
    #: nothing was written; some: a stopped run resumed).
    days_kept: int = 0

    @property
    def is_up_to_date(self) -> bool:
        """Every day was there already: no file was written."""
        return self.days_kept == len(self.trading_days)

    def volume_by_symbol(self) -> dict[str, int]:
        """Contracts traded per raw symbol over the whole range."""
        totals: dict[str, int] = {}
        for row in self.day_volumes:
            totals[row.raw_symbol] = totals.get(row.raw_symbol, 0) + row.volume
        return totals

    def volumes_on(self, trading_day: dt.date) -> dict[str, int]:
        """Contracts traded per raw symbol on `trading_day` (empty if it was not generated)."""
        return {r.raw_symbol: r.volume for r in self.day_volumes if r.trading_day == trading_day}


def _days_to_keep(
    config: SynthConfig, record: SynthRecord, plans: list[DayPlan]
) -> dict[dt.date, tuple[Path, list[DayVolume]]]:
    """The days an earlier run with the same options wrote that stay as they are: any of
    them for one file per trading day; for UTC-day files (shared by two days) all or none."""
    kept = {}
    for plan in plans:
        found = record.written_day(plan.trading_day)
        if found is not None:
            kept[plan.trading_day] = (found[0][0], found[1])
    if config.split == "trading-day":
        return kept
    return kept if len(kept) == len(plans) and record.shared_intact() else {}


def _target_names(task: FileTask) -> set[str]:
    """The files `task` writes: its DBN file and the side files of the days ending in it."""
    sides = {signal_file_name(p.plan.trading_day) for p in task.parts if p.is_last}
    return {task.path.name, *sides}


@contextlib.contextmanager
def _saved_at_exit(record: SynthRecord) -> Iterator[None]:
    """Save `record`'s new days when the block ends, stopped by an error or Ctrl-C too: the
    days it holds are written whole, and a run started again keeps them."""
    try:
        yield
    finally:
        record.flush()


@contextlib.contextmanager
def _file_results(
    tasks: list[FileTask], workers: int, out_dir: Path
) -> Iterator[Iterator[FileWritten]]:
    """The results of `tasks`, in order: made in this process, or by a local pool of
    `workers` processes. Leaving the block early stops the pool and deletes the temporary
    files of the writes it cut short (a task in this process deletes its own)."""
    if workers <= 1 or len(tasks) <= 1:
        yield map(write_file, tasks)
        return
    try:
        with open_local_pool(min(workers, len(tasks))) as pool:
            yield pool.imap(write_file, tasks)
    except BaseException:
        names = set().union(*(_target_names(t) for t in tasks))
        for tmp in list_temps(out_dir):
            if tmp.name[1:].rsplit(".", 2)[0] in names:
                tmp.unlink(missing_ok=True)
        raise


def _write_days(
    plans: list[DayPlan],
    kept: dict[dt.date, tuple[Path, list[DayVolume]]],
    record: SynthRecord,
    results: contextlib.AbstractContextManager[Iterator[FileWritten]],
    on_progress: Callable[[dt.date], None] | None,
    *,
    by_day: bool,
) -> tuple[list[Path], list[DayVolume]]:
    """Take the days of `plans` in order, as `kept` or from the files `results` brings (each
    written day added to `record`); the DBN files (of UTC-day files, those written) and the
    volumes. `by_day`: one file per trading day, which is the day's own."""
    files: list[Path] = []
    volumes: list[DayVolume] = []
    finished: dict[dt.date, list[DayVolume]] = {}
    saved = time.monotonic()
    with results as written_files, _saved_at_exit(record):
        for plan in plans:
            if plan.trading_day in kept:
                path, day_volumes = kept[plan.trading_day]
                files.extend([path] if by_day else [])  # a UTC-day one: the signal file
            else:
                while plan.trading_day not in finished:  # the files up to the day's last
                    written = next(written_files)
                    files.append(written.path)
                    for day in written.days:
                        own = [written.path] if by_day else []
                        record.add_day(day.trading_day, [*own, day.signal_file], [*day.volumes])
                        finished[day.trading_day] = [*day.volumes]
                day_volumes = finished.pop(plan.trading_day)
                if time.monotonic() - saved >= _SAVE_EVERY_S:
                    record.flush()
                    saved = time.monotonic()
            volumes.extend(day_volumes)
            if on_progress is not None:
                on_progress(plan.trading_day)
    return files, volumes


def _next_trading_day(day: dt.date) -> dt.date:
    day += dt.timedelta(days=1)
    while not is_trading_day(day):
        day += dt.timedelta(days=1)
    return day


def _plan_days(config: SynthConfig) -> list[DayPlan]:
    days = trading_days_between(config.start, config.end)
    if not days:
        raise InvalidInputError(
            f"No CME trading day between `start` {config.start} and `end` {config.end} "
            "(weekends and holidays have no session); widen the range."
        )
    following = _next_trading_day(days[-1])
    log_vol = daily_log_vol(config)
    anchors = anchor_levels(config.seed, [*days, following], config.base_price, log_vol)
    nexts = [*days[1:], following]
    return [plan_day(config, d, anchors[d], anchors[n]) for d, n in zip(days, nexts, strict=True)]


def generate_market(
    config: SynthConfig,
    out_dir: Path,
    *,
    workers: int = 1,
    on_progress: Callable[[dt.date], None] | None = None,
) -> SynthSummary:
    """Write the synthetic market of `config` into `out_dir` as DBN MBP-10 files.

    Parameters
    ----------
    config
        Date range, size, seed, signal and layout of the market.
    out_dir
        Folder for the ``glbx-mdp3-YYYYMMDD.mbp-10.dbn.zst`` files; created if missing.
        Existing files of the same names are replaced (atomically).
    workers
        Processes writing files at once (1: all in this process). Every file is made from
        the seed and its days alone, so the bytes are the same for any count.
    on_progress
        Called with each trading day once its records are made, in date order.

    Returns
    -------
    SynthSummary
        The files written, trading days, record count and per-day volumes per instrument.

    Raises
    ------
    InvalidInputError
        The range holds no trading day, `out_dir` is not a folder, or `workers` is not a
        whole number in [1, 1024].

    Examples
    --------
    >>> cfg = SynthConfig(start=dt.date(2024, 3, 1), end=dt.date(2024, 3, 8))  # doctest: +SKIP
    >>> generate_market(cfg, Path("data/synth")).files[0].name  # doctest: +SKIP
    'glbx-mdp3-20240301.mbp-10.dbn.zst'
    """
    started = time.perf_counter()
    validate_int("workers", workers, 1, MAX_WORKERS)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidInputError(f"`out_dir` must be a folder, was the file {out_dir}.")
    plans = _plan_days(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    record = SynthRecord(out_dir, config)
    kept = _days_to_keep(config, record, plans)
    if len(kept) < len(plans):
        record.forget_shared()  # rewritten below: definitions, and UTC-day files
    todo = [p for p in plans if p.trading_day not in kept]
    by_day = config.split == "trading-day"
    make_tasks = trading_day_tasks if by_day else utc_day_tasks
    tasks = make_tasks(config, out_dir, todo, _CHUNK_RECORDS) if todo else []
    results = _file_results(tasks, workers, out_dir)
    files, volumes = _write_days(plans, kept, record, results, on_progress, by_day=by_day)
    definitions = out_dir / definition_file_name(plans[0].trading_day, plans[-1].trading_day)
    if not by_day and len(kept) == len(plans):
        files = [p for p in record.shared_paths() if p != definitions]
    shared = [*([] if by_day else files), definitions]
    if len(kept) < len(plans) or not record.shared_written([p.name for p in shared]):
        write_definitions(config, plans, out_dir)
        record.set_shared(shared)
    summary = SynthSummary(
        files=tuple(files),
        definitions=definitions,
        trading_days=tuple(p.trading_day for p in plans),
        n_records=sum(v.n_records for v in volumes),
        day_volumes=tuple(volumes),
        elapsed_s=time.perf_counter() - started,
        days_kept=len(kept),
    )
    logger.info(
        "synthetic %s: %d trading days, %d records, %d files in %.1f s",
        config.parent_symbol,
        len(plans),
        summary.n_records,
        len(files),
        summary.elapsed_s,
    )
    return summary
