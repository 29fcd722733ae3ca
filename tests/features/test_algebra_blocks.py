"""The expression kernel over many blocks of bars: windows longer than a block, restarts
on either side of a block's edge, and NaN inputs, against the obvious slow loop."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.features.algebra import ExprDef
from fxstore.features.algebra_kernels import BLOCK
from fxstore.features.compute import _arrow_f32
from fxstore.features.program import compile_program, run_expressions

F64 = npt.NDArray[np.float64]
N = 3 * BLOCK + 517


def _restart() -> npt.NDArray[np.uint8]:
    """Trading days of uneven lengths, two of them starting one bar either side of a
    block's edge."""
    restart = np.zeros(N, dtype=np.uint8)
    restart[[0, 700, BLOCK - 1, BLOCK + 1, 2 * BLOCK, 2 * BLOCK + 1500, 3 * BLOCK + 3]] = 1
    return restart


def _slow(op: str, x: F64, w: int, reset: bool, restart: npt.NDArray[np.uint8]) -> F64:
    out = np.full(x.size, np.nan)
    seg = 0
    for t in range(x.size):
        if reset and restart[t]:
            seg = t
        window = x[max(seg, t - w + 1) : t + 1]
        if not reset and window.size < w:
            continue
        out[t] = window.max() if op == "rolling_max" else window.min()  # NaN if any is
    return out


def _run(text: str, reset: str, x: F64, restart: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    program = compile_program([ExprDef("v", text, reset)], vol_window=30)  # type: ignore[arg-type]
    out = np.empty((1, N), dtype=np.float32)
    run_expressions(program, lambda name: x, restart, 0, N, out)
    return out[0]


@pytest.mark.parametrize("op", ["rolling_min", "rolling_max"])
@pytest.mark.parametrize("w", [1, 2, 7, 64, BLOCK - 1, BLOCK + 5, 2 * BLOCK + 700])
@pytest.mark.parametrize("reset", ["none", "session"])
def test_rolling_extremes_across_blocks_match_the_slow_loop(op: str, w: int, reset: str) -> None:
    rng = np.random.default_rng(w)
    x = np.round(rng.normal(size=N) * 8.0) / 4.0  # ties on purpose
    x[rng.integers(0, N, 3)] = np.nan  # a window holding a NaN is NaN
    x[N // 2] = np.inf
    restart = _restart()

    got = _run(f"{op}(close, {w})", reset, x, restart)

    expected = _slow(op, x, w, reset == "session", restart).astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def test_rolling_extremes_of_a_trend_take_the_window_edges() -> None:
    x = np.arange(N, dtype=np.float64)

    low = _run("rolling_min(close, 300)", "none", x, _restart())
    high = _run("rolling_max(close, 300)", "none", x, _restart())

    np.testing.assert_array_equal(low[299:], x[:-299].astype(np.float32))
    np.testing.assert_array_equal(high[299:], x[299:].astype(np.float32))
    assert np.isnan(low[:299]).all() and np.isnan(high[:299]).all()


def _slow_stat(op: str, x: F64, n: int, reset: bool, restart: npt.NDArray[np.uint8]) -> F64:
    """The windowed statistics and EMA, lag and diff the obvious way."""
    out = np.full(x.size, np.nan)
    seg, e = 0, 0.0
    for t in range(x.size):
        if reset and restart[t]:
            seg = t
        if op == "ema":
            e = x[t] if t == seg else e + 2.0 / (n + 1) * (x[t] - e)
            out[t] = e if reset or t - seg + 1 >= n else np.nan
            continue
        if op in ("lag", "diff"):
            past = x[t - n] if t - n >= seg else (x[seg] if reset else np.nan)
            out[t] = past if op == "lag" else x[t] - past
            continue
        window = x[max(seg, t - n + 1) : t + 1]
        if not reset and window.size < n:
            continue
        std = window.std() if np.ptp(window) > 0 else 0.0
        out[t] = {
            "rolling_sum": window.sum(),
            "rolling_mean": window.mean(),
            "rolling_std": std,
            "rolling_zscore": (x[t] - window.mean()) / std if std > 0 else 0.0,
        }[op]
    return out


@pytest.mark.parametrize(
    "op", ["ema", "rolling_sum", "rolling_mean", "rolling_std", "rolling_zscore", "lag", "diff"]
)
@pytest.mark.parametrize("n", [3, BLOCK + 5])
@pytest.mark.parametrize("reset", ["none", "session"])
def test_stateful_functions_across_blocks_match_the_slow_loop(op: str, n: int, reset: str) -> None:
    x = 4500.0 + np.cumsum(np.random.default_rng(n).normal(size=N))  # a price-like level

    got = _run(f"{op}(close, {n})", reset, x, _restart())

    expected = _slow_stat(op, x, n, reset == "session", _restart())
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    scale = np.nanmax(np.abs(expected))
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-5, atol=2e-6 * scale)


@pytest.mark.skipif(sys.platform != "linux", reason="madvise advice is Linux's")
def test_feature_columns_ask_for_small_pages() -> None:
    """The columns' memory is advised MADV_NOHUGEPAGE ('nh' in the mapping's VmFlags): huge
    pages faulted in on fragmented memory stalled precompute for seconds."""
    out = _arrow_f32(4, 1 << 20)  # 16 MiB
    address = out.ctypes.data + (4 << 20)  # inside its whole pages

    flags = _vm_flags(address)

    assert "nh" in flags.split()
    out[:] = 1.0  # the memory is the array's, writable
    assert float(out.sum()) == 4 * (1 << 20)


def _vm_flags(address: int) -> str:
    """The VmFlags of the mapping of this process that holds `address`."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return line.removeprefix("VmFlags:")
    raise AssertionError(f"no mapping holds {address:#x}")
