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
from collections.abc import Callable
from typing import TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt

__all__ = [
    "back_adjust",
    "balance",
    "contract_returns",
    "cyclical",
    "demeaned",
    "difference_over",
    "first_nonfinite",
    "forward_sum",
    "level_sum",
    "microprice_offset",
    "over_rolling_depth",
    "rolling_rms",
    "rolling_rms_over",
    "rolling_sum_over",
    "scaled_difference",
    "session_phase",
    "trading_day_starts",
]

_F = TypeVar("_F", bound=Callable[..., object])

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
#: Integer or float column arrays (sizes are uint32 in the bar store, sums int64).
Numeric = npt.NDArray[np.float64] | npt.NDArray[np.int64] | npt.NDArray[np.uint32]


def _njit(func: _F) -> _F:
    """Compile `func` in numba's nopython mode, cached on disk, releasing the GIL."""
    return cast(_F, numba.njit(cache=True, nogil=True)(func))


@_njit
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


@_njit
def back_adjust(close: F64, is_roll: U8) -> F64:
    """Close back-adjusted by differences: no jump at a roll, the last contract unchanged.

    ``close[t] + sum(close[s] - close[s-1] for every roll bar s > t)``: each roll's gap (the
    new contract's first close minus the old one's last) is added to every earlier bar, so
    ``adjusted[s] - adjusted[s-1] = 0`` at a roll bar (the same zero return the features use)
    and differences within a contract are unchanged. It uses later rolls: not point in time,
    never a feature input.
    """
    n = close.shape[0]
    out = np.empty(n)
    offset = 0.0
    for t in range(n - 1, -1, -1):
        out[t] = close[t] + offset
        if is_roll[t] and t > 0:
            offset += close[t] - close[t - 1]
    return out


@_njit
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


@_njit
def rolling_sum_over(x: F64, window: int, first: int, inv_scale: F64, factor: float) -> F32:
    """``sum(x[t-window+1 .. t]) * inv_scale[t] * factor`` for t >= `first`, NaN before."""
    n = x.shape[0]
    out = np.empty(n, dtype=np.float32)
    acc = 0.0
    for t in range(n):
        acc += x[t] - (x[t - window] if t >= window else 0.0)
        out[t] = acc * inv_scale[t] * factor if t >= first else np.nan
    return out


@_njit
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


@_njit
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


@_njit
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


@_njit
def forward_sum(x: F64, horizon: int, inv_scale: F64, factor: float) -> F32:
    """``sum(x[t+1 .. t+horizon]) * inv_scale[t] * factor``; NaN where bars run out (targets)."""
    n = x.shape[0]
    out = np.empty(n, dtype=np.float32)
    acc = 0.0
    for t in range(n - 1, -1, -1):
        out[t] = acc * inv_scale[t] * factor if t + horizon < n else np.nan
        acc += x[t] - (x[t + horizon] if t + horizon < n else 0.0)
    return out


@_njit
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


@_njit
def balance(a: Numeric, b: Numeric) -> F32:
    """``(a - b) / (a + b)`` in [-1, 1]; NaN where ``a + b`` is 0."""
    n = a.shape[0]
    out = np.empty(n, dtype=np.float32)
    for t in range(n):
        den = float(a[t]) + float(b[t])
        out[t] = (float(a[t]) - float(b[t])) / den if den != 0.0 else np.nan
    return out


@_njit
def difference_over(a: Numeric, b: Numeric, total: Numeric) -> F32:
    """``(a - b) / total``; NaN where `total` is 0."""
    n = a.shape[0]
    out = np.empty(n, dtype=np.float32)
    for t in range(n):
        den = float(total[t])
        out[t] = (float(a[t]) - float(b[t])) / den if den != 0.0 else np.nan
    return out


@_njit
def scaled_difference(a: F64, b: F64, scale: float) -> F32:
    """``(a - b) * scale``; NaN where an input is NaN (an empty book level)."""
    n = a.shape[0]
    out = np.empty(n, dtype=np.float32)
    for t in range(n):
        out[t] = (a[t] - b[t]) * scale
    return out


@_njit
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
    n = bid_px.shape[0]
    out = np.empty(n, dtype=np.float32)
    for t in range(n):
        qb = float(bid_sz[t])
        qa = float(ask_sz[t])
        den = qa + qb
        if den == 0.0:
            out[t] = np.nan
        else:
            out[t] = 0.5 * (ask_px[t] - bid_px[t]) * (qb - qa) / den / tick_size
    return out


@_njit
def trading_day_starts(trading_day: npt.NDArray[np.int32]) -> tuple[I64, U8]:
    """``(day_index, session_start)``: per bar, its day's ordinal and 1 on a day's first bar.

    `trading_day` is non-decreasing; bar 0 starts day 0.
    """
    n = trading_day.shape[0]
    index = np.zeros(n, dtype=np.int64)
    start = np.zeros(n, dtype=np.uint8)
    day = 0
    for t in range(n):
        if t == 0 or trading_day[t] != trading_day[t - 1]:
            if t > 0:
                day += 1
            start[t] = 1
        index[t] = day
    return index, start


@_njit
def session_phase(ts_close: I64, day_index: I64, open_ns: I64, close_ns: I64) -> F64:
    """Fraction of the bar's session elapsed at its close: ``(ts - open) / (close - open)``."""
    n = ts_close.shape[0]
    out = np.empty(n)
    for t in range(n):
        d = day_index[t]
        out[t] = (ts_close[t] - open_ns[d]) / (close_ns[d] - open_ns[d])
    return out


def cyclical(phase: F64, use_cos: bool) -> F32:
    """``sin(2 pi phase)`` or ``cos(2 pi phase)``, as float32.

    numpy's vectorised float32 sine and cosine (each element computed the same way wherever
    it sits in the array, so values stay point in time); the angle's float32 rounding is
    below the output's precision.
    """
    angle = (2.0 * np.pi * phase).astype(np.float32)
    return np.cos(angle) if use_cos else np.sin(angle)


@_njit
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
