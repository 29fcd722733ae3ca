"""Numba kernels that turn a day's plan into MBP-10 packets: fair value, signal and book events.

Time inside a day is counted in records ``r = 0 .. n_records``. The index fair value is

    F(r) = anchor + X(r) + r * bridge_slope,   X(r+1) = X(r) + sigma * (e_r + kappa * s'_r)

with ``e_r`` white noise, ``s`` the planted AR(1) signal (unit variance) and
``s' = s + signal_shift``. The bridge (slope and shift, :func:`fxstore.synth.signal.bridge_terms`)
ends the day exactly at the next day's anchor, and shares the correction between the signal
and the drift as conditioning on the end point would, so it never takes the signal's
moves back (no day-scale reversal a policy could trade). Each
packet picks one instrument (by its share in the current segment) whose target book is a
1-tick market at ``floor(beta * F + offset)``:

* out of line with its target, the book catches up in one packet: each stale best level
  is traded through ('T' then 'C') or pulled ('C'), then 'A' records add the new best
  levels (up to MAX_SWEEP levels a packet; a bigger jump takes several packets);
* in line, one noise event: a trade ('T' + 'M' that depletes, never empties, the best
  level), an add, a cancel or a modify. Noise never moves the best prices, so the mid only
  moves with the fair value: with no signal the mid is a martingale that flow cannot predict.

The signal tilts noise-trade aggressor sides, P(buy) = (1 + strength * tanh(1.5 s)) / 2, and
the fair-value steps (kappa, see :class:`fxstore.synth.day.DaySimulation`), so signed flow
then predicts the price move that follows.
"""

from __future__ import annotations

import logging
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit, njit_inner
from fxstore.ingest import F_LAST, F_MBP
from fxstore.synth.book import (
    ACTION_ADD,
    ACTION_CANCEL,
    ACTION_MODIFY,
    ACTION_TRADE,
    ASK,
    BID,
    SIDE_BYTE,
    Books,
    Records,
    emit,
    insert_level,
    new_level_size,
    remove_level,
    set_flags,
)
from fxstore.synth.rng import geometric, next_uniform, normal_at

__all__ = [
    "MAX_PACKET",
    "DayConsts",
    "DayState",
    "Segment",
    "advance_walk",
    "fill_pre_open",
    "fill_records",
]

logger = logging.getLogger(__name__)

#: Most price levels one catch-up packet sweeps; the rest waits for the next packet.
MAX_SWEEP: Final = 4
#: Most records in one packet: MAX_SWEEP (trade, cancel) pairs and two adds.
MAX_PACKET: Final = 2 * MAX_SWEEP + 2
# Noise-event mix (of packets whose book is in line with its target).
_P_TRADE: Final = 0.08
_P_ADD: Final = 0.44
_P_CANCEL: Final = 0.38
#: A stale best level of size q is traded through with chance S / (S + q), else pulled.
_SWEEP_TRADE_SIZE: Final = 4.0
# state.ints slots
_R: Final = 0
_LAST_TS: Final = 1


class DayConsts(NamedTuple):
    """What stays fixed over one trading day. Prices in ticks."""

    n_records: int
    anchor: float
    bridge_slope: float
    #: Added to the planted signal all day (its part of the bridge; 0 without a signal).
    signal_shift: float
    sigma: float
    kappa: float
    phi: float
    bias: float
    key_fair: np.uint64
    key_signal: np.uint64
    key_event: np.uint64
    #: Per instrument: its price increment, DBN fixed point (a spread's is finer).
    tick_fixed: npt.NDArray[np.int64]
    instrument_id: npt.NDArray[np.int64]
    #: 1.0 for outrights (they follow the index), 0.0 for spreads (the index cancels out).
    beta: npt.NDArray[np.float64]
    #: Carry (outrights) or fair spread price (spreads), in the instrument's ticks.
    offset: npt.NDArray[np.float64]
    #: Scales the chance that a stale level is traded through rather than pulled: 1 for the
    #: most active contract; thin ones (deferred, early next) mostly requote by cancels.
    sweep_weight: npt.NDArray[np.float64]


class Segment(NamedTuple):
    """A stretch of the session with one set of instrument shares (expiry day has two)."""

    rec_start: int
    rec_end: int
    #: Cumulative instrument shares, last entry 1.0.
    cum_share: npt.NDArray[np.float64]
    #: Minute knots (UTC ns) of the segment and the cumulative activity at each, 0 to 1.
    knots_ns: npt.NDArray[np.int64]
    knots_cdf: npt.NDArray[np.float64]
    #: UTC midnight inside the segment (or -1): no packet straddles it.
    split_ns: int


class DayState(NamedTuple):
    """What changes over one trading day; the kernels update it in place."""

    #: [next record index r, ts_recv of the last record written]
    ints: npt.NDArray[np.int64]
    #: [X(r), s(r)]
    walk: npt.NDArray[np.float64]
    #: Event random-stream counter, shape (1,).
    ctr: npt.NDArray[np.int64]
    #: The channel's last sequence number (one channel: every instrument shares it), shape (1,).
    seq: npt.NDArray[np.int64]
    #: Per instrument: traded volume, trades, records.
    volume: npt.NDArray[np.int64]
    n_trades: npt.NDArray[np.int64]
    n_records: npt.NDArray[np.int64]
    #: Scratch record header: instrument_id, ts_event, ts_recv, ts_in_delta, sequence, tick.
    header: npt.NDArray[np.int64]


@njit
def advance_walk(walk: npt.NDArray[np.float64], r0: int, m: int, day: DayConsts) -> None:
    """Move (X, s) in `walk` over records r0 .. r0+m-1."""
    x, s = walk[0], walk[1]
    c = np.sqrt(1.0 - day.phi * day.phi)
    for r in range(r0, r0 + m):
        x += day.sigma * (normal_at(day.key_fair, r) + day.kappa * (s + day.signal_shift))
        s = day.phi * s + c * normal_at(day.key_signal, r)
    walk[0] = x
    walk[1] = s


@njit_inner
def _packet_time(seg: Segment, r: int, u: float) -> int:
    """Inverse-CDF time of record `r`, stratified: record k of n falls in quantile (k+u)/n."""
    q = (r - seg.rec_start + u) / (seg.rec_end - seg.rec_start)
    k = int(np.searchsorted(seg.knots_cdf, q, side="right")) - 1
    k = min(max(k, 0), len(seg.knots_cdf) - 2)
    c0, c1 = seg.knots_cdf[k], seg.knots_cdf[k + 1]
    frac = (q - c0) / (c1 - c0) if c1 > c0 else 0.0
    return int(seg.knots_ns[k]) + int(frac * (seg.knots_ns[k + 1] - seg.knots_ns[k]))


@njit_inner
def _put(
    rec: Records,
    i: int,
    books: Books,
    j: int,
    st: DayState,
    action: int,
    side_byte: int,
    depth: int,
    price: int,
    size: int,
    flags: int,
) -> None:
    """Write one record of the current packet; ts_recv and the channel's sequence step by one."""
    st.seq[0] += 1
    st.header[4] = st.seq[0]
    emit(rec, i, books, j, st.header, action, side_byte, depth, price, size, flags)
    st.header[2] += 1
    st.n_records[j] += 1


@njit_inner
def _trade(
    rec: Records, i: int, books: Books, j: int, day: DayConsts, st: DayState, rest: int, qty: int
) -> None:
    """A trade of `qty` against the best level of side `rest`: 'T', then 'C' or 'M'.

    The 'T' record carries the book before the fill; the next record publishes the fill:
    'C' when it takes the whole level (the level goes), else 'M' (size and count shrink).
    """
    price = books.px[j, rest, 0]
    size = books.sz[j, rest, 0]
    _put(rec, i, books, j, st, ACTION_TRADE, SIDE_BYTE[1 - rest], 0, price, qty, 0)
    if qty >= size:
        remove_level(books, j, rest, 0, day.key_event, st.ctr)
        _put(rec, i + 1, books, j, st, ACTION_CANCEL, SIDE_BYTE[rest], 0, price, qty, F_MBP)
    else:
        count = books.ct[j, rest, 0]
        filled = min(count - 1, int(qty * count / size))
        books.sz[j, rest, 0] = size - qty
        books.ct[j, rest, 0] = min(count - filled, size - qty)
        _put(rec, i + 1, books, j, st, ACTION_MODIFY, SIDE_BYTE[rest], 0, price, qty, F_MBP)
    st.volume[j] += qty
    st.n_trades[j] += 1


@njit_inner
def _stale_side(books: Books, j: int, target: int) -> int:
    """The side whose best level is through the target market (BID, ASK), or -1."""
    if books.nlev[j, BID] > 0 and books.px[j, BID, 0] > target:
        return BID
    if books.nlev[j, ASK] > 0 and books.px[j, ASK, 0] < target + 1:
        return ASK
    return -1


@njit_inner
def _add_best(
    rec: Records, i: int, books: Books, j: int, day: DayConsts, st: DayState, side: int, price: int
) -> None:
    size, count = new_level_size(day.key_event, st.ctr, 0)
    insert_level(books, j, side, 0, price, size, count)
    _put(rec, i, books, j, st, ACTION_ADD, SIDE_BYTE[side], 0, price, size, F_MBP)


@njit_inner
def _catch_up(
    rec: Records, i0: int, cap: int, books: Books, j: int, day: DayConsts, st: DayState, target: int
) -> int:
    """Move instrument `j`'s book to the 1-tick market (target, target+1); records written.

    Each stale best level goes by an aggressive trade ('T' + 'C') or is pulled by its owners
    ('C' alone); the bigger the level or the thinner the contract, the likelier it is
    pulled, so price moves do not swamp the traded volume.
    """
    i = i0
    stale = _stale_side(books, j, target)
    swept = 0
    while stale >= 0 and i < i0 + cap and swept < MAX_SWEEP:
        size = books.sz[j, stale, 0]
        take = day.sweep_weight[j] * _SWEEP_TRADE_SIZE / (_SWEEP_TRADE_SIZE + size)
        if i0 + cap - i >= 2 and next_uniform(day.key_event, st.ctr, 0) < take:
            _trade(rec, i, books, j, day, st, stale, size)
            i += 2
        else:
            price = books.px[j, stale, 0]
            remove_level(books, j, stale, 0, day.key_event, st.ctr)
            _put(rec, i, books, j, st, ACTION_CANCEL, SIDE_BYTE[stale], 0, price, size, F_MBP)
            i += 1
        swept += 1
        stale = _stale_side(books, j, target)
    if stale >= 0:
        return i - i0
    if i < i0 + cap and (books.nlev[j, BID] == 0 or books.px[j, BID, 0] < target):
        _add_best(rec, i, books, j, day, st, BID, target)
        i += 1
    if i < i0 + cap and (books.nlev[j, ASK] == 0 or books.px[j, ASK, 0] > target + 1):
        _add_best(rec, i, books, j, day, st, ASK, target + 1)
        i += 1
    return i - i0


@njit_inner
def _noise_add(
    rec: Records, i: int, books: Books, j: int, day: DayConsts, st: DayState, side: int
) -> int:
    """Add size behind the touch: to a level, into a price gap, or as a new deepest level."""
    n = books.nlev[j, side]
    direction = -1 if side == BID else 1
    d = min(geometric(next_uniform(day.key_event, st.ctr, 0), 2.5) - 1, n)
    if d == n and n >= books.depth_target[j]:
        d = n - 1
    u = next_uniform(day.key_event, st.ctr, 0)
    if d == n or (d >= 1 and abs(books.px[j, side, d] - books.px[j, side, d - 1]) > 1 and u < 0.5):
        price = books.px[j, side, d - 1] + direction * (2 if d == n and u < 0.1 else 1)
        size, count = new_level_size(day.key_event, st.ctr, d)
        insert_level(books, j, side, d, price, size, count)
    else:
        price = books.px[j, side, d]
        size = geometric(u, 3.0)
        books.sz[j, side, d] += size
        books.ct[j, side, d] += 1
    _put(rec, i, books, j, st, ACTION_ADD, SIDE_BYTE[side], d, price, size, F_MBP)
    return 1


@njit_inner
def _noise_cancel(
    rec: Records, i: int, books: Books, j: int, day: DayConsts, st: DayState, side: int
) -> int:
    """Cancel size at a level; only levels behind the touch may disappear."""
    n = books.nlev[j, side]
    d = min(geometric(next_uniform(day.key_event, st.ctr, 0), 2.5) - 1, n - 1)
    size, count = books.sz[j, side, d], books.ct[j, side, d]
    if d == 0 and size <= 1:
        return _noise_add(rec, i, books, j, day, st, side)
    qty = geometric(next_uniform(day.key_event, st.ctr, 0), 3.0)
    price = books.px[j, side, d]
    if d > 0 and (qty >= size or (count == 1 and next_uniform(day.key_event, st.ctr, 0) < 0.3)):
        qty = size
        remove_level(books, j, side, d, day.key_event, st.ctr)
    else:
        qty = min(qty, size - 1)
        books.sz[j, side, d] = size - qty
        books.ct[j, side, d] = max(1, min(count - 1, size - qty))
    _put(rec, i, books, j, st, ACTION_CANCEL, SIDE_BYTE[side], d, price, qty, F_MBP)
    return 1


@njit_inner
def _noise_modify(
    rec: Records, i: int, books: Books, j: int, day: DayConsts, st: DayState, side: int
) -> int:
    """An order changes size: the level grows or shrinks (never below its order count)."""
    n = books.nlev[j, side]
    d = min(geometric(next_uniform(day.key_event, st.ctr, 0), 2.5) - 1, n - 1)
    qty = geometric(next_uniform(day.key_event, st.ctr, 0), 2.0)
    size, count = books.sz[j, side, d], books.ct[j, side, d]
    if next_uniform(day.key_event, st.ctr, 0) < 0.5 and size - qty >= count:
        books.sz[j, side, d] = size - qty
    else:
        books.sz[j, side, d] = size + qty
    price = books.px[j, side, d]
    _put(rec, i, books, j, st, ACTION_MODIFY, SIDE_BYTE[side], d, price, qty, F_MBP)
    return 1


@njit_inner
def _noise(
    rec: Records, i: int, cap: int, books: Books, j: int, day: DayConsts, st: DayState
) -> int:
    """One event on an in-line book; returns the records written (1 or 2)."""
    u = next_uniform(day.key_event, st.ctr, 0)
    side = BID if next_uniform(day.key_event, st.ctr, 0) < 0.5 else ASK
    if u < _P_TRADE:
        tilt = day.bias * day.beta[j] * np.tanh(1.5 * (st.walk[1] + day.signal_shift))
        rest = ASK if next_uniform(day.key_event, st.ctr, 0) < 0.5 * (1.0 + tilt) else BID
        size = books.sz[j, rest, 0]
        if cap >= 2 and size > 1:
            qty = min(geometric(next_uniform(day.key_event, st.ctr, 0), 2.5), size - 1)
            _trade(rec, i, books, j, day, st, rest, qty)
            return 2
        return _noise_add(rec, i, books, j, day, st, rest)
    if u < _P_TRADE + _P_ADD:
        return _noise_add(rec, i, books, j, day, st, side)
    if u < _P_TRADE + _P_ADD + _P_CANCEL:
        return _noise_cancel(rec, i, books, j, day, st, side)
    return _noise_modify(rec, i, books, j, day, st, side)


@njit_inner
def _packet(
    rec: Records, i: int, cap: int, books: Books, day: DayConsts, seg: Segment, st: DayState
) -> int:
    """Write one exchange packet of 1..cap records at record index ``st.ints[0]``."""
    r = st.ints[_R]
    key, ctr = day.key_event, st.ctr
    ts = max(_packet_time(seg, r, next_uniform(key, ctr, 0)), st.ints[_LAST_TS] + 1)
    if ts < seg.split_ns < ts + MAX_PACKET:
        ts = seg.split_ns  # a packet never straddles UTC midnight (where utc-day files split)
    # The first instrument whose cumulative share exceeds u: never one with no share.
    j = int(np.searchsorted(seg.cum_share, next_uniform(key, ctr, 0), side="right"))
    j = min(j, len(seg.cum_share) - 1)
    in_delta = 8_000 + int(next_uniform(key, ctr, 0) * 14_000)
    gateway = 2_000 + int(next_uniform(key, ctr, 0) * 20_000)
    st.header[0] = day.instrument_id[j]
    st.header[1] = ts - in_delta - gateway
    st.header[2] = ts
    st.header[3] = in_delta
    st.header[5] = day.tick_fixed[j]
    fair = day.beta[j] * (day.anchor + st.walk[0] + r * day.bridge_slope) + day.offset[j]
    target = int(np.floor(fair))
    bid_n, ask_n = books.nlev[j, BID], books.nlev[j, ASK]
    in_line = bid_n > 0 and ask_n > 0 and books.px[j, BID, 0] == target
    if in_line and books.px[j, ASK, 0] == target + 1:
        m = _noise(rec, i, cap, books, j, day, st)
    else:
        m = _catch_up(rec, i, cap, books, j, day, st, target)
    set_flags(rec, i + m - 1, F_LAST)
    st.ints[_LAST_TS] = ts + m - 1
    return m


@njit
def fill_pre_open(
    rec: Records,
    books: Books,
    day: DayConsts,
    st: DayState,
    times: npt.NDArray[np.int64],
    shift: npt.NDArray[np.int64],
) -> int:
    """Write the session's pre-open into `rec`: at each of `times` (ascending UTC ns, before
    the open) one instrument, in turn, publishes its book shifted by `shift` ticks, in a
    one-record packet ('A', F_LAST); no trade. The books are put back as they were: the
    session opens on the book the day's kernels start from, as CME's opening does on
    the book its pre-open built. Returns the records written."""
    n_instruments = books.nlev.shape[0]
    for j in range(n_instruments):
        books.px[j] += shift[j]
    for i in range(times.shape[0]):
        j, side = i % n_instruments, (i // n_instruments) % 2
        st.header[0] = day.instrument_id[j]
        st.header[1] = times[i] - 20_000
        st.header[2] = times[i]
        st.header[3] = 10_000
        st.header[5] = day.tick_fixed[j]
        price, size = books.px[j, side, 0], books.sz[j, side, 0]
        _put(rec, i, books, j, st, ACTION_ADD, SIDE_BYTE[side], 0, price, size, F_MBP | F_LAST)
    for j in range(n_instruments):
        books.px[j] -= shift[j]
    return int(times.shape[0])


@njit
def fill_records(rec: Records, books: Books, day: DayConsts, seg: Segment, st: DayState) -> int:
    """Fill `rec` from its start with whole packets of segment `seg`; records written.

    Stops when the buffer cannot take another packet or the segment is done; call again
    with the same state to continue.
    """
    n_out = rec.u8.shape[0]
    i = 0
    while st.ints[_R] < seg.rec_end:
        left = seg.rec_end - st.ints[_R]
        space = n_out - i
        if space < MAX_PACKET and space < left:
            break
        cap = min(space, left, MAX_PACKET)
        m = _packet(rec, i, cap, books, day, seg, st)
        advance_walk(st.walk, st.ints[_R], m, day)
        st.ints[_R] += m
        i += m
    return i
