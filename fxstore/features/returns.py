"""Fused numba passes over the one-bar returns: the shared series and every return column.

:func:`contract_series_into` makes the series every return feature shares (returns within a
contract, roll flags, the volatility normaliser sigma and its inverse) in one pass;
:func:`rolling_returns_into` writes all ``log_return`` and ``realised_vol`` columns and
:func:`forward_returns_into` all ``forward_return`` targets, each reading ``r`` and
``1 / sigma`` once per block of bars (cache-sized, instead of once per column). Outputs are
numpy arrays the caller allocates (large numpy allocations get transparent huge pages: far
fewer first-touch page faults than numba's malloc). The float64 operations and their order
are those of :func:`fxstore.features.kernels.contract_returns`,
:func:`~fxstore.features.kernels.rolling_rms`,
:func:`~fxstore.features.kernels.rolling_sum_over`,
:func:`~fxstore.features.kernels.rolling_rms_over` and
:func:`~fxstore.features.kernels.forward_sum`, so the values are bit for bit theirs (one
dependent addition per bar and column: the value at bar t depends on bars ``0 .. t`` alone,
targets on ``t .. n - 1``).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit_numpy_errors
from fxstore.features.kernels import F32, F64, I64, U8

__all__ = ["contract_series_into", "forward_returns_into", "rolling_returns_into"]


#: Bars per block: the block's r, 1 / sigma and running sums stay in the L1/L2 cache.
_BLOCK = 2048
_EXPONENT = np.uint32(0x7F800000)


@njit_numpy_errors
def contract_series_into(
    log_close: F64,
    instrument_id: npt.NDArray[np.uint32],
    window: int,
    floor: float,
    r: F64,
    is_roll: U8,
    sigma: F64,
    inv_sigma: F64,
) -> None:
    """Returns within a contract, roll flags, sigma and 1 / sigma, in one pass.

    Writes float64 (n,) `r` (:func:`~fxstore.features.kernels.contract_returns`: 0 at bar 0
    and on a contract's first bar), uint8 (n,) `is_roll`, float64 (n,) `sigma`
    (:func:`~fxstore.features.kernels.rolling_rms` of `r` over `window` bars, floored at
    `floor`, NaN for t < `window`) and float64 (n,) ``inv_sigma = 1 / sigma``. `inv_sigma`
    may be `log_close` itself (bar t's log close is read before it is overwritten).
    """
    inv_window = 1.0 / window
    acc = 0.0
    previous = log_close[0] if log_close.shape[0] else 0.0
    for t in range(log_close.shape[0]):
        current = log_close[t]
        rt = 0.0
        if t > 0 and instrument_id[t] == instrument_id[t - 1]:
            rt = current - previous
        is_roll[t] = 1 if t > 0 and instrument_id[t] != instrument_id[t - 1] else 0
        previous = current
        r[t] = rt
        old = r[t - window] if t >= window else 0.0
        acc += rt * rt - old * old
        s = max(math.sqrt(max(acc, 0.0) * inv_window), floor) if t >= window else np.nan
        sigma[t] = s
        inv_sigma[t] = 1.0 / s


@njit_numpy_errors
def _first_nonfinite(x: F32) -> int:
    """The first index where float32 `x` is not finite, or -1 (a branch-free pass first)."""
    found = np.uint32(0)
    bits = x.view(np.uint32)
    for i in range(bits.shape[0]):
        found |= np.uint32((bits[i] & _EXPONENT) == _EXPONENT)
    if found == 0:
        return -1
    for i in range(x.shape[0]):
        if not math.isfinite(x[i]):
            return i
    return -1


@njit_numpy_errors
def _rolling_block(
    r: F64, inv: F64, window: int, is_rms: bool, factor: float, b0: int, acc: float, kept: F32
) -> float:
    """One column's values at bars ``b0 .. b0 + len(kept) - 1`` into `kept`; the new `acc`.

    The running sum (of ``r``, or with `is_rms` of ``r**2``) at bar t is bar t's window's;
    `kept` gets NaN for t < window. `inv` is ``1 / sigma`` at the same bars.
    """
    m = kept.shape[0]
    split = min(max(window - b0, 0), m)  # bars before `window`: nothing leaves the window yet
    x_in, x_out = r[b0 + split : b0 + m], r[b0 + split - window : b0 + m - window]
    inv_rest, kept_rest = inv[split:], kept[split:]
    if is_rms:
        inv_window = 1.0 / window
        for i in range(split):
            x = r[b0 + i]
            acc += x * x - 0.0 * 0.0
            kept[i] = np.nan
        for i in range(m - split):
            acc += x_in[i] * x_in[i] - x_out[i] * x_out[i]
            kept_rest[i] = math.sqrt(max(acc, 0.0) * inv_window) * inv_rest[i]
    else:
        for i in range(split):
            acc += r[b0 + i] - 0.0
            kept[i] = np.nan
        for i in range(m - split):
            acc += x_in[i] - x_out[i]
            kept_rest[i] = acc * inv_rest[i] * factor
    return acc


@njit_numpy_errors
def rolling_returns_into(
    r: F64,
    inv_sigma: F64,
    specs: I64,
    factors: F64,
    lo: int,
    hi: int,
    out: F32,
    first_bad: I64,
) -> None:
    """Every ``log_return`` and ``realised_vol`` column in one blocked pass.

    Parameters
    ----------
    r, inv_sigma
        float64 (n,): one-bar returns and 1 / sigma (:func:`contract_series_into`).
    specs
        int64 (k, 3): ``(window, is_rms, row)`` per column, written to ``out[row]``:
        ``sum(r over the window) * inv_sigma * factor`` (``log_return``, `factors` row j
        ``1 / sqrt(window)``), or with `is_rms` ``sqrt(mean(r**2 over the window)) *
        inv_sigma`` (``realised_vol``); NaN for bars t < window.
    factors
        float64 (k,): the sums' factors (unused where `is_rms`).
    lo, hi
        Kept bars: ``out[row, t - lo]`` is bar t's value for ``lo <= t < hi``.
    out
        float32 (n_columns, hi - lo).
    first_bad
        int64 (k,), written: the first kept bar whose value is not finite, or -1.
    """
    k = specs.shape[0]
    acc = np.zeros(k)
    first_bad[:] = -1
    for j in range(k):  # warm-up bars: running sums only (as rolling_sum_into)
        window, a = specs[j, 0], 0.0
        for t in range(min(lo, hi)):
            old = r[t - window] if t >= window else 0.0
            a += r[t] * r[t] - old * old if specs[j, 1] else r[t] - old
        acc[j] = a
    for b0 in range(min(lo, hi), hi, _BLOCK):
        m = min(_BLOCK, hi - b0)
        inv = inv_sigma[b0 : b0 + m]
        for j in range(k):
            kept = out[specs[j, 2], b0 - lo : b0 - lo + m]
            is_rms = specs[j, 1] != 0
            acc[j] = _rolling_block(r, inv, specs[j, 0], is_rms, factors[j], b0, acc[j], kept)
            if first_bad[j] < 0:
                bad = _first_nonfinite(kept)
                if bad >= 0:
                    first_bad[j] = b0 + bad


@njit_numpy_errors
def forward_returns_into(
    r: F64,
    inv_sigma: F64,
    horizons: I64,
    rows: I64,
    lo: int,
    hi: int,
    out: F32,
    first_bad: I64,
) -> None:
    """Every ``forward_return`` target in one blocked pass, from the last bar back.

    ``out[rows[j], t - lo] = sum(r[t+1 .. t+h]) * inv_sigma[t] / sqrt(h)`` for the horizon
    ``h = horizons[j]`` and ``lo <= t < hi``; NaN where the bars run out (t + h >= n).
    `first_bad` (int64 (k,), written) holds the first kept bar whose value is not finite,
    or -1.
    """
    n = r.shape[0]
    k = horizons.shape[0]
    acc = np.zeros(k)
    first_bad[:] = -1
    for j in range(k):  # bars after the kept ones: running sums only
        h = horizons[j]
        a = 0.0
        for t in range(n - 1, hi - 1, -1):
            a += r[t] - (r[t + h] if t + h < n else 0.0)
        acc[j] = a
    for b1 in range(hi, lo, -_BLOCK):  # block b1 - m .. b1 - 1, last bar first
        m = min(_BLOCK, b1 - lo)
        b0 = b1 - m
        inv = inv_sigma[b0:b1]
        for j in range(k):
            h = horizons[j]
            factor = 1.0 / math.sqrt(h)
            kept = out[rows[j], b0 - lo : b1 - lo]
            a = acc[j]
            split = min(max(n - h - b0, 0), m)  # bars from b0 + split on: t + h >= n
            for i in range(m - 1, split - 1, -1):
                kept[i] = a * inv[i] * factor  # the sum over t+1 .. t+h, before bar t enters
                a += r[b0 + i] - 0.0
            x_in, x_out = r[b0 : b0 + split], r[b0 + h : b0 + split + h]
            for i in range(split - 1, -1, -1):
                kept[i] = a * inv[i] * factor
                a += x_in[i] - x_out[i]
            acc[j] = a
            for i in range(split, m):
                kept[i] = np.nan  # bars t with t + h >= n: the horizon runs past the data
            bad = _first_nonfinite(kept)
            if bad >= 0:
                first_bad[j] = b0 + bad  # blocks run backwards: the last one found is first
