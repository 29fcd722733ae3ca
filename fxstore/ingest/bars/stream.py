"""Streaming bar kernels: cut and sum one instrument's bars chunk by chunk, in one pass.

:func:`update_bars` reads one chunk of MBP-10 records in place, through raw row views (int64,
uint32 and uint8 rows of the C-contiguous ``MBP10_DTYPE`` array), and carries everything
sequential from chunk to chunk in small state arrays, so a day's bars come out bit for bit the
same for any chunking. Per record it adds the record to the open bar's accumulator row, decodes
and signs a trade, and at an F_LAST record walks the book (OFI, crossed states). A closing
bar's row is appended to the bar arrays with a raw copy of its closing record, the book at
close; :func:`finish_bars` appends the day's last, still open bar. The rules are those of
:mod:`fxstore.ingest.bars.builder`; floating-point sums run in record order, as a whole-day
pass would.

A bar's records are known only once it closes, so its accumulator is a row of sums that one
record at a time updates (``ACC_OPEN``). Time bars need two more rows: a bar ends at the last
F_LAST record of its interval, which is known only when a record of a later interval arrives;
the records after that F_LAST (a packet still open) then move to the next bar. ``ACC_TAIL``
sums those records from zero (it becomes the next bar as is) and ``ACC_AT_LAST`` holds the open
row as it was at the F_LAST record (the bar to emit), taken when a tail starts.

Records outside the session [open, close) of the day's BarParams are in no bar: a pre-open
record (before the open: CME's maintenance window, a weekend, a holiday) only sets the book
the session's first OFI is measured against; a record after the close changes nothing.

Speed: the per-record helpers are inlined and do the least they can (a trade's fields are
decoded only for action 'T' records, one in ten); record fields are read at constant columns.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from fxstore._jit import njit, njit_inline
from fxstore.ingest.bars.kernels import (
    ACTION_TRADE,
    B_ACTION,
    B_FLAGS,
    B_SIDE,
    BF_IMBALANCE,
    BF_MAX_TRADES,
    BF_MIN_TRADES,
    BF_THRESHOLD,
    BI_END,
    BI_EVENTS,
    BI_HAS_BOOK,
    BI_IMPLAUSIBLE,
    BI_PARTIAL,
    BI_REASON,
    BI_START,
    BI_TRADES,
    BI_TS_CLOSE,
    F64,
    FLAG_LAST,
    I64,
    L_INSTRUMENT_ID,
    L_SIZE,
    Q_ASK_PX_00,
    Q_BID_PX_00,
    Q_PRICE,
    Q_TS_RECV,
    SIDE_ASK,
    SIDE_BID,
    U8,
    U32,
    UNDEF_PRICE,
    Int,
    add_book,
    add_record,
    add_trade,
    clear,
    is_implausible,
    is_implausible_trade,
    next_bar_rules,
    set_book,
    sign_trade,
    trades_per_bar,
    update_bar_stats,
)
from fxstore.ingest.bars.params import (
    NO_PRICE_HI,
    REASON_INTERVAL,
    REASON_MAX_TRADES,
    REASON_MIN_TRADES,
    REASON_PARTIAL,
    REASON_THRESHOLD,
    REASON_WARMUP,
    RULE_IMBALANCE,
    RULE_PLAIN,
    RULE_TIME,
    WEIGHT_DOLLARS,
    WEIGHT_SIZE,
    BarParams,
)

# Accumulator rows.
ACC_OPEN, ACC_TAIL, ACC_AT_LAST = 0, 1, 2

# int64 state.
SI_N_SEEN, SI_LAST_TS, SI_INSTRUMENT, SI_N_DAMAGED = 0, 1, 2, 3
SI_PREV_PRICE, SI_PREV_SIGN, SI_HAS_PREV_TRADE, SI_HAS_BOOK = 4, 5, 6, 7
SI_N_BARS, SI_ARMED, SI_INTERVAL, SI_HAS_LAST = 8, 9, 10, 11
SI_N_DAY, SI_T_FIRST, SI_T_PREV = 12, 13, 14
# Time bars: the day's last F_LAST record; where the next interval starts (interval k is
# [open + k·interval, open + (k+1)·interval), and records before the open count in k = 0).
SI_LAST_INDEX, SI_LAST_INDEX_TS, SI_NEXT_INTERVAL_NS = 15, 16, 17
# Why the open bar armed (a REASON_* code); whether |θ| reached the threshold before the bar
# had its minimum trades (imbalance bars).
SI_REASON, SI_HIT = 18, 19
# Records outside the session (before its open: the pre-open; after its close), which are in
# no bar; the last record inside it (the day's last bar ends there).
SI_N_OUT, SI_END_INDEX, SI_END_TS = 20, 21, 22
N_SI: Final = 23
# float64 state: Σ v (plain); imbalance: recent trades, rules, EWMAs of b·v, (b·v)² and
# (1 - alpha)^n_day (SF_FLOW..+3), EWMAs over bars (SF_BAR_STATS..+3).
SF_TOTAL, SF_RECENT, SF_THRESHOLD, SF_MIN_TRADES, SF_MAX_TRADES = 0, 1, 2, 3, 4
SF_FLOW, SF_BAR_STATS = 5, 8
N_SF: Final = 11

# Status codes of update_bars.
OK, BACK_IN_TIME, OTHER_INSTRUMENT, BAD_ROWS = 0, 1, 2, 3

Chunk = tuple[I64, U32, U8]
State = tuple[I64, F64, I64, U8]
Acc = tuple[I64, F64]
Bars = tuple[I64, F64, U8]


@njit
def _check_chunk(q: I64, lw: U32, rows: I64, last_ts: int, known: int) -> tuple[int, int, int]:
    """``(status, r, instrument_id)``: BAD_ROWS at the first of `rows` that is not an
    ascending index into the chunk, else BACK_IN_TIME at the first that goes back in time,
    else OTHER_INSTRUMENT at the first not of the builder's instrument (`known`, or the first
    record's when it is -1); r indexes `rows`."""
    previous = -1
    for r in range(rows.shape[0]):
        j = rows[r]
        if (j <= previous) | (j >= q.shape[0]):
            return BAD_ROWS, r, known
        previous = j
    instrument_id = known if known >= 0 else int(np.int64(lw[rows[0], L_INSTRUMENT_ID]))
    prev = last_ts
    for r in range(rows.shape[0]):
        j = rows[r]
        if q[j, Q_TS_RECV] < prev:
            return BACK_IN_TIME, r, instrument_id
        prev = q[j, Q_TS_RECV]
    for r in range(rows.shape[0]):
        if lw[rows[r], L_INSTRUMENT_ID] != instrument_id:
            return OTHER_INSTRUMENT, r, instrument_id
    return OK, 0, instrument_id


@njit_inline
def _read_trade(
    q: I64, lw: U32, b: U8, j: int, st_i: I64, params: BarParams
) -> tuple[bool, Int, Int, Int, Int, float]:
    """(is_trade, price, size, b, aggressor, v) of 'T' record `j`; signs it or counts it damaged."""
    px, qty, side = q[j, Q_PRICE], np.int64(lw[j, L_SIZE]), b[j, B_SIDE]
    if (px == UNDEF_PRICE) | (qty == 0):
        st_i[SI_N_DAMAGED] += 1
        return False, px, qty, np.int64(0), np.int64(0), 0.0
    aggressor = np.int64(side == SIDE_BID) - np.int64(side == SIDE_ASK)
    has_prev = st_i[SI_HAS_PREV_TRADE] != 0
    sign = sign_trade(aggressor, px, st_i[SI_PREV_PRICE], st_i[SI_PREV_SIGN], has_prev)
    st_i[SI_PREV_PRICE], st_i[SI_PREV_SIGN], st_i[SI_HAS_PREV_TRADE] = px, sign, 1
    weight = 1.0
    if params.weight == WEIGHT_SIZE:
        weight = float(qty)
    elif params.weight == WEIGHT_DOLLARS:  # as numpy computes price / scale * size * mult
        weight = px / params.price_scale * float(qty) * params.multiplier
    return True, px, qty, sign, aggressor, weight


@njit_inline
def _rules(st_f: F64) -> tuple[float, float, float]:
    """The open bar's rules: threshold, min trades, max trades."""
    return st_f[SF_THRESHOLD], st_f[SF_MIN_TRADES], st_f[SF_MAX_TRADES]


@njit
def _emit(
    acc: Acc,
    row: int,
    st_i: I64,
    end: tuple[int, int],
    rules: tuple[float, float, float],
    reason: int,
    book: U8,
    bars: Bars,
) -> None:
    """Append accumulator `row` as a bar ending at `end` = (record index, its ts_recv), with
    the `rules` it was cut by (threshold, min and max trades), why it closed, and `book` (a
    raw record) as its book at close."""
    (acc_i, acc_f), (bars_i, bars_f, bars_book) = acc, bars
    n = st_i[SI_N_BARS]
    bars_i[n, :], bars_f[n, :] = acc_i[row, :], acc_f[row, :]
    bars_i[n, BI_END], bars_i[n, BI_TS_CLOSE] = end
    bars_i[n, BI_EVENTS] = end[0] - acc_i[row, BI_START] + 1
    bars_i[n, BI_HAS_BOOK], bars_i[n, BI_PARTIAL] = st_i[SI_HAS_BOOK], reason == REASON_PARTIAL
    bars_i[n, BI_REASON] = reason
    bars_f[n, BF_THRESHOLD], bars_f[n, BF_MIN_TRADES], bars_f[n, BF_MAX_TRADES] = rules
    bars_book[n, :] = book
    st_i[SI_N_BARS] = n + 1


@njit_inline
def _imbalance_trade(st_i: I64, st_f: F64, ts: int, x: float, acc: Acc, params: BarParams) -> None:
    """Imbalance bars, after a trade: EWMAs over trades; armed by |θ| or the trade limits."""
    bar_ns, alpha = params.target_bar_ns, params.alpha_trades
    st_i[SI_T_FIRST] = ts if st_i[SI_N_DAY] == 0 else st_i[SI_T_FIRST]
    st_f[SF_RECENT] = st_f[SF_RECENT] * math.exp((st_i[SI_T_PREV] - ts) / bar_ns) + 1.0
    st_i[SI_N_DAY], st_i[SI_T_PREV] = st_i[SI_N_DAY] + 1, ts
    st_f[SF_FLOW] += alpha * (x - st_f[SF_FLOW])
    st_f[SF_FLOW + 1] += alpha * (x * x - st_f[SF_FLOW + 1])
    st_f[SF_FLOW + 2] *= 1.0 - alpha
    if st_i[SI_N_BARS] > 0:  # the first bar is a warm-up, closed by time
        theta, trades = acc[1][ACC_OPEN, BF_IMBALANCE], acc[0][ACC_OPEN, BI_TRADES]
        hit, enough = abs(theta) >= st_f[SF_THRESHOLD], trades >= st_f[SF_MIN_TRADES]
        if st_i[SI_ARMED] == 0:
            if hit & enough:
                st_i[SI_ARMED] = 1
                st_i[SI_REASON] = REASON_MIN_TRADES if st_i[SI_HIT] != 0 else REASON_THRESHOLD
            elif trades >= st_f[SF_MAX_TRADES]:
                st_i[SI_ARMED], st_i[SI_REASON] = 1, REASON_MAX_TRADES
        st_i[SI_HIT] |= hit


@njit
def _next_imbalance_rules(st_i: I64, st_f: F64, ts: int, acc: Acc, params: BarParams) -> None:
    """Fix the next imbalance bar's rules as the open one closes (see ``next_bar_rules``)."""
    bar_ns, band, alpha_bars = params.target_bar_ns, params.band, params.alpha_bars
    flow, bar_stats = st_f[SF_FLOW : SF_FLOW + 3], st_f[SF_BAR_STATS : SF_BAR_STATS + 3]
    theta, trades = acc[1][ACC_OPEN, BF_IMBALANCE], acc[0][ACC_OPEN, BI_TRADES]
    dev = theta - trades * flow[0] / (1.0 - flow[2])
    update_bar_stats(bar_stats, st_i[SI_N_BARS] == 0, trades, dev, alpha_bars)
    recent_now = st_f[SF_RECENT] * math.exp((st_i[SI_T_PREV] - ts) / bar_ns)
    t_star = trades_per_bar(st_i[SI_N_DAY], ts - st_i[SI_T_FIRST], bar_ns, recent_now)
    bar_stats[0] = min(max(bar_stats[0], t_star / band), t_star * band)
    threshold, min_trades, max_trades = next_bar_rules(t_star, bar_stats[0], flow, bar_stats, band)
    st_f[SF_THRESHOLD], st_f[SF_MIN_TRADES], st_f[SF_MAX_TRADES] = threshold, min_trades, max_trades


@njit
def _end_interval(
    ts: int, b: U8, last_row: int, state: State, params: BarParams, acc: Acc, bars: Bars
) -> None:
    """Time bars, before a record at `ts` >= SI_NEXT_INTERVAL_NS, which opens a later interval:
    the open bar ends at its last F_LAST record (chunk row `last_row`, or the saved record if
    -1), if it has one, and is emitted if it holds a trade; the records after that F_LAST
    (``ACC_TAIL``) become the next bar."""
    st_i, st_f, _, last_book = state
    acc_i, acc_f = acc
    origin, interval_ns = params.session_open_ns, params.interval_ns
    k = max(np.int64(0), (ts - origin) // interval_ns)
    if (k > st_i[SI_INTERVAL]) & (st_i[SI_HAS_LAST] != 0):
        row = ACC_AT_LAST if acc_i[ACC_TAIL, BI_START] >= 0 else ACC_OPEN
        if acc_i[row, BI_TRADES] > 0:
            end, rules = (st_i[SI_LAST_INDEX], st_i[SI_LAST_INDEX_TS]), _rules(st_f)
            if last_row >= 0:
                _emit(acc, row, st_i, end, rules, REASON_INTERVAL, b[last_row], bars)
            else:
                _emit(acc, row, st_i, end, rules, REASON_INTERVAL, last_book, bars)
        acc_i[ACC_OPEN, :], acc_f[ACC_OPEN, :] = acc_i[ACC_TAIL, :], acc_f[ACC_TAIL, :]
        st_i[SI_HAS_LAST] = 0
    st_i[SI_INTERVAL] = max(st_i[SI_INTERVAL], k)
    st_i[SI_NEXT_INTERVAL_NS] = origin + (st_i[SI_INTERVAL] + 1) * interval_ns


@njit
def _update(chunk: Chunk, rows: I64, params: BarParams, state: State, acc: Acc, bars: Bars) -> int:
    """The loop of :func:`update_bars`; returns the chunk row of its last F_LAST record, or -1."""
    (q, lw, b), (st_i, st_f, prev, _), (acc_i, acc_f) = chunk, state, acc
    rule = params.rule
    is_time, base, last_row = rule == RULE_TIME, st_i[SI_N_SEEN], -1
    has_range = params.price_hi < NO_PRICE_HI
    for r in range(rows.shape[0]):
        j = rows[r]
        ts, flags, index = q[j, Q_TS_RECV], b[j, B_FLAGS], base + r
        is_last = (flags & FLAG_LAST) != 0
        if (ts < params.session_open_ns) | (ts >= params.session_close_ns):  # out of session
            st_i[SI_N_OUT] += 1
            if (ts < params.session_open_ns) & is_last:  # the pre-open book: the session's
                set_book(q, lw, j, prev)  # first OFI is measured against it
                st_i[SI_HAS_BOOK], last_row = 1, j
            continue
        st_i[SI_END_INDEX], st_i[SI_END_TS] = index, ts
        in_tail = is_time & (not is_last)  # time bars: a packet still open may move on
        if is_time & (ts >= st_i[SI_NEXT_INTERVAL_NS]):  # no division per record
            _end_interval(ts, b, last_row, state, params, acc, bars)
        if in_tail & (acc_i[ACC_TAIL, BI_START] < 0):  # keep the open bar as it is at F_LAST
            acc_i[ACC_AT_LAST, :], acc_f[ACC_AT_LAST, :] = acc_i[ACC_OPEN, :], acc_f[ACC_OPEN, :]
        add_record(acc_i, ACC_OPEN, index, ts, flags)
        if in_tail:
            add_record(acc_i, ACC_TAIL, index, ts, flags)
        if b[j, B_ACTION] == ACTION_TRADE:
            is_trade, px, qty, sign, aggressor, weight = _read_trade(q, lw, b, j, st_i, params)
            signed = float(sign) * weight
            # checked where the run gives a price range (the contract's facts are known)
            bad_px = np.int64(
                is_trade
                & (
                    is_implausible(px, params.price_lo, params.price_hi)
                    | (
                        has_range
                        & is_implausible_trade(
                            px, qty, prev, st_i[SI_HAS_BOOK] != 0, params.tick_fixed
                        )
                    )
                )
            )
            if is_trade:
                add_trade(acc_i, acc_f, ACC_OPEN, px, qty, sign, aggressor, signed)
                acc_i[ACC_OPEN, BI_IMPLAUSIBLE] += bad_px
            if is_trade & in_tail:
                add_trade(acc_i, acc_f, ACC_TAIL, px, qty, sign, aggressor, signed)
                acc_i[ACC_TAIL, BI_IMPLAUSIBLE] += bad_px
            if is_trade & (rule == RULE_PLAIN):  # armed once Σ v reaches the threshold
                st_f[SF_TOTAL] += weight
                st_i[SI_ARMED] |= st_f[SF_TOTAL] >= st_f[SF_THRESHOLD]
            if is_trade & (rule == RULE_IMBALANCE):
                _imbalance_trade(st_i, st_f, ts, signed, acc, params)
        if is_last:
            add_book(q, lw, j, prev, st_i[SI_HAS_BOOK] != 0, acc_i, acc_f, ACC_OPEN)
            lo, hi = params.price_lo, params.price_hi
            bad_book = is_implausible(q[j, Q_BID_PX_00], lo, hi) | is_implausible(
                q[j, Q_ASK_PX_00], lo, hi
            )
            acc_i[ACC_OPEN, BI_IMPLAUSIBLE] += np.int64(bad_book)
            st_i[SI_HAS_BOOK], last_row = 1, j
        if is_time & is_last:
            clear(acc_i, acc_f, ACC_TAIL)
            st_i[SI_HAS_LAST], st_i[SI_LAST_INDEX], st_i[SI_LAST_INDEX_TS] = 1, index, ts
        trades = acc_i[ACC_OPEN, BI_TRADES]
        if (rule == RULE_IMBALANCE) & (st_i[SI_N_BARS] == 0) & (trades > 0):  # warm-up
            st_i[SI_ARMED] = ts - st_i[SI_T_FIRST] >= params.target_bar_ns
            st_i[SI_REASON] = REASON_WARMUP
        if (st_i[SI_ARMED] != 0) & is_last:  # never set for time bars
            rules = _rules(st_f)
            if rule == RULE_IMBALANCE:
                _next_imbalance_rules(st_i, st_f, ts, acc, params)
            _emit(acc, ACC_OPEN, st_i, (index, ts), rules, st_i[SI_REASON], b[j], bars)
            clear(acc_i, acc_f, ACC_OPEN)
            st_f[SF_TOTAL], st_i[SI_ARMED] = 0.0, 0
            st_i[SI_REASON], st_i[SI_HIT] = REASON_THRESHOLD, 0
    return last_row


@njit
def update_bars(
    chunk: Chunk, rows: I64, params: BarParams, state: State, acc: Acc, bars: Bars
) -> tuple[int, int]:
    """Add the instrument's records of one chunk to the day's bars, or reject them whole.

    Parameters
    ----------
    chunk
        The chunk's records as C-contiguous int64 (m, 46), uint32 (m, 92) and uint8 (m, 368)
        rows, read in place.
    rows
        The chunk rows of the instrument's records (n of them, strictly ascending, checked):
        the other rows, another instrument's, are not read.
    params
        The day's bar rule (:class:`~fxstore.ingest.bars.params.BarParams`).
    state
        int64 (N_SI,) and float64 (N_SF,) scalars, the previous consistent book (4, N_LEVELS)
        (bid, bid size, ask, ask size) and the day's last F_LAST record, raw (368,).
    acc
        The accumulator rows: int64 (3, N_BI) and float64 (3, N_BF).
    bars
        The bar arrays, with room for n more bars: int64 (cap, N_BI), float64 (cap, N_BF),
        uint8 (cap, 368) raw records (the book at close).

    Returns
    -------
    tuple
        ``(status, r)``: OK, or BAD_ROWS / BACK_IN_TIME / OTHER_INSTRUMENT and the index in
        `rows` of the first offending one; rejected records leave every array as it was.
    """
    q, lw, b = chunk
    st_i, last_book = state[0], state[3]
    n = rows.shape[0]
    if n == 0:
        return OK, 0
    status, row, instrument_id = _check_chunk(q, lw, rows, st_i[SI_LAST_TS], st_i[SI_INSTRUMENT])
    if status != OK:
        return status, row
    st_i[SI_INSTRUMENT] = instrument_id
    last_row = _update(chunk, rows, params, state, acc, bars)
    if last_row >= 0:
        last_book[:] = b[last_row]
    st_i[SI_N_SEEN] += n
    st_i[SI_LAST_TS] = q[rows[n - 1], Q_TS_RECV]
    return OK, 0


@njit
def finish_bars(params: BarParams, state: State, acc: Acc, bars: Bars) -> None:
    """Close the day: the open bar, if it holds a trade, ends at the day's last record
    inside the session.

    Its book is the day's last consistent one; it is partial when its own rule had not closed
    it (not armed, or a time interval cut by the session close). Arguments as in
    :func:`update_bars`, with room for one more bar.
    """
    st_i, st_f, _, last_book = state
    if acc[0][ACC_OPEN, BI_TRADES] == 0:
        return
    if params.rule == RULE_TIME:
        origin, interval_ns = params.session_open_ns, params.interval_ns
        close_ns = params.session_close_ns
        is_partial = origin + (st_i[SI_INTERVAL] + 1) * interval_ns > close_ns
    else:
        is_partial = st_i[SI_ARMED] == 0
    reason = REASON_PARTIAL if is_partial else st_i[SI_REASON]
    if (params.rule == RULE_TIME) & (not is_partial):
        reason = REASON_INTERVAL
    end = (st_i[SI_END_INDEX], st_i[SI_END_TS])  # the last record inside the session
    _emit(acc, ACC_OPEN, st_i, end, _rules(st_f), reason, last_book, bars)
