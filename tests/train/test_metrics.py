"""fxstore.train.evaluate.metrics: every metric on a hand-computed case, edge cases, properties."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fxstore.errors import InvalidInputError
from fxstore.train.evaluate.metrics import (
    BacktestMetrics,
    bootstrap_sharpe_ci,
    compute_metrics,
    daily_pnl,
    max_drawdown,
    sharpe_per_bar,
    trade_pnls,
)
from fxstore.train.gpu.xp import array_module

pytestmark = pytest.mark.quick

# The hand case: 2 days of 2 bars, capital 1000, bars_per_day 2.
PNL = np.array([10.0, -15.0, 30.0, -5.0])
POSITIONS = np.array([1, 0, -2, -2])
DAYS = np.array([0, 0, 1, 1], dtype=np.int32)


def hand_metrics() -> BacktestMetrics:
    return compute_metrics(PNL, POSITIONS, DAYS, bars_per_day=2, capital=1000.0)


def test_compute_metrics_hand_case_pnl_and_returns() -> None:
    m = hand_metrics()

    # total 10 - 15 + 30 - 5 = 20; 2 days -> 10/day; 20/1000 = 0.02; 0.02 / 2 days * 252
    assert (m.n_bars, m.n_days) == (4, 2)
    assert m.total_pnl == 20.0
    assert m.pnl_per_day == 10.0
    assert m.return_on_capital == pytest.approx(0.02)
    assert m.annual_return == pytest.approx(2.52)


def test_compute_metrics_hand_case_per_bar_ratios() -> None:
    m = hand_metrics()

    # r = [.01, -.015, .03, -.005]: mean .02 / 4 = .005; deviations .005 -.02 .025 -.01,
    # squares 25 + 400 + 625 + 100 = 1150 (e-6) -> sample variance 1150e-6 / 3.
    # downside: min(r, 0)^2 = 225e-6 + 25e-6 = 250e-6 over 4 bars -> 62.5e-6.
    annualise = math.sqrt(252 * 2)
    assert m.sharpe_bar == pytest.approx(0.005 / math.sqrt(1150e-6 / 3) * annualise)
    assert m.sortino_bar == pytest.approx(0.005 / math.sqrt(62.5e-6) * annualise)


def test_compute_metrics_hand_case_daily_ratios() -> None:
    m = hand_metrics()

    # daily PnL [-5, 25] -> r = [-.005, .025]: mean .01; deviations -.015, .015 -> sample
    # variance 450e-6 / 1; downside .005^2 / 2 = 12.5e-6.
    assert m.sharpe_daily == pytest.approx(0.01 / math.sqrt(450e-6) * math.sqrt(252))
    assert m.sortino_daily == pytest.approx(0.01 / math.sqrt(12.5e-6) * math.sqrt(252))


def test_compute_metrics_hand_case_drawdown_and_calmar() -> None:
    m = hand_metrics()

    # equity 1010, 995, 1025, 1020; peak 1010, 1010, 1025, 1025; drawdown 0, -15, 0, -5
    assert m.max_drawdown == -15.0
    assert m.max_drawdown_fraction == pytest.approx(-15 / 1010)
    assert m.calmar == pytest.approx(2.52 / (15 / 1010))


def test_compute_metrics_hand_case_trades_turnover_exposure() -> None:
    m = hand_metrics()

    # trade 1: long on bar 0, closed on flat bar 1 -> 10 - 15 = -5;
    # trade 2: short 2 on bars 2-3, open at the end -> 30 - 5 = 25.
    # win rate 1/2; profit factor 25 / 5; average (−5 + 25) / 2 = 10; 2 trades / 2 days.
    # contracts traded |1| + |−1| + |−2| + 0 = 4 over 2 days; 3 of 4 bars hold a position.
    assert m.n_trades == 2
    assert m.win_rate == 0.5
    assert m.profit_factor == 5.0
    assert m.avg_trade_pnl == 10.0
    assert m.trades_per_day == 1.0
    assert m.turnover == 2.0
    assert m.exposure == 0.75


def test_trade_pnls_sign_flip_starts_new_trade() -> None:
    # long on bar 0, flip to short on bar 1 (bar 1 goes to the new trade), flat on bar 3
    # (closes it, books 4), bar 4 flat and owned by none: [1, 2 + 3 + 4]
    trades = trade_pnls(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([1, -1, -1, 0, 0]))

    assert trades.tolist() == [1.0, 9.0]


def test_trade_pnls_scaling_in_same_sign_is_one_trade() -> None:
    trades = trade_pnls(np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0]))

    assert trades.tolist() == [6.0]


def test_daily_pnl_hand_case_sums_each_day() -> None:
    days = daily_pnl(np.array([1.0, 2.0, 4.0, 8.0, 16.0]), np.array([5, 5, 6, 9, 9], np.int32))

    assert days.tolist() == [3.0, 4.0, 24.0]


def test_max_drawdown_loss_on_first_bar_counts_from_capital() -> None:
    # equity 90, 95: peak stays 100 (capital) -> -10 dollars, -10 / 100
    assert max_drawdown(np.array([-10.0, 5.0]), 100.0) == (-10.0, -0.1)


def test_compute_metrics_all_flat_has_no_trades_and_nan_ratios() -> None:
    n = 6
    m = compute_metrics(
        np.zeros(n),
        np.zeros(n),
        np.repeat(np.arange(3, dtype=np.int32), 2),
        bars_per_day=2,
        capital=1e5,
    )

    assert (m.total_pnl, m.n_trades, m.turnover, m.exposure) == (0.0, 0, 0.0, 0.0)
    assert (m.max_drawdown, m.max_drawdown_fraction) == (0.0, 0.0)
    for ratio in (m.sharpe_bar, m.sortino_bar, m.sharpe_daily, m.calmar, m.win_rate):
        assert math.isnan(ratio)
    assert all(math.isnan(v) for v in m.sharpe_daily_ci)


def test_compute_metrics_constant_positive_pnl_sharpe_is_nan() -> None:
    # zero variance: the Sharpe is undefined (NaN), not 0 and not inf, despite rounding
    m = compute_metrics(
        np.full(5, 0.1), np.ones(5), np.arange(5, dtype=np.int32), bars_per_day=1, capital=1.0
    )

    assert math.isnan(m.sharpe_bar) and math.isnan(m.sharpe_daily)
    assert math.isnan(m.sortino_bar)  # no losing bar


def test_compute_metrics_one_day_daily_ratios_nan_bar_ratios_defined() -> None:
    m = compute_metrics(
        np.array([1.0, -2.0, 4.0]),
        np.array([1, 1, 1]),
        np.zeros(3, np.int32),
        bars_per_day=3,
        capital=100.0,
    )

    assert m.n_days == 1
    assert math.isnan(m.sharpe_daily) and math.isfinite(m.sharpe_bar)
    # one trade open to the end: 1 - 2 + 4 = 3, all won, no loss -> profit factor NaN
    assert (m.n_trades, m.win_rate, m.avg_trade_pnl) == (1, 1.0, 3.0)
    assert math.isnan(m.profit_factor)


def test_backtest_metrics_to_json_turns_nan_into_none() -> None:
    data = hand_metrics().to_json()

    assert data["total_pnl"] == 20.0
    assert data["sortino_daily"] is not None
    flat = compute_metrics(
        np.zeros(2), np.zeros(2), np.zeros(2, np.int32), bars_per_day=2, capital=1.0
    ).to_json()
    assert flat["sharpe_bar"] is None
    assert flat["sharpe_daily_ci"] == [None, None]


def test_bootstrap_sharpe_ci_same_seed_same_interval_around_estimate() -> None:
    rng = np.random.default_rng(1)
    daily = rng.normal(0.1, 1.0, 250)
    sharpe = daily.mean() / daily.std(ddof=1) * math.sqrt(252)

    lo, hi = bootstrap_sharpe_ci(daily, n_resamples=500, seed=3)

    assert (lo, hi) == bootstrap_sharpe_ci(daily, n_resamples=500, seed=3)
    assert lo < sharpe < hi
    assert bootstrap_sharpe_ci(daily, n_resamples=500, seed=4) != (lo, hi)


@pytest.mark.parametrize(
    "kwargs",
    [{"mean_block_days": 0.5}, {"level": 1.0}, {"n_resamples": 0}],
)
def test_bootstrap_sharpe_ci_bad_parameter_raises(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidInputError, match="need mean_block_days >= 1"):
        bootstrap_sharpe_ci(np.ones(5), **kwargs)  # type: ignore[arg-type]


def test_array_module_numpy_input_gives_numpy() -> None:
    assert array_module(np.zeros(2)) is np


@pytest.mark.parametrize(
    ("pnl", "positions", "days", "kwargs", "match"),
    [
        (np.zeros(0), np.zeros(0), np.zeros(0, np.int32), {}, "non-empty 1-D"),
        (np.zeros(2), np.zeros(3), np.zeros(2, np.int32), {}, "`positions` must have the shape"),
        (np.array([1.0, np.nan]), np.zeros(2), np.zeros(2, np.int32), {}, "NaN or inf"),
        (np.zeros(2), np.zeros(2), np.array([1, 0], np.int32), {}, "non-decreasing"),
        (
            np.zeros(2),
            np.zeros(2),
            np.zeros(2, np.int32),
            {"capital": 0.0},
            "`capital` must be > 0",
        ),
        (
            np.zeros(2),
            np.zeros(2),
            np.zeros(2, np.int32),
            {"bars_per_day": 0.0},
            "`bars_per_day` must be > 0, was 0.0; pass the fxcache manifest's bars_per_day",
        ),
    ],
)
def test_compute_metrics_bad_input_raises(
    pnl: npt.NDArray[np.float64],
    positions: npt.NDArray[np.float64],
    days: npt.NDArray[np.int32],
    kwargs: dict[str, float],
    match: str,
) -> None:
    args = {"bars_per_day": 2.0, "capital": 1.0} | kwargs
    with pytest.raises(InvalidInputError, match=match):
        compute_metrics(
            pnl, positions, days, bars_per_day=args["bars_per_day"], capital=args["capital"]
        )


@st.composite
def backtests(
    draw: st.DrawFn,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    n = draw(st.integers(1, 120))
    pnl = draw(st.lists(st.floats(-1e4, 1e4), min_size=n, max_size=n))
    positions = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
    steps = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    days = 19_000 + np.cumsum(steps).astype(np.int32)
    return np.array(pnl), np.array(positions, dtype=np.int64), days


@settings(max_examples=100, deadline=None)
@given(case=backtests())
def test_compute_metrics_any_backtest_consistent_totals_and_nonpositive_drawdown(
    case: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int32]],
) -> None:
    pnl, positions, days = case
    scale = 1.0 + np.abs(pnl).sum()

    m = compute_metrics(pnl, positions, days, bars_per_day=7.5, capital=1e5, n_resamples=50)

    per_day = daily_pnl(pnl, days)
    assert len(per_day) == m.n_days == len(np.unique(days))
    assert per_day.sum() == pytest.approx(pnl.sum(), abs=1e-9 * scale)
    assert m.pnl_per_day * m.n_days == pytest.approx(m.total_pnl, abs=1e-9 * scale)
    assert m.max_drawdown <= 0.0 and m.max_drawdown_fraction <= 0.0
    # every PnL bar is in at most one trade; bars never in a trade are flat and not closing
    side = np.sign(positions)
    unowned = (side == 0) & (np.concatenate(([0], side[:-1])) == 0)
    trades = trade_pnls(pnl, positions)
    assert trades.sum() + pnl[unowned].sum() == pytest.approx(pnl.sum(), abs=1e-9 * scale)
    assert 0.0 <= m.exposure <= 1.0
    lo, hi = m.sharpe_daily_ci
    assert math.isnan(lo) or lo <= hi


def test_sharpe_per_bar_equals_compute_metrics_sharpe_bar() -> None:
    days = np.array([1, 1, 2, 2], dtype=np.int32)
    metrics = compute_metrics(PNL, POSITIONS, days, bars_per_day=2.0, capital=1000.0)

    assert sharpe_per_bar(PNL, bars_per_day=2.0, capital=1000.0) == metrics.sharpe_bar


def test_sharpe_per_bar_flat_book_is_nan() -> None:
    assert np.isnan(sharpe_per_bar(np.zeros(5), bars_per_day=2.0, capital=1000.0))
