"""One fused numba pass over the ten book levels for every book feature of a feature set.

The order-flow (``ofi_level``, ``ofi_multi``), ``book_imbalance`` and ``depth`` kinds all sum
sizes and OFI over book levels. :func:`book_levels_into` reads each level's columns once per
block of bars (cache-sized temporaries, no full-length level sums) and writes the kept bars'
float32 values straight into their output rows, checking each block of them for
non-finite values while it is in cache. The operations and their order are those of
:func:`fxstore.features.kernels.over_rolling_depth`, :func:`~fxstore.features.kernels.balance`
and :func:`~fxstore.features.kernels.level_sum`, so the values equal theirs bit for bit:
sizes are whole numbers far below 2**53, so their sums (kept here in int64, over levels and
over a window) are exact in any order, and the OFI sums add levels left to right as
``level_sum`` does.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit_numpy_errors
from fxstore.features.kernels import F32, F64, I64

__all__ = ["book_levels_into"]

U32 = npt.NDArray[np.uint32]

#: Bars per block: the block's int64/float64 temporaries stay in the core's L2 cache.
_BLOCK = 1024


@njit_numpy_errors
def _rolling_depth(bid: U32, ask: U32, window: int, b0: int, acc: np.int64, rs: I64) -> np.int64:
    """Window sums of ``bid + ask`` at bars ``b0 .. b0 + len(rs) - 1`` into `rs`; new `acc`."""
    m = rs.shape[0]
    split = min(max(window - b0, 0), m)  # bars before `window`: nothing leaves the window yet
    bid_in, ask_in = bid[b0 : b0 + split], ask[b0 : b0 + split]
    for i in range(split):  # indices from range over views: no negative-index wrapping
        acc += np.int64(bid_in[i]) + np.int64(ask_in[i])
        rs[i] = acc
    bid_in, ask_in = bid[b0 + split : b0 + m], ask[b0 + split : b0 + m]
    bid_out = bid[b0 + split - window : b0 + m - window]
    ask_out = ask[b0 + split - window : b0 + m - window]
    rs_rest = rs[split:]
    for i in range(m - split):  # one dependent addition per bar (integers: exact)
        acc += (np.int64(bid_in[i]) + np.int64(ask_in[i])) - (
            np.int64(bid_out[i]) + np.int64(ask_out[i])
        )
        rs_rest[i] = acc
    return acc


@njit_numpy_errors
def _add_pair_into(acc_a: I64, a: U32, acc_b: I64, b: U32) -> None:
    for i in range(acc_a.shape[0]):
        acc_a[i] += np.int64(a[i])
        acc_b[i] += np.int64(b[i])


@njit_numpy_errors
def _add_level_into(den: I64, rs: I64, num: F64, ofi: F64, is_first: bool) -> None:
    """One more level of a multi-level spec: its window depth sums and its OFI."""
    if is_first:
        for i in range(den.shape[0]):
            den[i] += rs[i]
            num[i] = ofi[i]
    else:
        for i in range(den.shape[0]):
            den[i] += rs[i]
            num[i] += ofi[i]


@njit_numpy_errors
def _shared_depth(ofi_specs: I64, j: int, level: int) -> int:
    """The first spec before `j` with spec j's window whose levels hold `level`, or j."""
    for q in range(j):
        first, count, window = ofi_specs[q, 0], ofi_specs[q, 1], ofi_specs[q, 2]
        if first <= level < first + count and window == ofi_specs[j, 2]:
            return q
    return j


@njit_numpy_errors
def _write_ofi(num: F64, den: I64, window: int, floor: float, b0: int, lo: int, out: F32) -> None:
    """``num / max(den * 0.5 / window, floor)`` for the block's kept bars; NaN before a window."""
    half_inv_window = 0.5 / window
    start = max(lo - b0, 0)
    kept = out[b0 + start - lo : b0 + num.shape[0] - lo]
    num_kept, den_kept = num[start:], den[start:]
    for i in range(kept.shape[0]):
        kept[i] = num_kept[i] / max(float(den_kept[i]) * half_inv_window, floor)
    for i in range(start, min(window - 1 - b0, num.shape[0])):
        out[b0 + i - lo] = np.nan  # bars before the first full window (kept only if lo is)


@njit_numpy_errors
def _write_balance(b: I64, a: I64, b0: int, lo: int, out: F32) -> None:
    """``(b - a) / (b + a)`` for the block's kept bars; NaN where the book is empty."""
    start = max(lo - b0, 0)
    kept = out[b0 + start - lo : b0 + b.shape[0] - lo]
    b_kept, a_kept = b[start:], a[start:]
    for i in range(kept.shape[0]):
        den = float(b_kept[i]) + float(a_kept[i])
        kept[i] = (float(b_kept[i]) - float(a_kept[i])) / den if den != 0.0 else np.nan


@njit_numpy_errors
def _check_block(out: F32, rows: I64, b0: int, size: int, lo: int, first_bad: I64) -> None:
    """Record in `first_bad` the block's first non-finite kept bar per row of `rows`."""
    start = max(b0, lo)
    exponent = np.uint32(0x7F800000)
    for row in rows:
        if first_bad[row] >= 0:
            continue
        bits = out[row, start - lo : b0 + size - lo].view(np.uint32)
        found = np.uint32(0)
        for i in range(bits.shape[0]):  # branch-free: vectorised
            found |= np.uint32((bits[i] & exponent) == exponent)
        if found:
            for i in range(bits.shape[0]):
                if (bits[i] & exponent) == exponent:
                    first_bad[row] = start + i
                    break


@njit_numpy_errors
def book_levels_into(
    bid: tuple[U32, ...],
    ask: tuple[U32, ...],
    ofi: tuple[F64, ...],
    ofi_specs: I64,
    balance_specs: I64,
    depth_levels: I64,
    floor: float,
    lo: int,
    hi: int,
    out: F32,
    depth_total: F64,
    first_bad: I64,
) -> None:
    """Order-flow, book-imbalance and depth totals over book levels, in one blocked pass.

    Parameters
    ----------
    bid, ask
        uint32 (n,) sizes at close, one array per level 0..9.
    ofi
        float64 (n,) order-flow imbalance, one array per level 0..9.
    ofi_specs
        int64 (k, 4): ``(first_level, n_levels, window, row)`` per OFI output, written to
        ``out[row]``: ``sum(ofi_l) / max(mean(sum(bid_l + ask_l) / 2 over the window),
        floor)``, the sums over levels ``first_level .. first_level + n_levels - 1``; NaN
        before a full window.
    balance_specs
        int64 (m, 2): ``(levels, row)`` per book-imbalance output, written to ``out[row]``:
        ``(sum bid - sum ask) / (sum bid + sum ask)`` over the first `levels` levels, NaN
        where the book is empty.
    depth_levels
        int64 (p,): levels of each depth total ``sum(bid_l + ask_l)`` over the first levels.
    floor
        Smallest average depth used as a denominator (contracts), > 0.
    lo, hi
        Kept bars: ``out[row, t - lo]`` is bar t's value for ``lo <= t < hi``.
    out
        float32 (n_columns, hi - lo): the rows named by the specs are written.
    depth_total
        float64 (p, hi), written for every bar ``0 .. hi - 1`` (rolling means need them all).
    first_bad
        int64 (n_columns,): for each row written, set to the first kept bar whose value is
        not finite, or -1 (checked per block while it is in cache); other rows untouched.
    """
    k, m, p = ofi_specs.shape[0], balance_specs.shape[0], depth_levels.shape[0]
    first_bad[ofi_specs[:, 3]] = -1
    first_bad[balance_specs[:, 1]] = -1
    n_levels = len(bid)
    acc = np.zeros((k, n_levels), dtype=np.int64)
    rs = np.empty((k, _BLOCK), dtype=np.int64)  # one level's window depth sums, per spec
    den = np.empty((k, _BLOCK), dtype=np.int64)
    num = np.empty((k, _BLOCK))
    cum_bid = np.empty(_BLOCK, dtype=np.int64)
    cum_ask = np.empty(_BLOCK, dtype=np.int64)
    n_cum = max(balance_specs[:, 0].max() if m else 0, depth_levels.max() if p else 0)
    for b0 in range(0, hi, _BLOCK):
        size = min(_BLOCK, hi - b0)
        den[:, :size] = 0
        cum_bid[:size] = 0
        cum_ask[:size] = 0
        for level in range(n_levels):
            bid_l, ask_l = bid[level][b0 : b0 + size], ask[level][b0 : b0 + size]
            ofi_l = ofi[level][b0 : b0 + size]
            if level < n_cum:  # sums over the first levels (imbalance, depth)
                _add_pair_into(cum_bid[:size], bid_l, cum_ask[:size], ask_l)
                for j in range(m):
                    if balance_specs[j, 0] == level + 1:
                        row = out[balance_specs[j, 1]]
                        _write_balance(cum_bid[:size], cum_ask[:size], b0, lo, row)
                for j in range(p):
                    if depth_levels[j] == level + 1:
                        total = depth_total[j, b0 : b0 + size]
                        for i in range(size):
                            total[i] = float(cum_bid[i] + cum_ask[i])
            for j in range(k):
                first, count, window = ofi_specs[j, 0], ofi_specs[j, 1], ofi_specs[j, 2]
                if not first <= level < first + count:
                    continue
                q = _shared_depth(ofi_specs, j, level)  # same window and level: sums shared
                if q == j:
                    acc[j, level] = _rolling_depth(
                        bid[level], ask[level], window, b0, acc[j, level], rs[j, :size]
                    )
                if count == 1:  # one level: its OFI over its window depth, written now
                    if b0 + size > lo:
                        _write_ofi(ofi_l, rs[q, :size], window, floor, b0, lo, out[ofi_specs[j, 3]])
                    continue
                # OFI summed left to right over levels, as level_sum does
                _add_level_into(den[j, :size], rs[q, :size], num[j, :size], ofi_l, level == first)
        if b0 + size > lo:
            for j in range(k):
                if ofi_specs[j, 1] > 1:
                    row = out[ofi_specs[j, 3]]
                    _write_ofi(num[j, :size], den[j, :size], ofi_specs[j, 2], floor, b0, lo, row)
            _check_block(out, ofi_specs[:, 3], b0, size, lo, first_bad)
            _check_block(out, balance_specs[:, 1], b0, size, lo, first_bad)
