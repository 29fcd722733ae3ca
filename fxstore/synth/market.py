"""Generate the synthetic market: plan each trading day, run its kernels, write its files."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt

from fxstore.config import SynthConfig
from fxstore.errors import InvalidInputError
from fxstore.ingest import MBP10_DTYPE
from fxstore.market.calendar import NS_PER_DAY, is_trading_day, trading_days_between
from fxstore.synth.day import DayPlan, DaySimulation, DayVolume, daily_log_vol, plan_day
from fxstore.synth.definitions import definition_file_name, write_definitions
from fxstore.synth.prices import anchor_levels
from fxstore.synth.record import SynthRecord
from fxstore.synth.signal import SAMPLES_PER_HALF_LIFE, SignalLog
from fxstore.synth.writer import DbnFileWriter, dbn_file_name, mbp10_metadata, utc_date_of

__all__ = ["SynthSummary", "generate_market"]

logger = logging.getLogger(__name__)

#: Records generated per kernel call (about 12 MB of buffer).
_CHUNK_RECORDS: Final = 32_768


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


class _Layout(Protocol):
    def start_day(self, plan: DayPlan) -> None: ...
    def write(self, records: npt.NDArray[np.void]) -> None: ...
    def end_day(self) -> None: ...
    def finish(self) -> tuple[Path, ...]: ...
    def abort(self) -> None: ...


class _TradingDayFiles:
    """One file per trading day, spanning its session; mappings cover its two UTC dates."""

    def __init__(self, config: SynthConfig, out_dir: Path) -> None:
        self._config = config
        self._out_dir = out_dir
        self._writer: DbnFileWriter | None = None
        self._files: list[Path] = []

    def start_day(self, plan: DayPlan) -> None:
        meta = mbp10_metadata(
            self._config.parent_symbol,
            plan.first_ns,
            plan.close_ns,
            list(plan.instruments),
            utc_date_of(plan.first_ns),
            utc_date_of(plan.close_ns) + dt.timedelta(days=1),
        )
        path = self._out_dir / dbn_file_name(plan.trading_day)
        self._writer = DbnFileWriter(path, meta, self._config.compression_level)

    def write(self, records: npt.NDArray[np.void]) -> None:
        assert self._writer is not None  # start_day comes first
        self._writer.write(records)

    def end_day(self) -> None:
        assert self._writer is not None
        self._files.append(self._writer.commit())
        self._writer = None

    def keep_day(self, path: Path) -> None:
        """A day's file an earlier run wrote, left as it is."""
        self._files.append(path)

    @property
    def last_file(self) -> Path:
        return self._files[-1]

    def finish(self) -> tuple[Path, ...]:
        return tuple(self._files)

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()


class _UtcDayFiles:
    """One file per UTC calendar day, as Databento splits batch downloads."""

    def __init__(self, config: SynthConfig, out_dir: Path, plans: list[DayPlan]) -> None:
        self._config = config
        self._out_dir = out_dir
        self._plans = plans
        self._writer: DbnFileWriter | None = None
        self._date: dt.date | None = None
        self._files: list[Path] = []

    def start_day(self, plan: DayPlan) -> None:
        pass

    def _open(self, date: dt.date) -> DbnFileWriter:
        day_start = (date - dt.date(1970, 1, 1)).days * NS_PER_DAY
        day_end = day_start + NS_PER_DAY
        touching = [p for p in self._plans if p.first_ns < day_end and p.close_ns > day_start]
        meta = mbp10_metadata(
            self._config.parent_symbol,
            max(day_start, self._plans[0].first_ns),
            min(day_end, self._plans[-1].close_ns),
            [inst for p in touching for inst in p.instruments],
            date,
            date + dt.timedelta(days=1),
        )
        path = self._out_dir / dbn_file_name(date)
        return DbnFileWriter(path, meta, self._config.compression_level)

    def write(self, records: npt.NDArray[np.void]) -> None:
        ts = records["ts_recv"].astype(np.int64)
        days = ts // NS_PER_DAY
        start = 0
        # Packets never straddle UTC midnight (the kernels see to it), so cutting at it is safe.
        for day in np.unique(days):
            end = int(np.searchsorted(ts, (int(day) + 1) * NS_PER_DAY))
            date = dt.date(1970, 1, 1) + dt.timedelta(days=int(day))
            if date != self._date:
                self._commit()
                self._writer, self._date = self._open(date), date
            assert self._writer is not None
            self._writer.write(records[start:end])
            start = end

    def _commit(self) -> None:
        if self._writer is not None:
            self._files.append(self._writer.commit())
            self._writer = None

    def end_day(self) -> None:
        pass

    def finish(self) -> tuple[Path, ...]:
        self._commit()
        return tuple(self._files)

    def keep_files(self, paths: list[Path]) -> None:
        """The files an earlier run wrote (every day kept), left as they are."""
        self._files = list(paths)

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()


def _days_to_keep(
    record: SynthRecord, plans: list[DayPlan], layout: _Layout
) -> dict[dt.date, tuple[Path, list[DayVolume]]]:
    """The days an earlier run with the same options wrote that stay as they are: any of
    them for one file per trading day; for UTC-day files (shared by two days) all or none."""
    kept = {}
    for plan in plans:
        found = record.written_day(plan.trading_day)
        if found is not None:
            kept[plan.trading_day] = (found[0][0], found[1])
    if isinstance(layout, _TradingDayFiles):
        return kept
    return kept if len(kept) == len(plans) and record.shared_intact() else {}


def _write_day(
    config: SynthConfig,
    plan: DayPlan,
    layout: _Layout,
    signal: SignalLog,
    buffer: npt.NDArray[np.void],
    record: SynthRecord,
) -> list[DayVolume]:
    """Generate one trading day into `layout` and its signal file; record it; its volumes."""
    sim = DaySimulation(config, plan)
    layout.start_day(plan)
    signal.start_day()
    for records in sim.iter_chunks(buffer):
        layout.write(records)
        if int(records["ts_recv"][0]) >= plan.open_ns:  # not the pre-open's chunks
            signal.observe(records)
    layout.end_day()
    signal_file = signal.end_day(plan.trading_day, *sim.signal_stream())
    own = [layout.last_file] if isinstance(layout, _TradingDayFiles) else []
    volumes = list(sim.volumes())
    record.add_day(plan.trading_day, [*own, signal_file], volumes)
    logger.debug("generated trading day %s", plan.trading_day)
    return volumes


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
    on_progress
        Called with each trading day once its records are made.

    Returns
    -------
    SynthSummary
        The files written, trading days, record count and per-day volumes per instrument.

    Raises
    ------
    InvalidInputError
        The range holds no trading day, or `out_dir` is not a folder.

    Examples
    --------
    >>> cfg = SynthConfig(start=dt.date(2024, 3, 1), end=dt.date(2024, 3, 8))  # doctest: +SKIP
    >>> generate_market(cfg, Path("data/synth")).files[0].name  # doctest: +SKIP
    'glbx-mdp3-20240301.mbp-10.dbn.zst'
    """
    started = time.perf_counter()
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidInputError(f"`out_dir` must be a folder, was the file {out_dir}.")
    plans = _plan_days(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    layout: _Layout = (
        _TradingDayFiles(config, out_dir)
        if config.split == "trading-day"
        else _UtcDayFiles(config, out_dir, plans)
    )
    buffer = np.empty(_CHUNK_RECORDS, dtype=MBP10_DTYPE)
    volumes: list[DayVolume] = []
    signal = SignalLog(out_dir, config.signal_half_life // SAMPLES_PER_HALF_LIFE)
    record = SynthRecord(out_dir, config)
    kept = _days_to_keep(record, plans, layout)
    if len(kept) < len(plans):
        record.forget_shared()  # rewritten below: definitions, and UTC-day files
    try:
        for plan in plans:
            if plan.trading_day in kept:
                path, day_volumes = kept[plan.trading_day]
                if isinstance(layout, _TradingDayFiles):
                    layout.keep_day(path)
                volumes.extend(day_volumes)
            else:
                volumes.extend(_write_day(config, plan, layout, signal, buffer, record))
            if on_progress is not None:
                on_progress(plan.trading_day)
        definitions = out_dir / definition_file_name(plans[0].trading_day, plans[-1].trading_day)
        if isinstance(layout, _UtcDayFiles) and len(kept) == len(plans):
            layout.keep_files([p for p in record.shared_paths() if p != definitions])
        files = layout.finish()
        shared = [*([] if isinstance(layout, _TradingDayFiles) else files), definitions]
        if len(kept) < len(plans) or not record.shared_written([p.name for p in shared]):
            write_definitions(config, plans, out_dir)
            record.set_shared(shared)
    except BaseException:
        layout.abort()
        raise
    summary = SynthSummary(
        files=files,
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
