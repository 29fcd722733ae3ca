"""One trading day of the synthetic market: its plan, and the kernel run that fills records.

:func:`plan_day` fixes everything about a day that does not need the kernels (instruments,
shares, carry, anchors, session segments, random keys); :class:`DaySimulation` then drives
:func:`fxstore.synth.events.fill_records` chunk by chunk into a reusable record buffer.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.config import SynthConfig
from fxstore.ingest import MBP10_DTYPE, N_LEVELS
from fxstore.market.calendar import CHICAGO, NS_PER_DAY, session_bounds_ns
from fxstore.synth.book import Records, init_book, new_books, record_views
from fxstore.synth.contracts import Instrument, instruments_on
from fxstore.synth.events import (
    DayConsts,
    DayState,
    Segment,
    advance_walk,
    fill_pre_open,
    fill_records,
)
from fxstore.synth.prices import SESSION_MINUTES, carry_multiplier, intensity_per_minute
from fxstore.synth.rng import normal_at, stream_keys, uniform_at
from fxstore.synth.signal import bridge_terms, planted_strength

__all__ = ["DayPlan", "DaySimulation", "DayVolume", "SegmentPlan", "plan_day"]

logger = logging.getLogger(__name__)

#: Most a single record may move the fair value (standard deviation, ticks).
MAX_TICK_VOL_PER_RECORD: Final = 0.08
#: Records are kept this far inside the session bounds, so ts_event stays inside too.
_EDGE_NS: Final = 1_000_000
_NS_PER_MINUTE: Final = 60_000_000_000
_TAG_DAY: Final = 0xDA7
_TAG_PRE_OPEN: Final = 0x9E0
#: The pre-open: one-record packets per instrument in the maintenance window, from this
#: long before the open until a minute before it (CME: day-order purge, pre-open book
#: building), their books away from where the session opens by up to this many ticks.
PRE_OPEN_NS: Final = 40 * 60_000_000_000
PRE_OPEN_RECORDS_PER_INSTRUMENT: Final = 12
PRE_OPEN_MAX_SHIFT_TICKS: Final = 40
#: Planted-signal loading at strength 1: the signal then drives load²/(1+load²) = 80% of the
#: fair value's variance over horizons beyond its half-life.
_SIGNAL_GAIN: Final = 2.0
_DEPTH: Final = {"front": N_LEVELS, "next": N_LEVELS, "deferred": 7, "spread": 5}


@dataclass(frozen=True, slots=True)
class SegmentPlan:
    """A stretch of a session with fixed instrument shares."""

    start_ns: int
    end_ns: int
    n_records: int
    #: Share of each of the day's instruments (same order), summing to 1.
    shares: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class DayPlan:
    """Everything about one trading day that is fixed before its records are made."""

    trading_day: dt.date
    instruments: tuple[Instrument, ...]
    open_ns: int
    close_ns: int
    #: Records of the session (fewer on an early-close day: its missing hours' share).
    n_records: int
    segments: tuple[SegmentPlan, ...]
    #: ts_recv of the pre-open records (before `open_ns`), ascending.
    pre_open_ns: tuple[int, ...]

    @property
    def first_ns(self) -> int:
        """ts_recv of the day's first record (its pre-open's)."""
        return self.pre_open_ns[0] if self.pre_open_ns else self.open_ns

    #: Index fair value (points) at this day's open and at the next trading day's open.
    anchor: float
    anchor_next: float


@dataclass(frozen=True, slots=True)
class DayVolume:
    """What one instrument did on one trading day."""

    trading_day: dt.date
    raw_symbol: str
    instrument_id: int
    #: Contracts traded (sum of 'T' record sizes).
    volume: int
    n_trades: int
    n_records: int


def sigma_per_record(config: SynthConfig) -> float:
    """Standard deviation (ticks) of the fair value's move per record."""
    daily_ticks = config.daily_volatility * config.base_price / config.tick_size
    return min(MAX_TICK_VOL_PER_RECORD, daily_ticks / math.sqrt(config.events_per_day))


def daily_log_vol(config: SynthConfig) -> float:
    """Standard deviation of the log change of the index from one open to the next."""
    ticks = sigma_per_record(config) * math.sqrt(config.events_per_day)
    return ticks * config.tick_size / config.base_price


def _local_ns(day: dt.date, hour: int, minute: int) -> int:
    moment = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=CHICAGO)
    return int(moment.timestamp()) * 1_000_000_000


def _split_records(total: int, weights: list[float]) -> list[int]:
    counts = [max(1, round(total * w / sum(weights))) for w in weights[:-1]]
    return [*counts, total - sum(counts)]


def plan_day(config: SynthConfig, day: dt.date, anchor: float, anchor_next: float) -> DayPlan:
    """Plan trading `day`: instruments, shares and the session split at expiry cutoffs."""
    instruments = instruments_on(
        config.root, day, config.carry_points_per_quarter, carry_multiplier(config.seed, day)
    )
    open_ns, close_ns = session_bounds_ns(day)
    start, end = open_ns + _EDGE_NS, close_ns - _EDGE_NS
    shares = [inst.share for inst in instruments]
    bounds = [(start, end, shares)]
    if any(inst.stops_at_open for inst in instruments):
        cutoff = _local_ns(day, 8, 30)
        after = [0.0 if inst.stops_at_open else inst.share for inst in instruments]
        after = [s / sum(after) for s in after]
        bounds = [(start, cutoff, shares), (cutoff, end, after)]
    masses = [_activity_between(open_ns, a, b) for a, b, _ in bounds]
    n_records = _session_records(config.events_per_day, open_ns, close_ns)
    counts = _split_records(n_records, masses)
    segments = tuple(
        SegmentPlan(a, b, n, tuple(s)) for (a, b, s), n in zip(bounds, counts, strict=True)
    )
    return DayPlan(
        trading_day=day,
        instruments=instruments,
        open_ns=open_ns,
        close_ns=close_ns,
        n_records=n_records,
        segments=segments,
        pre_open_ns=_pre_open_times(config, day, open_ns, len(instruments)),
        anchor=anchor,
        anchor_next=anchor_next,
    )


def _session_records(events_per_day: int, open_ns: int, close_ns: int) -> int:
    """A full session's records, or an early-close session's share of them (its activity)."""
    full = float(np.sum(intensity_per_minute()))
    if close_ns - open_ns >= SESSION_MINUTES * _NS_PER_MINUTE:
        return events_per_day
    share = _activity_between(open_ns, open_ns, close_ns) / full
    return max(1_000, round(events_per_day * share))


def _pre_open_times(config: SynthConfig, day: dt.date, open_ns: int, n: int) -> tuple[int, ...]:
    """Sorted distinct ts_recv of the pre-open's records, in [open - PRE_OPEN_NS, open - 1 min)."""
    key = stream_keys(config.seed, day.toordinal(), _TAG_PRE_OPEN, n_keys=1)[0]
    count = PRE_OPEN_RECORDS_PER_INSTRUMENT * n
    span = PRE_OPEN_NS - _NS_PER_MINUTE
    offsets = np.sort([int(uniform_at(key, i) * span) for i in range(count)])
    offsets += np.arange(count)  # distinct
    return tuple(int(open_ns - PRE_OPEN_NS + o) for o in offsets)


def _activity_cum(open_ns: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Minute knots of a session (UTC ns) and the cumulative activity at each."""
    knots = open_ns + np.arange(SESSION_MINUTES + 1, dtype=np.int64) * _NS_PER_MINUTE
    cum = np.concatenate([[0.0], np.cumsum(intensity_per_minute())])
    return knots, cum


def _activity_between(open_ns: int, a: int, b: int) -> float:
    knots, cum = _activity_cum(open_ns)
    return float(np.interp(b, knots, cum) - np.interp(a, knots, cum))


def _segment(plan: DayPlan, seg: SegmentPlan, rec_start: int) -> Segment:
    """The kernel's view of one segment: record range, cumulative shares, time quantiles."""
    knots, cum = _activity_cum(plan.open_ns)
    inside = (knots > seg.start_ns) & (knots < seg.end_ns)
    seg_knots = np.concatenate([[seg.start_ns], knots[inside], [seg.end_ns]]).astype(np.int64)
    seg_cum = np.interp(seg_knots.astype(np.float64), knots.astype(np.float64), cum)
    seg_cdf = (seg_cum - seg_cum[0]) / (seg_cum[-1] - seg_cum[0])
    midnight = (seg.start_ns // NS_PER_DAY + 1) * NS_PER_DAY
    cum_share = np.cumsum(np.asarray(seg.shares, dtype=np.float64))
    cum_share /= cum_share[-1]
    return Segment(
        rec_start=rec_start,
        rec_end=rec_start + seg.n_records,
        cum_share=cum_share,
        knots_ns=seg_knots,
        knots_cdf=seg_cdf,
        split_ns=midnight if midnight < seg.end_ns else -1,
    )


class DaySimulation:
    """Runs the kernels over one planned day: iterate :meth:`iter_chunks`, then :meth:`volumes`.

    Examples
    --------
    >>> sim = DaySimulation(config, plan)  # doctest: +SKIP
    >>> for records in sim.iter_chunks(np.empty(65_536, MBP10_DTYPE)):  # doctest: +SKIP
    ...     sink.write(records)
    """

    def __init__(self, config: SynthConfig, plan: DayPlan) -> None:
        self._plan = plan
        keys = stream_keys(config.seed, plan.trading_day.toordinal(), _TAG_DAY, n_keys=4)
        n_instruments = len(plan.instruments)
        tick = config.tick_size
        phi = 0.5 ** (1.0 / config.signal_half_life)
        strength = planted_strength(config)
        load = strength * _SIGNAL_GAIN
        s0 = normal_at(keys[3], 0)
        self.signal_start = s0
        """The planted signal's value before the day's first record (see synth.signal)."""
        shares = np.array([i.share for i in plan.instruments])
        ticks = np.array([i.tick_fixed(config.tick_fixed) for i in plan.instruments])
        outright_ticks = ticks / config.tick_fixed  # 1 for outrights; a spread's is finer
        # sigma and kappa keep the variance per record at sigma_per_record² whatever the
        # strength: the signal's share grows, the total does not (and the bridge stays fair).
        consts = DayConsts(
            n_records=plan.n_records,
            anchor=plan.anchor / tick,
            bridge_slope=0.0,
            signal_shift=0.0,
            sigma=sigma_per_record(config) / math.sqrt(1.0 + load * load),
            kappa=load * math.sqrt((1.0 - phi) / (1.0 + phi)),
            phi=phi,
            bias=strength,
            key_fair=keys[0],
            key_signal=keys[1],
            key_event=keys[2],
            tick_fixed=ticks.astype(np.int64),
            instrument_id=np.array([i.instrument_id for i in plan.instruments], dtype=np.int64),
            beta=np.array([0.0 if i.is_spread else 1.0 for i in plan.instruments]),
            offset=np.array([i.carry / tick for i in plan.instruments]) / outright_ticks,
            sweep_weight=np.sqrt(shares / shares.max()),
        )
        # The bridge: end the walk exactly at the next day's anchor (see fxstore.synth.events).
        walk = np.array([0.0, s0])
        advance_walk(walk, 0, plan.n_records, consts)
        gap = (plan.anchor_next - plan.anchor) / tick - walk[0]
        shift, slope = bridge_terms(gap, plan.n_records, consts.sigma, consts.kappa, phi)
        self._day = consts._replace(bridge_slope=slope, signal_shift=shift)
        zeros = np.zeros(n_instruments, dtype=np.int64)
        self._state = DayState(
            ints=np.array([0, plan.open_ns], dtype=np.int64),
            walk=np.array([0.0, s0]),
            ctr=np.zeros(1, dtype=np.int64),
            seq=np.zeros(1, dtype=np.int64),
            volume=zeros.copy(),
            n_trades=zeros.copy(),
            n_records=zeros.copy(),
            header=np.zeros(6, dtype=np.int64),
        )
        self._books = new_books(np.array([_DEPTH[i.role] for i in plan.instruments]))
        for j in range(n_instruments):
            fair = self._day.beta[j] * self._day.anchor + self._day.offset[j]
            init_book(self._books, j, math.floor(fair), self._day.key_event, self._state.ctr)

    def iter_chunks(self, buffer: npt.NDArray[np.void]) -> Iterator[npt.NDArray[np.void]]:
        """Yield the day's records in order, as leading slices of `buffer`.

        `buffer` is a C-contiguous MBP10_DTYPE array of at least 16 records; each slice is
        overwritten by the next one, so consume it before advancing. Slices end on packet
        boundaries; ts_recv is strictly increasing across them. The pre-open's records
        (before the open) come first, in slices of their own.
        """
        if buffer.dtype != MBP10_DTYPE or len(buffer) < 16 or not buffer.flags.c_contiguous:
            raise ValueError("buffer must be a C-contiguous MBP10_DTYPE array of >= 16 records")
        rec = record_views(buffer)
        yield from self._pre_open(buffer, rec)
        rec_start = 0
        for seg_plan in self._plan.segments:
            seg = _segment(self._plan, seg_plan, rec_start)
            while (n := fill_records(rec, self._books, self._day, seg, self._state)) > 0:
                yield buffer[:n]
            rec_start = seg.rec_end

    def _pre_open(
        self, buffer: npt.NDArray[np.void], rec: Records
    ) -> Iterator[npt.NDArray[np.void]]:
        """The pre-open's records, in buffer-sized slices (see :func:`fill_pre_open`)."""
        plan, day = self._plan, self._day
        key = stream_keys(int(day.key_event), _TAG_PRE_OPEN, n_keys=1)[0]
        scale = np.where(day.beta > 0, PRE_OPEN_MAX_SHIFT_TICKS, 4)  # spreads move little
        draws = np.array([2.0 * uniform_at(key, j) - 1.0 for j in range(len(scale))])
        # at least a tick away: a pre-open book never equals the one the session opens on
        shift = (np.sign(draws) * (1 + np.round(np.abs(draws) * (scale - 1)))).astype(np.int64)
        times = np.asarray(plan.pre_open_ns, dtype=np.int64)
        for lo in range(0, len(times), len(buffer)):
            n = fill_pre_open(
                rec, self._books, day, self._state, times[lo : lo + len(buffer)], shift
            )
            yield buffer[:n]

    def signal_stream(self) -> tuple[np.uint64, float, float, float]:
        """(key, phi, s0, shift) of the day's planted signal, to replay it (synth.signal)."""
        return self._day.key_signal, self._day.phi, self.signal_start, self._day.signal_shift

    def volumes(self) -> tuple[DayVolume, ...]:
        """Per instrument of the day: volume, trades and records made so far."""
        st = self._state
        return tuple(
            DayVolume(
                trading_day=self._plan.trading_day,
                raw_symbol=inst.raw_symbol,
                instrument_id=inst.instrument_id,
                volume=int(st.volume[j]),
                n_trades=int(st.n_trades[j]),
                n_records=int(st.n_records[j]),
            )
            for j, inst in enumerate(self._plan.instruments)
        )
