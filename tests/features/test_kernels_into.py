"""The `*_into` kernels equal the full-length kernels' kept rows bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from fxstore.features import kernels, returns


def _same(into: np.ndarray, full: np.ndarray) -> None:
    assert into.dtype == full.dtype == np.float32
    np.testing.assert_array_equal(into.view(np.uint32), full.view(np.uint32))


def _first_bad(full: np.ndarray, lo: int, hi: int) -> int:
    return int(kernels.first_nonfinite(full, lo, hi))


@pytest.mark.parametrize(("window", "lo", "hi"), [(3, 0, 50), (4, 2, 50), (5, 9, 40), (60, 1, 50)])
def test_rolling_and_forward_into(window: int, lo: int, hi: int) -> None:
    rng = np.random.default_rng(window + lo)
    x = rng.normal(size=50)
    inv_scale = rng.uniform(0.5, 2.0, size=50)
    out = np.empty(hi - lo, dtype=np.float32)
    bad = kernels.rolling_sum_into(x, window, inv_scale, 0.7, False, lo, hi, out)
    full = kernels.rolling_sum_over(x, window, window, inv_scale, 0.7)
    _same(out, full[lo:hi])
    assert bad == _first_bad(full, lo, hi)
    bad = kernels.rolling_sum_into(x, window, inv_scale, 1.0, True, lo, hi, out)
    full = kernels.rolling_rms_over(x, window, window, inv_scale)
    _same(out, full[lo:hi])
    assert bad == _first_bad(full, lo, hi)
    bad = kernels.forward_sum_into(x, window, inv_scale, 0.3, lo, hi, out)
    full = kernels.forward_sum(x, window, inv_scale, 0.3)
    _same(out, full[lo:hi])
    assert bad == _first_bad(full, lo, hi)
    bad = kernels.demeaned_into(x, window, lo, hi, out)
    full = kernels.demeaned(x, window)
    _same(out, full[lo:hi])
    assert bad == _first_bad(full, lo, hi)


@pytest.mark.parametrize(("window", "lo", "hi"), [(1, 0, 9000), (3, 2, 9000), (100, 5, 8999)])
def test_book_into(window: int, lo: int, hi: int) -> None:
    rng = np.random.default_rng(window)
    n = 9000
    num = rng.normal(size=n)
    bid = rng.integers(0, 3, size=n).astype(np.uint32)
    ask = rng.integers(0, 3, size=n).astype(np.uint32)
    out = np.empty(hi - lo, dtype=np.float32)
    bad = kernels.over_rolling_depth_into(num, bid, ask, window, 1.0, lo, hi, out)
    full = kernels.over_rolling_depth(num, bid, ask, window, 1.0)
    _same(out, full[lo:hi])
    assert bad == _first_bad(full, lo, hi)
    sums = bid.astype(np.float64), ask.astype(np.float64)
    bad = kernels.over_rolling_depth_into(num, *sums, window, 1.0, lo, hi, out)
    _same(out, kernels.over_rolling_depth(num, *sums, window, 1.0)[lo:hi])
    bad = kernels.balance_into(*sums, lo, hi, out)
    full = kernels.balance(*sums)
    _same(out, full[lo:hi])
    assert bad == _first_bad(full, lo, hi) >= 0  # some bars have an empty book


def test_angle_into_then_cos_equals_cyclical() -> None:
    phase = np.random.default_rng(3).uniform(0.0, 1.0, size=1000)
    for use_cos, fn in ((True, np.cos), (False, np.sin)):
        out = np.empty(990, dtype=np.float32)
        kernels.angle_into(phase, 7, 997, out)
        fn(out, out=out)
        _same(out, kernels.cyclical(phase, use_cos)[7:997])


def test_contract_series_into_equals_returns_then_rolling_rms() -> None:
    rng = np.random.default_rng(8)
    log_close = np.log(rng.uniform(4000.0, 4100.0, size=300))
    ids = np.repeat(np.array([3, 5, 9], dtype=np.uint32), 100)
    r, is_roll, sigma = np.empty(300), np.empty(300, dtype=np.uint8), np.empty(300)
    inv_sigma = log_close.copy()  # may alias log_close, as BarInputs uses it

    returns.contract_series_into(inv_sigma, ids, 20, 1e-6, r, is_roll, sigma, inv_sigma)

    r_full, roll_full = kernels.contract_returns(log_close, ids)
    sigma_full = kernels.rolling_rms(r_full, 20, 20, 1e-6)
    np.testing.assert_array_equal(r.view(np.uint64), r_full.view(np.uint64))
    np.testing.assert_array_equal(is_roll, roll_full)
    np.testing.assert_array_equal(sigma.view(np.uint64), sigma_full.view(np.uint64))
    np.testing.assert_array_equal(inv_sigma, np.divide(1.0, sigma_full))
