"""The linear reference: the ridge fit, the band, point in time, and that it finds a signal."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fxstore.config import EnvConfig
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.references.linear import (
    band_positions,
    fit_linear,
    fit_ridge,
    linear_positions,
)
from fxstore.train.evaluate.results import baseline_results
from fxstore.train.evaluate.walkforward import Fold

pytestmark = pytest.mark.quick

ES = ContractSpec("ES", 50.0, 0.25)
ENV = EnvConfig(commission_per_contract=1.25)
BARS_PER_DAY = 20
N_DAYS = 60


def signal_market(seed: int = 0, *, strength: float = 1.0) -> Market:
    """60 days of 20 bars: the next move is `strength` x feature 0 plus noise (points)."""
    rng = np.random.default_rng(seed)
    n = BARS_PER_DAY * N_DAYS
    features = rng.standard_normal((n, 3)).astype(np.float32)
    move = strength * features[:, 0].astype(np.float64) + 0.5 * rng.standard_normal(n)
    close = 5000.0 + np.concatenate(([0.0], np.cumsum(move[:-1])))
    return Market(
        features=features,
        close=close,
        half_spread=np.full(n, 0.125),
        is_roll=np.zeros(n, dtype=bool),
        trading_day=(19_800 + np.arange(n) // BARS_PER_DAY).astype(np.int32),
        feature_names=("f_a", "f_b", "f_c"),
        bars_per_day=float(BARS_PER_DAY),
    )


def day_rows(lo: int, hi: int) -> tuple[int, int]:
    return lo * BARS_PER_DAY, hi * BARS_PER_DAY


#: Train days 0-29, purge 30, validation 31-39, embargo 40, test 41-59.
FOLD = Fold(
    index=0,
    train=day_rows(0, 30),
    validation=day_rows(31, 40),
    test=day_rows(41, 60),
    train_span=(19_800, 19_829),
    validation_span=(19_831, 19_839),
    test_span=(19_841, 19_859),
)


def test_fit_ridge_without_penalty_recovers_an_exact_line() -> None:
    x = np.arange(10, dtype=np.float64).reshape(-1, 1)
    y = 2.0 * x[:, 0] + 1.0

    mean, scale, beta, intercept = fit_ridge(x, y, 0.0)

    # standardised: z = (x - 4.5) / std(x), y = 10 + 2 std(x) z
    assert mean[0] == 4.5 and scale[0] == pytest.approx(np.std(x))
    assert intercept == pytest.approx(10.0)
    assert beta[0] == pytest.approx(2.0 * np.std(x))


def test_fit_ridge_penalty_shrinks_towards_zero() -> None:
    x = np.arange(10, dtype=np.float64).reshape(-1, 1)
    y = 2.0 * x[:, 0]

    _, _, loose, _ = fit_ridge(x, y, 0.0)
    _, _, tight, _ = fit_ridge(x, y, 1.0)

    # (z'z + n) beta = z'y with z'z = n: beta halves at lambda 1
    assert tight[0] == pytest.approx(loose[0] / 2.0)


def test_band_positions_holds_inside_the_band() -> None:
    prediction = np.array([0.1, 0.6, 0.2, -0.1, -0.7, 0.3, 0.9])

    positions = band_positions(prediction, 0.5)

    np.testing.assert_array_equal(positions, [0.0, 1.0, 1.0, 1.0, -1.0, -1.0, 1.0])


def test_fit_linear_never_reads_test_rows() -> None:
    market = signal_market()
    rng = np.random.default_rng(1)
    features = np.array(market.features)
    close = np.array(market.close)
    lo, hi = FOLD.test
    features[lo:] = rng.standard_normal(features[lo:].shape) * 100
    close[lo:] = rng.uniform(1.0, 10_000.0, hi - lo)
    scrambled = Market(
        features=features,
        close=close,
        half_spread=market.half_spread,
        is_roll=market.is_roll,
        trading_day=market.trading_day,
        feature_names=market.feature_names,
        bars_per_day=market.bars_per_day,
    )

    a = fit_linear(market, FOLD, ENV, ES, capital=100_000.0)
    b = fit_linear(scrambled, FOLD, ENV, ES, capital=100_000.0)

    np.testing.assert_array_equal(a.beta, b.beta)
    assert (a.ridge_lambda, a.band, a.validation_sharpe) == (
        b.ridge_lambda,
        b.band,
        b.validation_sharpe,
    )


def test_linear_positions_at_a_row_use_no_later_features() -> None:
    market = signal_market()
    model = fit_linear(market, FOLD, ENV, ES, capital=100_000.0)
    lo, hi = FOLD.test
    cut = lo + 100
    later = np.array(market.features)
    later[cut:] = -later[cut:]
    flipped = Market(
        later,
        market.close,
        market.half_spread,
        market.is_roll,
        market.trading_day,
        market.feature_names,
        market.bars_per_day,
    )

    a = linear_positions(model, market, lo, hi)
    b = linear_positions(model, flipped, lo, hi)

    np.testing.assert_array_equal(a[: cut - lo], b[: cut - lo])
    assert (a[cut - lo :] != b[cut - lo :]).any()


def test_linear_finds_a_planted_linear_signal_out_of_sample() -> None:
    market = signal_market()

    (result,) = baseline_results(market, FOLD, ["linear"], ENV, ES, capital=100_000.0, seed=0)

    assert result.metrics.total_pnl > 0
    assert result.metrics.sharpe_daily > 3.0
    assert math.isfinite(result.in_sample_sharpe) and result.in_sample_sharpe > 3.0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_linear_without_signal_is_not_significant_out_of_sample(seed: int) -> None:
    market = signal_market(seed, strength=0.0)

    (result,) = baseline_results(market, FOLD, ["linear"], ENV, ES, capital=100_000.0, seed=0)

    # a leak of test rows into the fit would make this near-certain (PSR -> 1)
    assert not result.metrics.psr_daily > 0.95


def test_training_rows_are_moves_over_the_horizon_within_one_contract() -> None:
    from fxstore.train.evaluate.references.linear import _training_rows

    market = signal_market()
    is_roll = np.zeros(market.n_rows, dtype=bool)
    is_roll[10] = True  # row 10 opens a new contract
    market = Market(
        features=market.features,
        close=market.close,
        half_spread=market.half_spread,
        is_roll=is_roll,
        trading_day=market.trading_day,
        feature_names=market.feature_names,
        bars_per_day=market.bars_per_day,
    )

    rows, target = _training_rows(market, 0, 20, 4)

    # rows 6..9 would reach across the roll at 10; 16..19 past the window's end
    assert rows.tolist() == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15]
    np.testing.assert_array_equal(target, market.close[rows + 4] - market.close[rows])
