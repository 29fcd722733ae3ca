"""Numba kernels behind :mod:`fxstore.features`: one O(n) pass over bar columns each.

Every kernel is a pure function: arrays and scalars in, a new array out; no I/O, no config.
Rows are bars in ``ts_close`` order. A rolling statistic over ``window`` bars at bar t uses
bars ``t - window + 1 .. t`` only (the past and the present bar, never the future, except in
:func:`forward_sum`, which builds targets). Running sums are updated in float64 by adding the
difference between the value entering and the one leaving the window (one dependent addition
per bar: the loops are bound by that chain's latency), so the value at bar t depends on bars
``0 .. t`` alone and is bit-for-bit the same whatever follows (the point-in-time tests rely on
this). Rows where a statistic is not yet defined (warm-up) are NaN.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit, njit_numpy_errors

__all__ = [
    "angle_into",
    "balance",
    "balance_into",
    "contract_returns",
    "cyclical",
    "demeaned",
    "demeaned_into",
    "difference_over",
    "difference_over_into",
    "duration_s",
    "duration_s_into",
    "empty_f32",
    "first_nonfinite",
    "first_nonfinite_f32",
    "forward_sum",
    "forward_sum_into",
    "level_sum",
    "microprice_offset",
    "microprice_offset_into",
    "over_rolling_depth",
    "over_rolling_depth_into",
    "rolling_rms",
    "rolling_rms_over",
    "rolling_sum_into",
    "rolling_sum_over",
    "scaled_difference",
    "scaled_difference_into",
    "session_phase_into",
]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
#: Integer or float column arrays (sizes are uint32 in the bar store, sums int64).
Numeric = npt.NDArray[np.float64] | npt.NDArray[np.int64] | npt.NDArray[np.uint32]


#: Bars per block of the kernels that split a sequential pass from vectorised arithmetic.
_BLOCK = 4096


@njit
def contract_returns(log_close: F64, instrument_id: npt.NDArray[np.uint32]) -> tuple[F64, U8]:
    """One-bar log returns of the close, never across a roll.

    Parameters
    ----------
    log_close
        float64 (n,): log of the bar's close (index points).
    instrument_id
        uint32 (n,): the bar's instrument; a change marks a roll.

    Returns
    -------
    tuple
        ``(r, is_roll)``: float64 (n,) with ``r[t] = log_close[t] - log_close[t-1]`` when bars
        t-1 and t belong to the same instrument, and 0 on the first bar of a new contract
        (the roll gap is not a return); ``r[0] = 0`` (no previous bar; bar 0 lies in no
        valid window). uint8 (n,) ``is_roll``: 1 where bar t's instrument differs from bar
        t-1's (never at bar 0).
    """
    n = log_close.shape[0]
    r = np.zeros(n)
    is_roll = np.zeros(n, dtype=np.uint8)
    for t in range(1, n):
        if instrument_id[t] == instrument_id[t - 1]:
            r[t] = log_close[t] - log_close[t - 1]
        else:
            is_roll[t] = 1
    return r, is_roll


@njit
def rolling_rms(x: F64, window: int, first: int, floor: float) -> F64:
    """``max(sqrt(mean(x[t-window+1 .. t]**2)), floor)`` for t >= `first`, NaN before."""
    n = x.shape[0]
    out = np.empty(n)
    inv_window = 1.0 / window
    acc = 0.0
    for t in range(n):
        old = x[t - window] if t >= window else 0.0
        acc += x[t] * x[t] - old * old
        out[t] = max(math.sqrt(max(acc, 0.0) * inv_window), floor) if t >= first else np.nan
    return out


@njit
def rolling_sum_over(x: F64, window: int, first: int, inv_scale: F64, factor: float) -> F32:
    """``sum(x[t-window+1 .. t]) * inv_scale[t] * factor`` for t >= `first`, NaN before."""
    n = x.shape[0]
    out = np.empty(n, dtype=np.float32)
    acc = 0.0
    for t in range(n):
        acc += x[t] - (x[t - window] if t >= window else 0.0)
        out[t] = acc * inv_scale[t] * factor if t >= first else np.nan
    return out


@njit
def rolling_rms_over(x: F64, window: int, first: int, inv_scale: F64) -> F32:
    """``sqrt(mean(x[t-window+1 .. t]**2)) * inv_scale[t]`` for t >= `first`, NaN before."""
    n = x.shape[0]
    out = np.empty(n, dtype=np.float32)
    inv_window = 1.0 / window
    acc = 0.0
    for t in range(n):
        old = x[t - window] if t >= window else 0.0
        acc += x[t] * x[t] - old * old
        out[t] = math.sqrt(max(acc, 0.0) * inv_window) * inv_scale[t] if t >= first else np.nan
    return out


@njit
def over_rolling_depth(num: F64, bid: Numeric, ask: Numeric, window: int, floor: float) -> F32:
    """``num[t] / max(mean((bid + ask) / 2 over bars t-window+1 .. t), floor)``.

    Order-flow imbalance over the average depth (Cont, Kukanov & Stoikov 2014, eq. 9 uses the
    average depth of the interval); NaN for t < window - 1.
    """
    n = num.shape[0]
    out = np.empty(n, dtype=np.float32)
    half_inv_window = 0.5 / window
    acc = 0.0
    for t in range(n):
        old = float(bid[t - window]) + float(ask[t - window]) if t >= window else 0.0
        acc += float(bid[t]) + float(ask[t]) - old
        out[t] = num[t] / max(acc * half_inv_window, floor) if t >= window - 1 else np.nan
    return out


@njit
def demeaned(x: F64, window: int) -> F32:
    """``x[t] - mean(x[t-window+1 .. t])`` for t >= window - 1, NaN before."""
    n = x.shape[0]
    out = np.empty(n, dtype=np.float32)
    inv_window = 1.0 / window
    acc = 0.0
    for t in range(n):
        acc += x[t] - (x[t - window] if t >= window else 0.0)
        out[t] = x[t] - acc * inv_window if t >= window - 1 else np.nan
    return out


@njit
def forward_sum(x: F64, horizon: int, inv_scale: F64, factor: float) -> F32:
    """``sum(x[t+1 .. t+horizon]) * inv_scale[t] * factor``; NaN where bars run out (targets)."""
    n = x.shape[0]
    out = np.empty(n, dtype=np.float32)
    acc = 0.0
    for t in range(n - 1, -1, -1):
        out[t] = acc * inv_scale[t] * factor if t + horizon < n else np.nan
        acc += x[t] - (x[t + horizon] if t + horizon < n else 0.0)
    return out


@njit
def level_sum(columns: tuple[Numeric, ...], start: int, stop: int, base: F64) -> F64:
    """float64 (n,): `base` plus ``columns[start] + ... + columns[stop - 1]`` (book levels).

    `base` is the sum of the levels before `start`, or an empty array for none, so the sums
    over 5 and then 10 levels read each level once. Sizes are whole numbers far below
    2**53: their float64 sums are exact.
    """
    n = columns[0].shape[0]
    out = np.empty(n)
    first = columns[start]
    if base.shape[0] == n:
        for t in range(n):
            out[t] = base[t] + first[t]
    else:
        for t in range(n):
            out[t] = first[t]
    for k in range(start + 1, stop):
        column = columns[k]
        for t in range(n):
            out[t] += column[t]
    return out


@njit
def balance(a: Numeric, b: Numeric) -> F32:
    """``(a - b) / (a + b)`` in [-1, 1]; NaN where ``a + b`` is 0."""
    n = a.shape[0]
    out = np.empty(n, dtype=np.float32)
    for t in range(n):
        den = float(a[t]) + float(b[t])
        out[t] = (float(a[t]) - float(b[t])) / den if den != 0.0 else np.nan
    return out


@njit
def difference_over(a: Numeric, b: Numeric, total: Numeric) -> F32:
    """``(a - b) / total``; NaN where `total` is 0."""
    out = np.empty(a.shape[0], dtype=np.float32)
    difference_over_into(a, b, total, 0, a.shape[0], out)
    return out


@njit
def scaled_difference(a: F64, b: F64, scale: float) -> F32:
    """``(a - b) * scale``; NaN where an input is NaN (an empty book level)."""
    out = np.empty(a.shape[0], dtype=np.float32)
    scaled_difference_into(a, b, scale, 0, a.shape[0], out)
    return out


@njit
def microprice_offset(
    bid_px: F64,
    ask_px: F64,
    bid_sz: npt.NDArray[np.uint32],
    ask_sz: npt.NDArray[np.uint32],
    tick_size: float,
) -> F32:
    """Microprice minus mid in ticks: ``(ask - bid) / 2 * (Qb - Qa) / (Qb + Qa) / tick``.

    The microprice ``(bid * Qa + ask * Qb) / (Qa + Qb)`` leans towards the side with less
    size; minus the mid it is the half-spread times the level-0 size imbalance.
    """
    out = np.empty(bid_px.shape[0], dtype=np.float32)
    microprice_offset_into(bid_px, ask_px, bid_sz, ask_sz, tick_size, 0, bid_px.shape[0], out)
    return out


def duration_s(ts_open: I64, ts_close: I64, min_ns: int) -> F64:
    """``max(ts_close - ts_open, min_ns) * 1e-9`` per bar: float64 seconds, floored."""
    out = np.empty(ts_close.shape[0])
    duration_s_into(ts_open, ts_close, min_ns, out)
    return out


@njit
def duration_s_into(ts_open: I64, ts_close: I64, min_ns: int, out: F64) -> None:
    """:func:`duration_s` into float64 (n,) `out` (allocated by the caller, with numpy)."""
    for t in range(ts_close.shape[0]):
        out[t] = float(max(ts_close[t] - ts_open[t], min_ns)) * 1e-9


@njit
def session_phase_into(
    ts_close: I64, session_start: U8, open_ns: I64, close_ns: I64, out: F64
) -> None:
    """Fraction of each bar's session elapsed at its close, ``(ts - open) / (close - open)``,
    into float64 (n,) `out`, the day counted from `session_start`.

    Day d's bounds are ``open_ns[d]``, ``close_ns[d]``; `session_start` is 1 on each day's
    first bar (bar 0 included).
    """
    d = -1
    for t in range(ts_close.shape[0]):
        if session_start[t]:
            d += 1
        out[t] = (ts_close[t] - open_ns[d]) / (close_ns[d] - open_ns[d])


def cyclical(phase: F64, use_cos: bool) -> F32:
    """``sin(2 pi phase)`` or ``cos(2 pi phase)``, as float32.

    numpy's vectorised float32 sine and cosine (each element computed the same way wherever
    it sits in the array, so values stay point in time); the angle's float32 rounding is
    below the output's precision.
    """
    angle = (2.0 * np.pi * phase).astype(np.float32)
    return np.cos(angle) if use_cos else np.sin(angle)


@njit
def _first_nonfinite_scan(x: F32 | F64, lo: int, hi: int) -> int:
    for t in range(lo, hi):
        if not math.isfinite(x[t]):
            return t
    return -1


def first_nonfinite(x: F32 | F64, lo: int, hi: int) -> int:
    """Index of the first NaN or infinity in ``x[lo:hi]``, or -1 when all are finite."""
    if np.isfinite(x[lo:hi]).all():  # numpy's vectorised check: the common, all-finite case
        return -1
    return int(_first_nonfinite_scan(x, lo, hi))


# Kernels writing the kept bars ``lo .. hi - 1`` only, straight into the final float32
# column (``out[t - lo]`` is bar t's value): the same float64 operations in the same order
# as the kernels above, so the values are bit for bit theirs. Each returns the first bar in
# ``lo .. hi - 1`` whose value is not finite, or -1.


@njit
def _first_nonfinite_f32(x: F32, offset: int) -> int:
    """``offset`` plus the first index where `x` is not finite, or -1.

    A branch-free pass first (vectorised), the scan only where it found one.
    """
    exponent = np.uint32(0x7F800000)
    found = np.uint32(0)
    bits = x.view(np.uint32)
    for i in range(bits.shape[0]):
        found |= np.uint32((bits[i] & exponent) == exponent)
    if found == 0:
        return -1
    for i in range(x.shape[0]):
        if not math.isfinite(x[i]):
            return i + offset
    return -1


@njit
def rolling_sum_into(
    x: F64, window: int, inv_scale: F64, factor: float, squared: bool, lo: int, hi: int, out: F32
) -> int:
    """:func:`rolling_sum_over` (or, `squared`, :func:`rolling_rms_over`) into `out`.

    Bar t's value (first defined at bar `window`) goes to ``out[t - lo]`` for
    ``lo <= t < hi``; `factor` is unused when `squared`. Returns the first bar in
    ``lo .. hi - 1`` whose value is not finite, or -1.
    """
    inv_window = 1.0 / window
    acc = 0.0
    start = min(lo, hi)
    if squared:
        for t in range(start):
            old = x[t - window] if t >= window else 0.0
            acc += x[t] * x[t] - old * old
        for i in range(hi - start):
            t = start + i
            old = x[t - window] if t >= window else 0.0
            acc += x[t] * x[t] - old * old
            v = math.sqrt(max(acc, 0.0) * inv_window) * inv_scale[t]
            out[i] = v if t >= window else np.nan
    else:
        for t in range(start):
            acc += x[t] - (x[t - window] if t >= window else 0.0)
        for i in range(hi - start):
            t = start + i
            acc += x[t] - (x[t - window] if t >= window else 0.0)
            out[i] = acc * inv_scale[t] * factor if t >= window else np.nan
    return _first_nonfinite_f32(out[: hi - start], lo)


@njit
def forward_sum_into(
    x: F64, horizon: int, inv_scale: F64, factor: float, lo: int, hi: int, out: F32
) -> int:
    """:func:`forward_sum` written to ``out[t - lo]`` for ``lo <= t < hi``.

    Returns the first bar in ``lo .. hi - 1`` whose value is not finite, or -1.
    """
    n = x.shape[0]
    acc = 0.0
    for t in range(n - 1, hi - 1, -1):
        acc += x[t] - (x[t + horizon] if t + horizon < n else 0.0)
    for i in range(hi - lo - 1, -1, -1):
        t = lo + i
        out[i] = acc * inv_scale[t] * factor if t + horizon < n else np.nan
        acc += x[t] - (x[t + horizon] if t + horizon < n else 0.0)
    return _first_nonfinite_f32(out[: max(hi - lo, 0)], lo)


@njit
def demeaned_into(x: F64, window: int, lo: int, hi: int, out: F32) -> int:
    """:func:`demeaned` written to ``out[t - lo]`` for ``lo <= t < hi``.

    Returns the first bar in ``lo .. hi - 1`` whose value is not finite, or -1.
    """
    inv_window = 1.0 / window
    acc = 0.0
    start = min(lo, hi)
    for t in range(start):
        acc += x[t] - (x[t - window] if t >= window else 0.0)
    for i in range(hi - start):
        t = start + i
        acc += x[t] - (x[t - window] if t >= window else 0.0)
        out[i] = x[t] - acc * inv_window if t >= window - 1 else np.nan
    return _first_nonfinite_f32(out[: hi - start], lo)


@njit_numpy_errors
def over_rolling_depth_into(
    num: F64, bid: Numeric, ask: Numeric, window: int, floor: float, lo: int, hi: int, out: F32
) -> int:
    """:func:`over_rolling_depth` written to ``out[t - lo]`` for ``lo <= t < hi``.

    `bid` and `ask` hold whole numbers (sizes or their sums, far below 2**53), so the
    window's depth sum is exact whether kept in float64 or, as here, in int64 (one-cycle
    dependent additions instead of float latency): the values equal
    :func:`over_rolling_depth`'s bit for bit. `floor` must be > 0. Returns the first bar in
    ``lo .. hi - 1`` whose value is not finite, or -1.
    """
    half_inv_window = 0.5 / window
    acc = np.int64(0)
    start = min(lo, hi)
    for t in range(start):
        old = np.int64(bid[t - window]) + np.int64(ask[t - window]) if t >= window else 0
        acc += np.int64(bid[t]) + np.int64(ask[t]) - old
    den = np.empty(_BLOCK)
    for b0 in range(start, hi, _BLOCK):
        m = min(_BLOCK, hi - b0)
        for i in range(m):  # the running depth sum: integer additions
            t = b0 + i
            old = np.int64(bid[t - window]) + np.int64(ask[t - window]) if t >= window else 0
            acc += np.int64(bid[t]) + np.int64(ask[t]) - old
            den[i] = max(float(acc) * half_inv_window, floor)
        num_block = num[b0 : b0 + m]
        out_block = out[b0 - lo : b0 - lo + m]
        for i in range(m):  # independent divisions: vectorised
            out_block[i] = num_block[i] / den[i]
    for i in range(min(hi, window - 1) - start):
        out[i] = np.nan  # bars before the first full window
    return _first_nonfinite_f32(out[: hi - start], lo)


@njit
def balance_into(a: Numeric, b: Numeric, lo: int, hi: int, out: F32) -> int:
    """:func:`balance` written to ``out[t - lo]`` for ``lo <= t < hi``.

    Returns the first bar in ``lo .. hi - 1`` whose value is not finite, or -1.
    """
    a_kept = a[lo:hi]
    b_kept = b[lo:hi]
    for i in range(a_kept.shape[0]):  # indices from range: no negative-index wrapping
        den = float(a_kept[i]) + float(b_kept[i])
        out[i] = (float(a_kept[i]) - float(b_kept[i])) / den if den != 0.0 else np.nan
    return _first_nonfinite_f32(out[: a_kept.shape[0]], lo)


@njit
def empty_f32(n: int) -> F32:
    """An uninitialised float32 (n,) array from numba's allocator (plain malloc)."""
    return np.empty(n, dtype=np.float32)


@njit
def angle_into(phase: F64, lo: int, hi: int, out: F32) -> None:
    """``out[t - lo] = float32(2 pi phase[t])`` for ``lo <= t < hi`` (as :func:`cyclical`)."""
    two_pi = 2.0 * np.pi
    kept = phase[lo:hi]
    for i in range(kept.shape[0]):
        out[i] = two_pi * kept[i]


@njit
def scaled_difference_into(a: F64, b: F64, scale: float, lo: int, hi: int, out: F32) -> int:
    """:func:`scaled_difference` written to ``out[t - lo]`` for ``lo <= t < hi``.

    Returns the first bar in ``lo .. hi - 1`` whose value is not finite, or -1.
    """
    for i in range(hi - lo):
        out[i] = (a[lo + i] - b[lo + i]) * scale
    return _first_nonfinite_f32(out[: hi - lo], lo)


@njit
def difference_over_into(a: Numeric, b: Numeric, total: Numeric, lo: int, hi: int, out: F32) -> int:
    """:func:`difference_over` written to ``out[t - lo]`` for ``lo <= t < hi``.

    Returns the first bar in ``lo .. hi - 1`` whose value is not finite, or -1.
    """
    for i in range(hi - lo):
        den = float(total[lo + i])
        out[i] = (float(a[lo + i]) - float(b[lo + i])) / den if den != 0.0 else np.nan
    return _first_nonfinite_f32(out[: hi - lo], lo)


@njit
def microprice_offset_into(
    bid_px: F64,
    ask_px: F64,
    bid_sz: npt.NDArray[np.uint32],
    ask_sz: npt.NDArray[np.uint32],
    tick_size: float,
    lo: int,
    hi: int,
    out: F32,
) -> int:
    """:func:`microprice_offset` written to ``out[t - lo]`` for ``lo <= t < hi``.

    Returns the first bar in ``lo .. hi - 1`` whose value is not finite, or -1.
    """
    for i in range(hi - lo):
        t = lo + i
        qb = float(bid_sz[t])
        qa = float(ask_sz[t])
        den = qa + qb
        if den == 0.0:
            out[i] = np.nan
        else:
            out[i] = 0.5 * (ask_px[t] - bid_px[t]) * (qb - qa) / den / tick_size
    return _first_nonfinite_f32(out[: hi - lo], lo)


@njit
def first_nonfinite_f32(x: F32, offset: int) -> int:
    """``offset`` plus the first index where float32 `x` is not finite, or -1."""
    return _first_nonfinite_f32(x, offset)
