"""The linear reference: the ridge fit, the band, point in time, and that it finds a signal."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fxstore.config import EnvConfig
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.references.linear import (
    BAND_MULTIPLES,
    band_positions,
    choose_band,
    fit_linear,
    linear_horizons,
    linear_positions,
    training_moves,
)
from fxstore.train.evaluate.references.ridge import RIDGE_LAMBDAS, fit_ridge, fit_ridge_paths
from fxstore.train.evaluate.results import (
    FoldResult,
    baseline_results,
    choice_notes,
    follow_notes,
)
from fxstore.train.evaluate.walkforward import Fold

pytestmark = pytest.mark.quick

ES = ContractSpec("ES", 50.0, 0.25)
ENV = EnvConfig(commission_per_contract=1.25)
BARS_PER_DAY = 20
N_DAYS = 60


def signal_market(seed: int = 0, *, strength: float = 1.0, n_features: int = 3) -> Market:
    """60 days of 20 bars: the next move is `strength` x feature 0 plus noise (points)."""
    rng = np.random.default_rng(seed)
    n = BARS_PER_DAY * N_DAYS
    features = rng.standard_normal((n, n_features)).astype(np.float32)
    move = strength * features[:, 0].astype(np.float64) + 0.5 * rng.standard_normal(n)
    close = 5000.0 + np.concatenate(([0.0], np.cumsum(move[:-1])))
    return Market(
        features=features,
        close=close,
        half_spread=np.full(n, 0.125),
        is_roll=np.zeros(n, dtype=bool),
        trading_day=(19_800 + np.arange(n) // BARS_PER_DAY).astype(np.int32),
        feature_names=tuple(f"f_{k}" for k in range(n_features)),
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
    assert a.choice == b.choice and a.band == b.band


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


LONG_BARS_PER_DAY = 100
#: Train days 0-29, purge 30, validation 31-39, embargo 40, test 41-59 of 100-bar days.
LONG_FOLD = Fold(
    index=0,
    train=(0, 30 * LONG_BARS_PER_DAY),
    validation=(31 * LONG_BARS_PER_DAY, 40 * LONG_BARS_PER_DAY),
    test=(41 * LONG_BARS_PER_DAY, 60 * LONG_BARS_PER_DAY),
    train_span=(19_800, 19_829),
    validation_span=(19_831, 19_839),
    test_span=(19_841, 19_859),
)


def scheduled_drift_market(seed: int = 0) -> Market:
    """60 days of 100 bars in 80-bar episodes: for 16 bars a feature announces a direction,
    then the price drifts that way for 64 bars (0.02 points a bar); a second feature moves
    the next bar a lot (0.1 points per standard deviation) and is gone after; a third is
    noise.

    The one-bar move is mostly the fast feature, which the spread makes a loser to trade;
    the announcement pays only over the tens of bars after it: the best horizon is long.
    """
    rng = np.random.default_rng(seed)
    n = LONG_BARS_PER_DAY * 60
    t = np.arange(n)
    direction = rng.choice([-1.0, 1.0], n // 80 + 1)[t // 80]
    announce = np.where(t % 80 < 16, direction, 0.0)
    fast = rng.standard_normal(n)
    move = 0.1 * fast + np.where(t % 80 >= 16, 0.02 * direction, 0.0)
    move += 0.05 * rng.standard_normal(n)
    close = 5000.0 + np.concatenate(([0.0], np.cumsum(move[:-1])))
    features = np.stack([fast, announce, rng.standard_normal(n)], axis=1).astype(np.float32)
    return Market(
        features=features,
        close=close,
        half_spread=np.full(n, 0.25),
        is_roll=np.zeros(n, dtype=bool),
        trading_day=(19_800 + t // LONG_BARS_PER_DAY).astype(np.int32),
        feature_names=("f_fast", "f_announce", "f_noise"),
        bars_per_day=float(LONG_BARS_PER_DAY),
        target_horizons=(1, 2, 4, 8, 16, 32, 64),
    )


def test_fit_ridge_paths_equals_one_fit_per_target_and_penalty() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((200, 4)) * [1.0, 2.0, 0.5, 3.0] + 1.0
    y = np.stack([x @ rng.standard_normal(4) + rng.standard_normal(200) for _ in range(3)], 1)
    lambdas = (0.0, 0.01, 1.0)

    paths = fit_ridge_paths(x, y, lambdas)

    for k, lam in enumerate(lambdas):
        for j in range(3):
            mean, scale, beta, intercept = fit_ridge(x, y[:, j], lam)
            np.testing.assert_allclose(paths.betas[k, :, j], beta, rtol=1e-10, atol=1e-12)
            assert paths.intercepts[j] == pytest.approx(intercept)
            np.testing.assert_array_equal(paths.mean, mean)
            np.testing.assert_array_equal(paths.scale, scale)
            z = (x - mean) / scale
            assert np.sqrt(beta @ paths.covariance @ beta) == pytest.approx(np.std(z @ beta))


def test_training_moves_share_the_longest_horizons_rows() -> None:
    market = signal_market()

    rows, moves = training_moves(market, 0, 100, (1, 4, 16))

    assert rows.tolist() == list(range(84))
    for j, h in enumerate((1, 4, 16)):
        np.testing.assert_array_equal(moves[:, j], market.close[rows + h] - market.close[rows])


def test_linear_horizons_are_the_markets_targets_else_the_default_sets() -> None:
    market = signal_market()

    assert linear_horizons(market) == (1, 2, 4, 8, 16)
    assert linear_horizons(dataclasses.replace(market, target_horizons=(3, 64))) == (3, 64)


def test_fit_linear_chooses_the_best_validation_sharpe_over_horizons_penalties_and_bands() -> None:
    market = dataclasses.replace(signal_market(2, strength=0.3), target_horizons=(1, 4, 16))
    rows, moves = training_moves(market, *FOLD.train, (1, 4, 16))
    lo, hi = FOLD.validation
    best = (0.0, 0, math.nan, math.inf)  # (Sharpe, horizon, lambda, band): flat scores 0
    for j, horizon in enumerate((1, 4, 16)):
        for lam in RIDGE_LAMBDAS:  # one obvious fit per (horizon, lambda)
            mean, scale, beta, intercept = fit_ridge(market.features[rows], moves[:, j], lam)
            spread = float(np.std(intercept + ((market.features[rows] - mean) / scale) @ beta))
            prediction = intercept + ((market.features[lo:hi] - mean) / scale) @ beta
            band, score = choose_band(
                market, prediction, spread, FOLD.validation, ENV, ES, capital=100_000.0
            )
            if score > best[0]:
                best = (score, horizon, lam, band / spread)

    model = fit_linear(market, FOLD, ENV, ES, capital=100_000.0)

    assert best[0] > 0
    assert model.validation_sharpe == pytest.approx(best[0])
    assert (model.horizon_bars, model.ridge_lambda) == best[1:3]
    assert model.band_multiple == pytest.approx(best[3])
    assert model.band_multiple in BAND_MULTIPLES


def test_fit_linear_choice_ignores_poisoned_test_targets() -> None:
    market = scheduled_drift_market()
    close = np.array(market.close)
    lo, hi = LONG_FOLD.test
    close[lo:] = close[lo:][::-1] + np.random.default_rng(5).normal(0.0, 50.0, hi - lo)
    poisoned = dataclasses.replace(market, close=close)

    a = fit_linear(market, LONG_FOLD, ENV, ES, capital=100_000.0)
    b = fit_linear(poisoned, LONG_FOLD, ENV, ES, capital=100_000.0)

    assert a.choice == b.choice
    np.testing.assert_array_equal(a.beta, b.beta)


def test_fit_linear_choice_follows_the_validation_slice() -> None:
    market = scheduled_drift_market()
    close = np.array(market.close)
    lo, hi = LONG_FOLD.validation
    close[lo:hi] = close[lo] - (close[lo:hi] - close[lo])  # validation moves reversed
    reversed_validation = dataclasses.replace(market, close=close)

    a = fit_linear(market, LONG_FOLD, ENV, ES, capital=100_000.0)
    b = fit_linear(reversed_validation, LONG_FOLD, ENV, ES, capital=100_000.0)

    assert a.choice != b.choice


def test_linear_chooses_a_long_horizon_where_the_signal_pays_over_tens_of_bars() -> None:
    market = scheduled_drift_market()

    model = fit_linear(market, LONG_FOLD, ENV, ES, capital=100_000.0)
    (result,) = baseline_results(market, LONG_FOLD, ["linear"], ENV, ES, capital=100_000.0, seed=0)

    assert model.horizon_bars >= 16
    assert model.validation_sharpe > 0
    assert result.choice == model.choice
    assert result.metrics.total_pnl > 0


def test_linear_without_a_validation_slice_fits_the_horizon_nearest_four_bars() -> None:
    market = dataclasses.replace(signal_market(), target_horizons=(1, 6, 16))
    fold = Fold(0, day_rows(0, 30), day_rows(30, 30), day_rows(31, 60), (0, 0), None, (0, 0))

    model = fit_linear(market, fold, ENV, ES, capital=100_000.0)

    assert (model.horizon_bars, model.ridge_lambda, model.band) == (6, RIDGE_LAMBDAS[0], 0.0)


def test_choice_notes_list_each_folds_choice() -> None:
    market = signal_market()
    (result,) = baseline_results(market, FOLD, ["linear"], ENV, ES, capital=100_000.0, seed=0)
    flat = dataclasses.replace(
        result,
        fold=dataclasses.replace(FOLD, index=1),
        choice={"horizon_bars": 4.0, "ridge_lambda": 10.0, "band_sd": math.inf},
    )

    (line,) = choice_notes([result, flat])

    assert result.choice is not None
    horizon, lam, band = (result.choice[k] for k in ("horizon_bars", "ridge_lambda", "band_sd"))
    assert line == (
        f"linear's choice on validation, by fold: 1: {horizon:.0f} bars, λ {lam:g}, "
        f"band {band:g} sd; 2: flat (nothing beat standing aside)"
    )


def test_follow_notes_correlate_each_agent_with_linear_over_every_fold() -> None:
    market = signal_market()
    (linear,) = baseline_results(market, FOLD, ["linear"], ENV, ES, capital=100_000.0, seed=0)
    second = dataclasses.replace(
        linear, fold=dataclasses.replace(FOLD, index=1), positions=-linear.positions
    )
    rng = np.random.default_rng(3)

    def agent(name: str, held: np.ndarray, fold: Fold = FOLD) -> FoldResult:
        return dataclasses.replace(linear, policy=name, fold=fold, positions=held, choice=None)

    noise = rng.choice([-1.0, 0.0, 1.0], size=(2, linear.positions.size))
    results = [
        linear,
        second,
        agent("agent", linear.positions),  # follows linear on both folds
        agent("agent", -linear.positions, second.fold),
        agent("agent-s1", noise[0]),
        agent("agent-s1", noise[1], second.fold),
        agent("ensemble", np.zeros(linear.positions.size)),
        agent("ensemble", np.zeros(linear.positions.size), second.fold),
    ]

    (line,) = follow_notes(results, ("agent", "agent-s1", "agent-s2", "ensemble"))

    both = np.concatenate([linear.positions, second.positions])
    rows = f"{both.size:,}"
    s1 = np.corrcoef(noise.ravel(), both)[0, 1]
    assert abs(s1) < 0.2
    assert line == (
        f"correlation with linear's positions over {rows} test bars (near 0: the agent does "
        f"not trade its forecast): agent 1.00, agent-s1 {s1:.2f}, "
        "ensemble n/a (never changed position)"
    )
    assert follow_notes(results[2:], ("agent",)) == ()  # no linear, nothing to compare
    still = [dataclasses.replace(r, positions=np.zeros(r.positions.size)) for r in results[:2]]
    assert follow_notes([*still, *results[2:]], ("agent",)) == (
        "correlation with linear's positions: n/a (linear never changed position)",
    )


def test_linear_books_each_contract_at_its_own_facts_on_validation_and_test() -> None:
    """A market whose contracts have other multipliers: the validation slice chosen on is
    a market of its own rows, its contract runs starting at its first row."""
    rolls = day_rows(20, 35)[0], day_rows(50, 60)[0]
    is_roll = np.zeros(BARS_PER_DAY * N_DAYS, dtype=bool)
    is_roll[list(rolls)] = True
    market = dataclasses.replace(
        signal_market(),
        is_roll=is_roll,
        contract_runs=((0, "ESH4"), (rolls[0], "ESM4"), (rolls[1], "ESU4")),
    )
    spec = ContractSpec(
        "ES", 50.0, 0.25, "bars", ("ESH4", "ESM4", "ESU4"),
        (("ESH4", 50.0, 0.25), ("ESM4", 5.0, 0.25), ("ESU4", 50.0, 0.25)),
    )  # fmt: skip

    (result,) = baseline_results(market, FOLD, ["linear"], ENV, spec, capital=100_000.0, seed=0)

    assert result.metrics.total_pnl > 0


def test_linear_default_horizons_are_the_default_feature_sets_targets() -> None:
    from fxstore.features.definitions import DEFAULT_TARGET_HORIZONS
    from fxstore.train.evaluate.references.linear import DEFAULT_HORIZONS_BARS

    assert DEFAULT_HORIZONS_BARS == DEFAULT_TARGET_HORIZONS
