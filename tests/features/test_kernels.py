"""Hand-computed tiny cases for every kernel of fxstore.features.kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fxstore.features import kernels

NAN = math.nan


def test_contract_returns_roll_bar_has_zero_return_and_flag() -> None:
    close = np.array([100.0, 101.0, 102.0, 200.0, 202.0])
    ids = np.array([1, 1, 1, 2, 2], dtype=np.uint32)

    r, is_roll = kernels.contract_returns(np.log(close), ids)

    np.testing.assert_allclose(r, [0.0, math.log(1.01), math.log(102 / 101), 0.0, math.log(1.01)])
    assert is_roll.tolist() == [0, 0, 0, 1, 0]


def test_rolling_rms_window_two_with_floor() -> None:
    x = np.array([0.0, 3.0, 4.0, 0.0, 0.0])

    out = kernels.rolling_rms(x, 2, 2, 0.5)

    np.testing.assert_allclose(out, [NAN, NAN, math.sqrt(12.5), math.sqrt(8.0), 0.5])


def test_rolling_sum_over_multiplies_by_inverse_scale_and_factor() -> None:
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    inv_scale = 1.0 / np.array([1.0, 1.0, 2.0, 2.0, 4.0])

    out = kernels.rolling_sum_over(x, 2, 2, inv_scale, 2.0)

    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [NAN, NAN, 3.0, 5.0, 3.5])


def test_rolling_rms_over_multiplies_by_inverse_scale() -> None:
    x = np.array([9.0, 3.0, 4.0])

    out = kernels.rolling_rms_over(x, 2, 1, np.array([1.0, 1.0, 2.0]))

    np.testing.assert_allclose(out, [NAN, math.sqrt(45.0), math.sqrt(12.5) * 2.0], rtol=1e-6)


def test_over_rolling_depth_uses_half_depth_mean_and_floor() -> None:
    num = np.array([10.0, 10.0, 10.0])
    bid = np.array([4, 0, 0], dtype=np.uint32)
    ask = np.array([8, 0, 1], dtype=np.uint32)

    out = kernels.over_rolling_depth(num, bid, ask, 2, 1.0)

    # means of (bid+ask)/2 over 2 bars: -, (6+0)/2=3, (0+0.5)/2=0.25 -> floored to 1
    np.testing.assert_allclose(out, [NAN, 10.0 / 3.0, 10.0], rtol=1e-6)


def test_demeaned_subtracts_trailing_mean() -> None:
    out = kernels.demeaned(np.array([1.0, 3.0, 8.0, 0.0]), 3)

    np.testing.assert_allclose(out, [NAN, NAN, 8.0 - 4.0, 0.0 - 11.0 / 3.0], rtol=1e-6)


def test_forward_sum_uses_next_bars_only() -> None:
    x = np.array([100.0, 1.0, 2.0, 3.0, 4.0])

    out = kernels.forward_sum(x, 2, np.ones(5), 1.0)

    np.testing.assert_allclose(out, [3.0, 5.0, 7.0, NAN, NAN])


def test_level_sum_adds_levels_onto_a_base() -> None:
    columns = tuple(np.full(2, k, dtype=np.uint32) for k in range(10))

    first3 = kernels.level_sum(columns, 0, 3, np.empty(0))
    assert first3.tolist() == [3.0, 3.0]
    assert kernels.level_sum(columns, 3, 10, first3).tolist() == [45.0, 45.0]
    assert kernels.level_sum(columns, 0, 1, np.empty(0)).tolist() == [0.0, 0.0]


def test_balance_and_difference_over_nan_on_zero_denominator() -> None:
    a = np.array([3, 0], dtype=np.uint32)
    b = np.array([1, 0], dtype=np.uint32)

    np.testing.assert_allclose(kernels.balance(a, b), [0.5, NAN])
    np.testing.assert_allclose(
        kernels.difference_over(np.array([5, 1]), np.array([1, 1]), np.array([8, 0])), [0.5, NAN]
    )


def test_scaled_difference_nan_propagates() -> None:
    out = kernels.scaled_difference(np.array([10.5, NAN]), np.array([10.0, 1.0]), 4.0)

    np.testing.assert_allclose(out, [2.0, NAN])


def test_microprice_offset_leans_to_thin_side() -> None:
    # bid 100 x 30, ask 100.25 x 10: microprice = (100*10 + 100.25*30)/40 = 100.1875
    out = kernels.microprice_offset(
        np.array([100.0]),
        np.array([100.25]),
        np.array([30], dtype=np.uint32),
        np.array([10], dtype=np.uint32),
        0.25,
    )

    np.testing.assert_allclose(out, [(100.1875 - 100.125) / 0.25])


def test_session_phase_and_cyclical() -> None:
    both = np.empty(3)
    kernels.session_phase_into(
        np.array([150, 200, 1_025], dtype=np.int64),
        np.array([1, 0, 1], dtype=np.uint8),  # bars 0-1 in day 0, bar 2 in day 1
        np.array([100, 1_000], dtype=np.int64),
        np.array([300, 1_100], dtype=np.int64),
        both,
    )
    assert both[1] == 0.5
    phase = both[[0, 2]]

    np.testing.assert_allclose(phase, [0.25, 0.25])
    np.testing.assert_allclose(kernels.cyclical(phase, False), [1.0, 1.0], atol=1e-7)
    np.testing.assert_allclose(kernels.cyclical(phase, True), [0.0, 0.0], atol=1e-7)


@pytest.mark.parametrize(
    ("values", "lo", "hi", "expected"),
    [
        ([1.0, NAN, 2.0], 0, 3, 1),
        ([1.0, NAN, 2.0], 2, 3, -1),
        ([math.inf, 1.0], 0, 2, 0),
        ([1.0, 2.0], 0, 2, -1),
    ],
)
def test_first_nonfinite_finds_first_bad_index(
    values: list[float], lo: int, hi: int, expected: int
) -> None:
    assert kernels.first_nonfinite(np.array(values, dtype=np.float32), lo, hi) == expected


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=60),
    window=st.integers(1, 12),
)
def test_rolling_kernels_equal_a_naive_window_sum(values: list[float], window: int) -> None:
    x = np.array(values)
    naive = np.array(
        [x[t - window + 1 : t + 1].sum() if t >= window - 1 else NAN for t in range(len(x))]
    )

    summed = kernels.rolling_sum_over(x, window, window - 1, np.ones(len(x)), 1.0)
    centred = kernels.demeaned(x, window)

    np.testing.assert_allclose(summed, naive.astype(np.float32), rtol=1e-5, atol=1e-2)
    np.testing.assert_allclose(
        centred, (x - naive / window).astype(np.float32), rtol=1e-5, atol=1e-2
    )


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=60),
    horizon=st.integers(1, 8),
)
def test_forward_sum_equals_a_naive_forward_window(values: list[float], horizon: int) -> None:
    x = np.array(values)
    n = len(x)
    naive = [x[t + 1 : t + horizon + 1].sum() if t + horizon < n else NAN for t in range(n)]

    got = kernels.forward_sum(x, horizon, np.ones(n), 1.0)

    np.testing.assert_allclose(got, np.array(naive, dtype=np.float32), rtol=1e-5, atol=1e-2)
