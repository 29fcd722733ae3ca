"""Per-record pieces of the bar kernels: record layout, trade signs, bar sums, OFI, imbalance rules.

These are the small numba functions that the streaming loop of
:mod:`fxstore.ingest.bars.stream` calls for every record, trade or bar; each is a pure
function of its arguments (arrays passed in are the only thing written). Prices stay int64
fixed point (1e-9) here; ``bars.py`` scales them.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit, njit_inline
from fxstore.errors import SchemaError
from fxstore.ingest.dbn import format as fmt

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
U32 = npt.NDArray[np.uint32]
U8 = npt.NDArray[np.uint8]
Bools = npt.NDArray[np.bool_]
Int = int | np.int64


# --- the MBP-10 record, read through int64 (Q_), uint32 (L_) and uint8 (B_) row views -------
# Literals, so that numba compiles them in as constants (a third faster than columns passed
# at run time); check_layout verifies them against MBP10_DTYPE at import, because numba's
# on-disk cache would not notice a change made in dbn_format.
RECORD_BYTES: Final = 368
Q_PRICE, Q_TS_RECV, Q_BID_PX_00, Q_ASK_PX_00, Q_LEVEL_STEP = 2, 4, 6, 7, 4
L_INSTRUMENT_ID, L_SIZE, L_BID_SZ_00, L_ASK_SZ_00, L_LEVEL_STEP = 1, 6, 16, 17, 8
B_ACTION, B_SIDE, B_FLAGS = 28, 29, 30
N_LEVELS: Final = 10
ACTION_TRADE, SIDE_BID, SIDE_ASK = 84, 66, 65  # 'T', 'B', 'A'
FLAG_LAST, FLAG_BAD_TS_RECV, FLAG_MAYBE_BAD_BOOK = 128, 8, 4
UNDEF_PRICE: Final = 0x7FFF_FFFF_FFFF_FFFF


def check_layout() -> None:
    """Raise SchemaError unless the constants above match :mod:`fxstore.ingest.dbn.format`."""
    fields = fmt.MBP10_DTYPE.fields
    assert fields is not None
    expected = {
        (Q_PRICE, 8): "price", (Q_TS_RECV, 8): "ts_recv", (Q_BID_PX_00, 8): "bid_px_00",
        (Q_ASK_PX_00, 8): "ask_px_00", (Q_BID_PX_00 + Q_LEVEL_STEP, 8): "bid_px_01",
        (L_INSTRUMENT_ID, 4): "instrument_id", (L_SIZE, 4): "size", (L_BID_SZ_00, 4): "bid_sz_00",
        (L_ASK_SZ_00, 4): "ask_sz_00", (L_BID_SZ_00 + L_LEVEL_STEP, 4): "bid_sz_01",
        (B_ACTION, 1): "action", (B_SIDE, 1): "side", (B_FLAGS, 1): "flags",
    }  # fmt: skip
    wrong = [name for (col, width), name in expected.items() if fields[name][1] != col * width]
    codes = (FLAG_LAST, FLAG_BAD_TS_RECV, FLAG_MAYBE_BAD_BOOK, UNDEF_PRICE, N_LEVELS)
    known = (fmt.F_LAST, fmt.F_BAD_TS_RECV, fmt.F_MAYBE_BAD_BOOK, fmt.UNDEF_PRICE, fmt.N_LEVELS)
    if wrong or codes != known or fmt.MBP10_DTYPE.itemsize != RECORD_BYTES:
        raise SchemaError(f"the bar kernels' MBP-10 layout is out of date: {wrong or codes}.")


check_layout()

# --- a bar's sums: one int64 and one float64 row, in accumulators and in the bar arrays --------
BI_START, BI_END, BI_TS_OPEN, BI_TS_CLOSE, BI_EVENTS = 0, 1, 2, 3, 4
BI_OPEN, BI_HIGH, BI_LOW, BI_CLOSE = 5, 6, 7, 8
BI_VOLUME, BI_BUY, BI_SELL, BI_TRADES, BI_TICK_RULE = 9, 10, 11, 12, 13
BI_BAD_TS_RECV, BI_MAYBE_BAD_BOOK, BI_CROSSED, BI_HAS_BOOK, BI_PARTIAL = 14, 15, 16, 17, 18
#: Why the bar closed: a REASON_* code of :mod:`fxstore.ingest.bars.params`.
BI_REASON: Final = 19
#: Book states (best bid or ask) and trades priced outside the contract's plausible range.
BI_IMPLAUSIBLE: Final = 20
N_BI: Final = 21
#: Σ price·size (fixed point × contracts), θ = Σ b·v, threshold, OFI per level (N_LEVELS),
#: then the bar's trade limits (imbalance bars; inf: none).
BF_NOTIONAL, BF_IMBALANCE, BF_THRESHOLD, BF_OFI = 0, 1, 2, 3
BF_MIN_TRADES: Final = BF_OFI + N_LEVELS
BF_MAX_TRADES: Final = BF_MIN_TRADES + 1
N_BF: Final = BF_MAX_TRADES + 1


@njit_inline
def sign_trade(aggressor: Int, price: Int, prev_price: Int, prev_sign: Int, has_prev: bool) -> Int:
    """b of one trade: its aggressor side (+1 'B', -1 'A'), or the tick rule where it is 0.

    The tick rule takes the sign of the price change from the day's previous trade
    (`prev_price`, signed `prev_sign`), or that trade's sign when the price did not change;
    0 when there is no earlier trade today (`has_prev` false: e.g. the opening auction print).
    """
    if aggressor != 0 or not has_prev:
        return aggressor
    if price > prev_price:
        return 1
    if price < prev_price:
        return -1
    return prev_sign


@njit
def sign_trades(
    is_trade: Bools, aggressor: npt.NDArray[np.int8], price: I64
) -> npt.NDArray[np.int8]:
    """Sign every trade of a day with :func:`sign_trade`.

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
        int8, shape (n,): b_t in {-1, 0, +1} for trades, 0 elsewhere.
    """
    sign = np.zeros(is_trade.shape[0], dtype=np.int8)
    prev_price, prev_sign, has_prev = np.int64(0), np.int64(0), False
    for i in range(is_trade.shape[0]):
        if is_trade[i]:
            b = sign_trade(np.int64(aggressor[i]), price[i], prev_price, prev_sign, has_prev)
            sign[i] = b
            prev_price, prev_sign, has_prev = price[i], np.int64(b), True
    return sign


@njit_inline
def level_ofi(bid: Int, bid_qty: Int, ask: Int, ask_qty: Int, prev: I64, k: int) -> Int:
    """Cont-Kukanov-Stoikov e_n at level k; ``prev[:, k]`` = (bid, bid_qty, ask, ask_qty) before.

    e_n = 1{Pb_n >= Pb_n-1}·qb_n - 1{Pb_n <= Pb_n-1}·qb_n-1
          - 1{Pa_n <= Pa_n-1}·qa_n + 1{Pa_n >= Pa_n-1}·qa_n-1
    """
    e = bid_qty if bid >= prev[0, k] else 0
    e -= prev[1, k] if bid <= prev[0, k] else 0
    e -= ask_qty if ask <= prev[2, k] else 0
    e += prev[3, k] if ask >= prev[2, k] else 0
    return e


@njit_inline
def add_record(acc_i: I64, row: int, index: int, ts: int, flags: int) -> None:
    """Count record `index` in accumulator `row`: it may open the bar; data-quality flags.

    A bar's end, close time and record count are set when it is emitted.
    """
    if acc_i[row, BI_START] < 0:
        acc_i[row, BI_START], acc_i[row, BI_TS_OPEN] = index, ts
    if (flags & (FLAG_BAD_TS_RECV | FLAG_MAYBE_BAD_BOOK)) != 0:  # rare: no work otherwise
        acc_i[row, BI_BAD_TS_RECV] += np.int64((flags & FLAG_BAD_TS_RECV) != 0)
        acc_i[row, BI_MAYBE_BAD_BOOK] += np.int64((flags & FLAG_MAYBE_BAD_BOOK) != 0)


@njit_inline
def add_trade(
    acc_i: I64, acc_f: F64, row: int, px: Int, qty: Int, sign: Int, aggressor: Int, signed: float
) -> None:
    """Add a trade to accumulator `row`: OHLC, volumes, counts, Σ price·size and θ += b·v."""
    if acc_i[row, BI_TRADES] == 0:
        acc_i[row, BI_OPEN], acc_i[row, BI_HIGH], acc_i[row, BI_LOW] = px, px, px
    acc_i[row, BI_HIGH] = max(acc_i[row, BI_HIGH], px)
    acc_i[row, BI_LOW] = min(acc_i[row, BI_LOW], px)
    acc_i[row, BI_CLOSE] = px
    acc_i[row, BI_VOLUME] += qty
    acc_i[row, BI_BUY] += qty if sign > 0 else 0
    acc_i[row, BI_SELL] += qty if sign < 0 else 0
    acc_i[row, BI_TRADES] += 1
    acc_i[row, BI_TICK_RULE] += np.int64(aggressor == 0)
    acc_f[row, BF_NOTIONAL] += float(px) * float(qty)
    acc_f[row, BF_IMBALANCE] += signed


@njit_inline
def book_level(q: I64, lw: U32, j: int, k: int) -> tuple[Int, Int, Int, Int]:
    """(bid, bid size, ask, ask size) at level k of record `j`. An empty level (UNDEF_PRICE)
    is a bid below every price, an ask above every price, of size 0."""
    q_col, lw_col = k * Q_LEVEL_STEP, k * L_LEVEL_STEP
    bid, bid_qty = q[j, Q_BID_PX_00 + q_col], np.int64(lw[j, L_BID_SZ_00 + lw_col])
    if bid == UNDEF_PRICE:
        bid, bid_qty = -UNDEF_PRICE - 1, np.int64(0)
    ask, ask_qty = q[j, Q_ASK_PX_00 + q_col], np.int64(lw[j, L_ASK_SZ_00 + lw_col])
    if ask == UNDEF_PRICE:
        ask_qty = np.int64(0)  # UNDEF_PRICE (INT64_MAX) is above every price already
    return bid, bid_qty, ask, ask_qty


@njit_inline
def add_book(
    q: I64, lw: U32, j: int, prev: I64, has_prev: bool, acc_i: I64, acc_f: F64, row: int
) -> None:
    """Walk the consistent book of F_LAST record `j` into accumulator `row`.

    Counts the state as crossed when best bid >= best ask (both defined) and adds each
    level's e_n (:func:`level_ofi`) against `prev`, the previous consistent state (none for
    the day's first: `has_prev` false), which it then replaces.
    """
    best_bid, best_ask = q[j, Q_BID_PX_00], q[j, Q_ASK_PX_00]
    is_crossed = (best_bid != UNDEF_PRICE) & (best_ask != UNDEF_PRICE) & (best_bid >= best_ask)
    acc_i[row, BI_CROSSED] += np.int64(is_crossed)  # & not `and`: no branch, half the cost
    for k in range(N_LEVELS):
        bid, bid_qty, ask, ask_qty = book_level(q, lw, j, k)
        e = level_ofi(bid, bid_qty, ask, ask_qty, prev, k)
        acc_f[row, BF_OFI + k] += e if has_prev else 0  # + 0 leaves a sum of integers as is
        prev[0, k], prev[1, k], prev[2, k], prev[3, k] = bid, bid_qty, ask, ask_qty


@njit_inline
def is_implausible(px: Int, lo: Int, hi: Int) -> bool:
    """Whether a defined price (not UNDEF_PRICE) lies outside [lo, hi]."""
    return bool((px != UNDEF_PRICE) & ((px < lo) | (px > hi)))


#: A trade further than this share of the book's mid from it, or of more contracts than
#: :data:`MAX_TRADE_QTY`, is no trade of a market (ten times ES's price, four billion
#: contracts): a damaged record or a wrong scale. Real trades print inside or at the book.
MAX_TRADE_FROM_MID: Final = 0.2
MAX_TRADE_QTY: Final = 1_000_000


@njit_inline
def is_implausible_trade(px: Int, qty: Int, prev: I64, has_book: bool, tick: Int) -> bool:
    """Whether a trade's size, its price off the `tick` grid (fixed point; 0: not known),
    or its price against the last book (``prev[0, 0]`` bid, ``prev[2, 0]`` ask, when
    `has_book` and both are defined) cannot be a real trade."""
    if qty > MAX_TRADE_QTY:
        return True
    if tick > 0 and px % tick != 0:  # `and`, not `&`: no division by a zero tick
        return True
    bid, ask = prev[0, 0], prev[2, 0]
    if (not has_book) | (bid == UNDEF_PRICE) | (ask == UNDEF_PRICE) | (bid <= 0) | (ask <= 0):
        return False
    mid = 0.5 * (float(bid) + float(ask))
    return bool(abs(float(px) - mid) > MAX_TRADE_FROM_MID * mid)


@njit_inline
def set_book(q: I64, lw: U32, j: int, prev: I64) -> None:
    """Make F_LAST record `j`'s book the previous consistent state, counting nothing (a
    pre-open record: it sets the book the session's first OFI is measured against)."""
    for k in range(N_LEVELS):
        prev[0, k], prev[1, k], prev[2, k], prev[3, k] = book_level(q, lw, j, k)


@njit_inline
def clear(acc_i: I64, acc_f: F64, row: int) -> None:
    """Empty accumulator `row`."""
    acc_i[row, :], acc_f[row, :] = 0, 0.0
    acc_i[row, BI_START] = -1


@njit
def trades_per_bar(n_day: int, elapsed_ns: float, bar_ns: float, recent: float) -> float:
    """T*: the trades one bar should hold for the day to reach its target bar count.

    The larger of the day's average rate so far and the recent rate (`recent` = trades within
    about one target bar's duration `bar_ns`, exponentially weighted), times `bar_ns`. The
    recent rate keeps bars from shrinking when trading speeds up (Globex overnight → regular
    hours), which a day average alone would follow with a lag; in a lull the day average keeps
    bars from shrinking instead.
    """
    return max(n_day * bar_ns / max(elapsed_ns, 1.0), recent)


@njit
def next_bar_rules(
    t_star: float, expected: float, flow: F64, bar_stats: F64, band: float
) -> tuple[float, float, float]:
    """Rules of the next imbalance bar: (threshold, min trades, max trades).

    The threshold is López de Prado's E0[T]·|E0[b·v]|, floored at the standard deviation of θ
    over T* trades, sqrt(T*·var), so that balanced flow (E0[b·v] ≈ 0) cannot shrink bars to a
    trade or two. var is the larger of the per-trade variance of b·v and the variance per trade
    of θ realised over past bars, which also counts runs of same-signed trades (a sweep prints
    several trades of one side). The bar's length is confined to [T*/band, T*·band] trades.
    `flow` holds the EWMAs of b·v and (b·v)² over trades and (1 - alpha)^n_day.
    """
    mean = flow[0] / (1.0 - flow[2])
    var_trade = max(flow[1] / (1.0 - flow[2]) - mean * mean, 0.0)
    variance = max(var_trade, bar_stats[2] / bar_stats[1])
    threshold = max(expected * abs(mean), math.sqrt(t_star * variance))
    min_trades = max(1.0, math.ceil(t_star / band))
    return threshold, min_trades, max(min_trades, math.ceil(t_star * band))


@njit
def update_bar_stats(bar_stats: F64, is_first: bool, trades: int, dev: float, alpha: float) -> None:
    """EWMAs over bars of [E0[T], trades, (θ - trades·E0[b·v])²]; the first bar initialises them."""
    values = (float(trades), float(trades), dev * dev)
    for j in range(3):
        bar_stats[j] = values[j] if is_first else bar_stats[j] + alpha * (values[j] - bar_stats[j])
