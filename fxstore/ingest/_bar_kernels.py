"""Numba kernels behind :mod:`fxstore.ingest.bars`: sequential loops over plain column arrays.

Every kernel is a pure function (arrays and scalars in, new arrays out) over the records of one
instrument on one trading day, sorted by ``ts_recv``. A bar is a range of record indices
``[start, end]``; ranges are sorted and disjoint, and every trade lies in exactly one of them.
Except for the last bar of the day, a bar ends at a record carrying F_LAST (``is_last``), where
the book is consistent; records with no trade between bars (empty time intervals, the tail of
the day) belong to no bar. Prices stay int64 fixed point (1e-9) here; ``bars.py`` scales them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt

_F = TypeVar("_F", bound=Callable[..., object])

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
Int = int | np.int64


def _njit(func: _F) -> _F:
    """Compile `func` in numba's nopython mode, cached on disk, releasing the GIL."""
    return cast(_F, numba.njit(cache=True, nogil=True)(func))


@_njit
def decode_records(
    ts_recv: npt.NDArray[np.uint64],
    action: npt.NDArray[np.uint8],
    side: npt.NDArray[np.uint8],
    flags: npt.NDArray[np.uint8],
    price: I64,
    size: npt.NDArray[np.uint32],
    codes: tuple[int, int, int, int, int],
) -> tuple[
    I64, Bools, Bools, npt.NDArray[np.int8], I64, npt.NDArray[np.uint32], npt.NDArray[np.uint8], int
]:
    """Read the record fields the bar kernels need in one pass into contiguous columns.

    Parameters
    ----------
    ts_recv, action, side, flags, price, size
        Shape (n,), any strides: the fields of the structured records, read in place.
    codes
        ``(trade action, buy side, sell side, F_LAST bit, UNDEF_PRICE)``: the format's codes.

    Returns
    -------
    tuple
        ``(ts, is_trade, is_last, aggressor, price, size, flags, n_damaged)``, shape (n,)
        each but the count: int64 ``ts_recv``; trades (action 'T' with a defined price and
        size > 0); F_LAST set; aggressor +1 (side 'B'), -1 (side 'A'), 0 (unknown); contiguous
        copies of `price`, `size` and `flags`; how many 'T' records were damaged (undefined
        price or size 0).
    """
    trade_action, buy_side, sell_side, last_flag, undef_price = codes
    n = ts_recv.shape[0]
    ts = np.empty(n, dtype=np.int64)
    is_trade = np.empty(n, dtype=np.bool_)
    is_last = np.empty(n, dtype=np.bool_)
    aggressor = np.empty(n, dtype=np.int8)
    price_out = np.empty(n, dtype=np.int64)
    size_out = np.empty(n, dtype=np.uint32)
    flags_out = np.empty(n, dtype=np.uint8)
    n_damaged = 0
    for i in range(n):  # branch-free: this loop reads every record of the day
        px, qty, flag, code = price[i], size[i], flags[i], side[i]
        ts[i], price_out[i], size_out[i], flags_out[i] = ts_recv[i], px, qty, flag
        is_last[i] = (flag & last_flag) != 0
        is_t = action[i] == trade_action
        is_trade[i] = is_t & (px != undef_price) & (qty > 0)
        n_damaged += is_t != is_trade[i]  # a 'T' that is not a usable trade
        aggressor[i] = (code == buy_side) - (code == sell_side)
    return ts, is_trade, is_last, aggressor, price_out, size_out, flags_out, n_damaged


@_njit
def sign_trades(
    is_trade: Bools, aggressor: npt.NDArray[np.int8], price: I64
) -> npt.NDArray[np.int8]:
    """Sign every trade: its aggressor side, or the tick rule where the side is unknown.

    Parameters
    ----------
    is_trade
        Shape (n,): the record is a trade.
    aggressor
        Shape (n,): +1 buyer-initiated (side 'B'), -1 seller-initiated (side 'A'), 0 unknown.
    price
        Shape (n,): trade prices, int64 fixed point; read only where `is_trade`.

    Returns
    -------
    numpy.ndarray
        int8, shape (n,): b_t in {-1, 0, +1} for trades, 0 elsewhere. An unknown side takes the
        sign of the price change from the day's previous trade, or that trade's sign when the
        price did not change; 0 when there is no earlier trade today (e.g. the opening
        auction print, which has no aggressor).
    """
    sign = np.zeros(is_trade.shape[0], dtype=np.int8)
    prev_price = np.int64(0)
    prev_sign = np.int8(0)
    has_prev = False
    for i in range(is_trade.shape[0]):
        if not is_trade[i]:
            continue
        b = aggressor[i]
        if b == 0 and has_prev:
            if price[i] > prev_price:
                b = np.int8(1)
            elif price[i] < prev_price:
                b = np.int8(-1)
            else:
                b = prev_sign
        sign[i] = b
        prev_price, prev_sign, has_prev = price[i], b, True
    return sign


@_njit
def plain_bar_ranges(
    is_trade: Bools, is_last: Bools, weight: F64, threshold: float
) -> tuple[I64, I64, bool]:
    """Cut fixed-size bars: each closes once its trades' `weight` sums to `threshold`.

    `weight` is 1 per trade (tick bars), the size (volume bars) or price × size × multiplier
    (dollar bars). A bar closes at the first F_LAST record at or after the trade that reaches
    the threshold; the next bar starts from zero (no carry-over). Trades after the last close
    form a final bar ending at the day's last record.

    Returns
    -------
    tuple
        ``(start, end, last_is_partial)``: int64 record indices, shape (n_bars,), and whether
        the final bar ended with the day below its threshold.
    """
    n = is_trade.shape[0]
    start = np.empty(int(is_trade.sum()) + 1, dtype=np.int64)
    end = np.empty_like(start)
    n_bars, first, total, n_trades, armed = 0, 0, 0.0, 0, False
    for i in range(n):
        if is_trade[i]:
            total += weight[i]
            n_trades += 1
            armed = armed or total >= threshold
        if armed and is_last[i]:
            start[n_bars], end[n_bars] = first, i
            n_bars += 1
            first, total, n_trades, armed = i + 1, 0.0, 0, False
    last_is_partial = False
    if n_trades > 0:
        start[n_bars], end[n_bars] = first, n - 1
        n_bars += 1
        last_is_partial = not armed
    return start[:n_bars].copy(), end[:n_bars].copy(), last_is_partial


@_njit
def time_bar_ranges(
    ts: I64, is_trade: Bools, is_last: Bools, origin_ns: int, interval_ns: int, close_ns: int
) -> tuple[I64, I64, bool]:
    """Cut clock bars on the grid ``origin_ns + k·interval_ns``; skip intervals with no trade.

    Interval k holds the records with ``ts`` in ``[origin + k·interval, origin + (k+1)·interval)``
    (records before `origin_ns` count in interval 0). Its bar ends at its last F_LAST record; the
    records of a packet still open at the boundary move to the next bar, so a bar never ends
    mid-packet. An interval whose closed records hold no trade emits no bar, and those records
    belong to no bar.

    Returns
    -------
    tuple
        ``(start, end, last_is_partial)``: int64 record indices, shape (n_bars,), and whether the
        final bar's interval was cut short by the session close `close_ns`.
    """
    n = ts.shape[0]
    start = np.empty(int(is_trade.sum()) + 1, dtype=np.int64)
    end = np.empty_like(start)
    n_bars, first, interval = 0, 0, np.int64(-1)
    last_closed, trades, trades_at_last = -1, 0, 0
    for i in range(n):
        k = max(np.int64(0), (ts[i] - origin_ns) // interval_ns)
        if k > interval and last_closed >= first:
            if trades_at_last > 0:
                start[n_bars], end[n_bars] = first, last_closed
                n_bars += 1
            first, trades = last_closed + 1, trades - trades_at_last
            trades_at_last = 0
        interval = max(interval, k)
        if is_trade[i]:
            trades += 1
        if is_last[i]:
            last_closed, trades_at_last = i, trades
    last_is_partial = False
    if trades > 0:
        start[n_bars], end[n_bars] = first, n - 1
        n_bars += 1
        last_is_partial = bool(origin_ns + (interval + 1) * interval_ns > close_ns)
    return start[:n_bars].copy(), end[:n_bars].copy(), last_is_partial


@_njit
def _trades_per_bar(n_day: int, elapsed_ns: float, bar_ns: float, recent: float) -> float:
    """T*: the trades one bar should hold for the day to reach its target bar count.

    The larger of the day's average rate so far and the recent rate (`recent` = trades within
    about one target bar's duration `bar_ns`, exponentially weighted), times `bar_ns`. The
    recent rate keeps bars from shrinking when trading speeds up (Globex overnight → regular
    hours), which a day average alone would follow with a lag; in a lull the day average keeps
    bars from shrinking instead.
    """
    return max(n_day * bar_ns / max(elapsed_ns, 1.0), recent)


@_njit
def _next_bar_rules(
    t_star: float, expected: float, flow: F64, bar_stats: F64, band: float
) -> tuple[float, float, float]:
    """Rules of the next imbalance bar: (threshold, min trades, max trades).

    The threshold is López de Prado's E0[T]·|E0[b·v]|, floored at the standard deviation of θ
    over T* trades, sqrt(T*·var), so that balanced flow (E0[b·v] ≈ 0) cannot shrink bars to a
    trade or two. var is the larger of the per-trade variance of b·v and the variance per trade
    of θ realised over past bars, which also counts runs of same-signed trades (a sweep prints
    several trades of one side). The bar's length is confined to [T*/band, T*·band] trades.
    """
    mean = flow[0] / (1.0 - flow[2])
    var_trade = max(flow[1] / (1.0 - flow[2]) - mean * mean, 0.0)
    variance = max(var_trade, bar_stats[2] / bar_stats[1])
    threshold = max(expected * abs(mean), math.sqrt(t_star * variance))
    min_trades = max(1.0, math.ceil(t_star / band))
    return threshold, min_trades, max(min_trades, math.ceil(t_star * band))


@_njit
def _update_bar_stats(
    bar_stats: F64, is_first: bool, trades: int, dev: float, alpha: float
) -> None:
    """EWMAs over bars of [E0[T], trades, (θ - trades·E0[b·v])²]; the first bar initialises them."""
    values = (float(trades), float(trades), dev * dev)
    for j in range(3):
        bar_stats[j] = values[j] if is_first else bar_stats[j] + alpha * (values[j] - bar_stats[j])


@_njit
def imbalance_bar_ranges(
    ts: I64,
    is_trade: Bools,
    is_last: Bools,
    signed: F64,
    bar_ns: float,
    band: float,
    alpha_bars: float,
    alpha_trades: float,
) -> tuple[I64, I64, F64, bool]:
    """Cut López de Prado imbalance bars with causal, per-day guards on their size.

    θ sums the signed flow b·v over a bar's trades. A bar is armed once |θ| reaches its
    threshold while holding at least its minimum trades, or at its maximum trades, and closes
    at the next F_LAST record. The day's first bar is a warm-up closed by time: armed `bar_ns`
    (session length / target bars) after the day's first trade. Each later bar's rules are
    fixed when it opens (``_next_bar_rules``) from the day's records only: E0[b·v] and
    E0[(b·v)²] are bias-corrected EWMAs over trades (weight `alpha_trades`); E0[T], an EWMA
    over bars (weight `alpha_bars`), is clipped to [T*/band, T*·band] (``_trades_per_bar``).

    Returns
    -------
    tuple
        ``(start, end, threshold, last_is_partial)``: int64 record indices and the float64
        threshold in force (NaN for the warm-up bar), shape (n_bars,); whether the final bar
        ended with the day before being armed.
    """
    start = np.empty(int(is_trade.sum()) + 1, dtype=np.int64)
    end = np.empty_like(start)
    thresholds = np.empty(start.shape[0], dtype=np.float64)
    flow = np.array([0.0, 0.0, 1.0])  # EWMAs of b·v and (b·v)², and (1 - alpha)^n_day
    bar_stats = np.zeros(3)  # see _update_bar_stats
    n_bars, first, n_day, t_first, t_prev, recent = 0, 0, 0, np.int64(0), np.int64(0), 0.0
    theta, trades, armed = 0.0, 0, False
    threshold, min_trades, max_trades = math.nan, 1.0, math.inf
    for i in range(ts.shape[0]):
        if is_trade[i]:
            x = signed[i]
            t_first = ts[i] if n_day == 0 else t_first
            recent = recent * math.exp((t_prev - ts[i]) / bar_ns) + 1.0
            n_day, trades, theta, t_prev = n_day + 1, trades + 1, theta + x, ts[i]
            flow[0] += alpha_trades * (x - flow[0])
            flow[1] += alpha_trades * (x * x - flow[1])
            flow[2] *= 1.0 - alpha_trades
            if n_bars > 0:
                armed = armed or (abs(theta) >= threshold and trades >= min_trades)
                armed = armed or trades >= max_trades
        if n_bars == 0 and trades > 0:
            armed = ts[i] - t_first >= bar_ns
        if armed and is_last[i]:
            start[n_bars], end[n_bars], thresholds[n_bars] = first, i, threshold
            dev = theta - trades * flow[0] / (1.0 - flow[2])
            _update_bar_stats(bar_stats, n_bars == 0, trades, dev, alpha_bars)
            recent_now = recent * math.exp((t_prev - ts[i]) / bar_ns)
            t_star = _trades_per_bar(n_day, ts[i] - t_first, bar_ns, recent_now)
            bar_stats[0] = min(max(bar_stats[0], t_star / band), t_star * band)
            threshold, min_trades, max_trades = _next_bar_rules(
                t_star, bar_stats[0], flow, bar_stats, band
            )
            n_bars, first, theta, trades, armed = n_bars + 1, i + 1, 0.0, 0, False
    last_is_partial = False
    if trades > 0:
        start[n_bars], end[n_bars], thresholds[n_bars] = first, ts.shape[0] - 1, threshold
        n_bars += 1
        last_is_partial = not armed
    return start[:n_bars].copy(), end[:n_bars].copy(), thresholds[:n_bars].copy(), last_is_partial


@_njit
def aggregate_records(
    start: I64,
    end: I64,
    is_trade: Bools,
    sign: npt.NDArray[np.int8],
    aggressor: npt.NDArray[np.int8],
    price: I64,
    size: npt.NDArray[np.uint32],
    signed: F64,
    flags: npt.NDArray[np.uint8],
    flag_bits: tuple[int, int],
) -> tuple[I64, I64, F64]:
    """Sum each bar's trades and count its flagged records.

    Returns
    -------
    tuple
        ``(prices, counts, sums)``. `prices` int64 (n_bars, 4): open, high, low, close in fixed
        point. `counts` int64 (n_bars, 7): volume, buy volume, sell volume, trades, trades with
        no aggressor side (signed by the tick rule), and records carrying each of the two
        `flag_bits` (F_BAD_TS_RECV, F_MAYBE_BAD_BOOK). `sums` float64 (n_bars, 2): Σ price·size
        (fixed point × contracts) and θ = Σ b·v. A bar without trades keeps zero prices.
    """
    n_bars = start.shape[0]
    prices = np.zeros((n_bars, 4), dtype=np.int64)
    counts = np.zeros((n_bars, 7), dtype=np.int64)
    sums = np.zeros((n_bars, 2), dtype=np.float64)
    for b in range(n_bars):
        for i in range(start[b], end[b] + 1):
            counts[b, 5] += (flags[i] & flag_bits[0]) != 0
            counts[b, 6] += (flags[i] & flag_bits[1]) != 0
            if not is_trade[i]:
                continue
            px, qty = price[i], np.int64(size[i])
            if counts[b, 3] == 0:
                prices[b, 0], prices[b, 1], prices[b, 2] = px, px, px
            prices[b, 1] = max(prices[b, 1], px)
            prices[b, 2] = min(prices[b, 2], px)
            prices[b, 3] = px
            counts[b, 0] += qty
            counts[b, 1] += qty if sign[i] > 0 else 0
            counts[b, 2] += qty if sign[i] < 0 else 0
            counts[b, 3] += 1
            counts[b, 4] += aggressor[i] == 0
            sums[b, 0] += float(px) * float(qty)
            sums[b, 1] += signed[i]
    return prices, counts, sums


@_njit
def _level_ofi(bid: Int, bid_qty: Int, ask: Int, ask_qty: Int, prev: I64, k: int) -> Int:
    """Cont-Kukanov-Stoikov e_n at level k; ``prev[:, k]`` = (bid, bid_qty, ask, ask_qty) before.

    e_n = 1{Pb_n >= Pb_n-1}·qb_n - 1{Pb_n <= Pb_n-1}·qb_n-1
          - 1{Pa_n <= Pa_n-1}·qa_n + 1{Pa_n >= Pa_n-1}·qa_n-1
    """
    e = bid_qty if bid >= prev[0, k] else 0
    e -= prev[1, k] if bid <= prev[0, k] else 0
    e -= ask_qty if ask <= prev[2, k] else 0
    e += prev[3, k] if ask >= prev[2, k] else 0
    return e


@_njit
def aggregate_book(
    start: I64,
    end: I64,
    is_last: Bools,
    undef_price: int,
    bid_px: I64,
    ask_px: I64,
    bid_sz: npt.NDArray[np.uint32],
    ask_sz: npt.NDArray[np.uint32],
) -> tuple[F64, I64, I64]:
    """Walk the consistent (F_LAST) book states: per-level OFI and crossed states per bar.

    Parameters
    ----------
    bid_px, ask_px, bid_sz, ask_sz
        Shape (n, n_levels): the book levels of every record (any strides). A level whose
        price is `undef_price` is empty: for the comparisons an empty bid is below every
        price and an empty ask above every price, and both hold size 0, so UNDEF never
        reaches arithmetic.

    Returns
    -------
    tuple
        ``(ofi, n_crossed, book_index)``. `ofi` float64 (n_bars, n_levels): Σ e_n over the
        consistent states in the bar, each against the day's previous consistent state (the
        day's first has none and adds 0). `n_crossed` int64 (n_bars,): consistent states in
        the bar with best bid >= best ask (crossed or locked). `book_index` int64 (n_bars,):
        the last F_LAST record at or before the bar's end, -1 if none.
    """
    n_bars, n_levels = start.shape[0], bid_px.shape[1]
    ofi = np.zeros((n_bars, n_levels), dtype=np.float64)
    n_crossed = np.zeros(n_bars, dtype=np.int64)
    book_index = np.full(n_bars, -1, dtype=np.int64)
    prev = np.zeros((4, n_levels), dtype=np.int64)  # bid, bid size, ask, ask size
    has_prev, b, last_consistent = False, 0, -1
    for i in range(is_last.shape[0]):
        while b < n_bars and end[b] < i:
            book_index[b] = last_consistent
            b += 1
        if not is_last[i]:
            continue
        last_consistent = i
        in_bar = b < n_bars and start[b] <= i
        if in_bar and bid_px[i, 0] != undef_price and ask_px[i, 0] != undef_price:
            n_crossed[b] += bid_px[i, 0] >= ask_px[i, 0]
        for k in range(n_levels):
            bid, bid_qty = bid_px[i, k], np.int64(bid_sz[i, k])
            if bid == undef_price:
                bid, bid_qty = -undef_price - 1, np.int64(0)  # below every price
            ask, ask_qty = ask_px[i, k], np.int64(ask_sz[i, k])
            if ask == undef_price:
                ask_qty = np.int64(0)  # UNDEF_PRICE (INT64_MAX) is above every price already
            if in_bar and has_prev:
                ofi[b, k] += _level_ofi(bid, bid_qty, ask, ask_qty, prev, k)
            prev[0, k], prev[1, k], prev[2, k], prev[3, k] = bid, bid_qty, ask, ask_qty
        has_prev = True
    book_index[b:] = last_consistent
    return ofi, n_crossed, book_index
