"""The agent's forecast input: the linear model's forecast per fold (or the blend of every
horizon's), cross-fitted on the training rows, never reading the test window, and a run that
trains on it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from fxstore.config import ForecastMode, ForecastModel
from fxstore.errors import InvalidInputError
from fxstore.train.env.market import Market
from fxstore.train.evaluate.forecast import (
    FORECAST_COLUMN,
    blend_forecast,
    fold_forecast,
    forecast_market,
    forecast_values,
    reward_path,
)
from fxstore.train.evaluate.references.linear import fit_linear, linear_horizons, training_moves
from fxstore.train.evaluate.references.ridge import fit_ridge_paths
from fxstore.train.loop import train
from tests.train._tiny import TINY, assert_same_run, interrupt_then_resume
from tests.train.test_linear import BARS_PER_DAY, ENV, ES, FOLD, signal_market

pytestmark = pytest.mark.quick


def _scrambled(market: Market, lo: int, hi: int) -> Market:
    """`market` with rows ``[lo, hi)``'s features and closes replaced by wild noise."""
    rng = np.random.default_rng(3)
    features = np.array(market.features)
    close = np.array(market.close)
    features[lo:hi] = rng.standard_normal(features[lo:hi].shape).astype(np.float32) * 50
    close[lo:hi] = rng.uniform(1.0, 10_000.0, hi - lo)
    return dataclasses.replace(market, features=features, close=close)


def _forecast(market: Market) -> np.ndarray:
    return fold_forecast(market, FOLD, ENV, ES, capital=100_000.0)


@pytest.mark.parametrize(
    ("model", "min_corr", "sd_range"),
    [("linear", 0.95, (0.7, 1.3)), ("blend", 0.99, (0.9, 1.1))],
)
def test_the_forecast_reads_the_signal_out_of_sample_in_standard_deviations(
    model: str, min_corr: float, sd_range: tuple[float, float]
) -> None:
    market = signal_market()

    forecast = _forecast(market) if model == "linear" else blend_forecast(market, FOLD)

    assert forecast.dtype == np.float32 and forecast.shape == (market.n_rows,)
    lo, hi = FOLD.test
    # the next move is feature 0 plus noise: the test window's forecast follows it
    assert np.corrcoef(forecast[lo:hi], market.features[lo:hi, 0])[0, 1] > min_corr
    t_lo, t_hi = FOLD.train
    assert sd_range[0] < float(np.std(forecast[t_lo:t_hi])) < sd_range[1]


def test_the_forecast_never_reads_the_test_window() -> None:
    market = signal_market()
    lo, hi = FOLD.test
    scrambled = _scrambled(market, lo, hi)
    features = scrambled.features

    before, after = _forecast(market), _forecast(scrambled)

    np.testing.assert_array_equal(before[:lo], after[:lo])
    # the test window's forecast is the same model read on that window's features
    model = fit_linear(market, FOLD, ENV, ES, capital=100_000.0)
    assert np.corrcoef(after[lo:hi], model.predict(features[lo:hi]))[0, 1] > 0.9999


def test_training_rows_get_forecasts_that_did_not_fit_their_own_moves() -> None:
    """On noise, a ridge's forecast on its own rows correlates with their moves (it fitted
    them); the cross-fitted one does not."""
    market = signal_market(7, strength=0.0, n_features=40)
    features = market.features
    model = fit_linear(market, FOLD, ENV, ES, capital=100_000.0)
    rows, moves = training_moves(market, *FOLD.train, (model.horizon_bars,))
    in_sample = model.predict(features[rows])

    cross_fitted = _forecast(market)[rows]

    fitted = np.corrcoef(in_sample, moves[:, 0])[0, 1]
    honest = np.corrcoef(cross_fitted, moves[:, 0])[0, 1]
    assert fitted > 0.1  # 40 features on ~550 rows: the fit found noise
    assert honest < fitted / 2


def test_the_blend_reads_neither_the_validation_slice_nor_the_test_window() -> None:
    """Scrambling the validation and test rows' features and closes leaves the training
    part's blend as it was, and elsewhere the blend stays the same linear map of the
    features (fitted on the training part alone)."""
    market = signal_market()
    v_lo, t_hi = FOLD.validation[0], FOLD.test[1]
    scrambled = _scrambled(market, v_lo, t_hi)
    features = scrambled.features

    before, after = blend_forecast(market, FOLD), blend_forecast(scrambled, FOLD)

    np.testing.assert_array_equal(before[:v_lo], after[:v_lo])
    lo, hi = FOLD.test

    def linear_map(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        design = np.column_stack([rows.astype(np.float64), np.ones(len(rows))])
        return np.linalg.lstsq(design, values.astype(np.float64), rcond=None)[0]

    np.testing.assert_allclose(
        linear_map(after[lo:hi], features[lo:hi]),
        linear_map(before[lo:hi], market.features[lo:hi]),
        rtol=1e-4,
        atol=1e-5,
    )


def test_the_blends_training_rows_did_not_fit_their_own_moves() -> None:
    """On noise, each horizon's ridge on its own rows correlates with their moves; the
    cross-fitted blend does not, at any horizon."""
    market = signal_market(7, strength=0.0, n_features=40)
    horizons = linear_horizons(market)
    rows, moves = training_moves(market, *FOLD.train, horizons)
    fit = fit_ridge_paths(market.features[rows], moves, (1e-4,))

    blend = blend_forecast(market, FOLD)[rows]

    for h in range(len(horizons)):
        fitted = np.corrcoef(fit.predict(market.features[rows], 0, h), moves[:, h])[0, 1]
        honest = np.corrcoef(blend, moves[:, h])[0, 1]
        assert fitted > 0.2  # 40 features on ~550 rows: each fit found noise
        assert abs(honest) < 0.1


def test_forecast_market_modes() -> None:
    market = signal_market()
    values = _forecast(market)

    only = forecast_market(market, "only", values)
    beside = forecast_market(market, "input", values)

    assert forecast_market(market, "off", None) is market
    assert only.feature_names == (FORECAST_COLUMN,) and only.features.shape == (market.n_rows, 1)
    assert beside.feature_names == (*market.feature_names, FORECAST_COLUMN)
    np.testing.assert_array_equal(beside.features[:, :-1], market.features)
    np.testing.assert_array_equal(beside.features[:, -1], only.features[:, 0])
    np.testing.assert_array_equal(only.features[:, 0], values)
    np.testing.assert_array_equal(only.close, market.close)
    with pytest.raises(InvalidInputError, match="`forecast` must be one of off, input, only"):
        forecast_market(market, "both", values)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"one value per market row \(\d+\), was None"):
        forecast_market(market, "only", None)
    with pytest.raises(InvalidInputError, match=r"one value per market row \(\d+\), was \(3,\)"):
        forecast_market(market, "input", values[:3])


def test_forecast_values_are_the_blend_when_asked() -> None:
    market = signal_market()

    blended = forecast_values(market, FOLD, ENV, ES, capital=1e5, forecast_model="blend")
    linear = forecast_values(market, FOLD, ENV, ES, capital=1e5)

    np.testing.assert_array_equal(blended, blend_forecast(market, FOLD))
    np.testing.assert_array_equal(linear, _forecast(market))
    with pytest.raises(InvalidInputError, match="`forecast_model` must be one of linear, blend"):
        forecast_values(
            market,
            FOLD,
            ENV,
            ES,
            capital=1e5,
            forecast_model="ridge",  # type: ignore[arg-type]
        )


def test_a_fold_too_short_to_fit_forecasts_zero() -> None:
    market = signal_market().rows(0, 4 * BARS_PER_DAY)
    fold = dataclasses.replace(FOLD, train=(0, 3), validation=(3, 40), test=(40, 80))

    forecast = fold_forecast(market, fold, ENV, ES, capital=1e5)

    np.testing.assert_array_equal(forecast, np.zeros(market.n_rows, np.float32))
    np.testing.assert_array_equal(blend_forecast(market, fold), np.zeros(market.n_rows, np.float32))


@pytest.mark.parametrize(("mode", "model"), [("only", "linear"), ("input", "blend")])
def test_train_on_the_forecast_records_it(store: Path, mode: str, model: str) -> None:
    config = dataclasses.replace(TINY, forecast=mode, forecast_model=model, max_folds=1)

    result = train(config, store)

    assert "agent" in result.policies and "linear" in result.policies
    saved = json.loads((result.run_dir / "config.json").read_text())
    assert saved["config"]["forecast"] == mode
    assert saved["config"]["forecast_model"] == model
    # the report says how closely the agent traded the forecast (linear's positions)
    (follow,) = [n for n in result.notes if n.startswith("correlation with linear's")]
    assert "test bars" in follow and "agent " in follow
    assert follow in json.loads((result.run_dir / "metrics.json").read_text())["notes"]


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("mode", "model"), [("only", "linear"), ("input", "linear"), ("only", "blend")]
)
def test_the_forecast_on_a_gpu_market_is_the_numpy_one(
    mode: ForecastMode, model: ForecastModel
) -> None:
    pytest.importorskip("cupy")
    from tests.train.test_env_gpu import on_cupy

    market = signal_market()

    def seen(m: Market) -> Market:
        return forecast_market(
            m, mode, forecast_values(m, FOLD, ENV, ES, capital=1e5, forecast_model=model)
        )

    host, device = seen(market), seen(on_cupy(market))

    assert device.xp is not np and device.features.flags.c_contiguous
    np.testing.assert_allclose(device.features.get(), host.features, rtol=1e-5, atol=1e-5)
    assert device.feature_names == host.feature_names


def test_the_horizon_sets_the_discount_and_n_step() -> None:
    from fxstore.config.train import MAX_HORIZON_N_STEP
    from fxstore.train.loop import _with_horizon

    model = fit_linear(signal_market(), FOLD, ENV, ES, capital=1e5)
    on = dataclasses.replace(TINY, horizon_discount=True)

    four = _with_horizon(on, dataclasses.replace(model, horizon_bars=4))
    long = _with_horizon(on, dataclasses.replace(model, horizon_bars=64))

    assert four.agent.gamma == pytest.approx(0.5**0.25) and four.agent.n_step == 4
    assert four.agent.gamma**4 == pytest.approx(0.5)  # four bars ahead counts half
    assert long.agent.n_step == MAX_HORIZON_N_STEP
    assert _with_horizon(TINY, model) is TINY
    assert _with_horizon(on, None) is on


def test_a_run_with_the_horizon_discount_resumes_to_the_same_result(store: Path) -> None:
    config = dataclasses.replace(TINY, forecast="only", horizon_discount=True)

    whole, resumed = interrupt_then_resume(config, store)

    assert_same_run(whole.run_dir, resumed.run_dir)


def test_the_linear_row_is_the_same_whether_the_agent_reads_its_forecast(store: Path) -> None:
    """The trainer hands the model it fitted for the agent to the ``linear`` reference: the
    row is the one a run without the forecast fits for itself."""
    runs = [
        train(dataclasses.replace(TINY, forecast=m, max_folds=1), store) for m in ("off", "only")
    ]

    rows = [next(r for r in run.folds if r.policy == "linear") for run in runs]

    np.testing.assert_array_equal(rows[0].pnl, rows[1].pnl)
    assert rows[0].choice == rows[1].choice
    # only an agent handed a forecast is asked how closely it traded it
    follows = [[n for n in run.notes if n.startswith("correlation with linear's")] for run in runs]
    assert [len(f) for f in follows] == [0, 1]


def test_the_reward_path_mixes_the_real_moves_with_the_forecast_s_expected_move() -> None:
    market = signal_market()
    forecast = _forecast(market)
    lo, hi = FOLD.train
    close = np.asarray(market.close)
    moves = np.diff(close)

    real, half, expected = (reward_path(market, FOLD, forecast, w) for w in (0.0, 0.5, 1.0))

    np.testing.assert_array_equal(real.close, close)
    # the slope of the next bar's move on the (cross-fitted) forecast over the training rows
    slope, _ = np.polyfit(forecast[lo : hi - 1].astype(np.float64), moves[lo : hi - 1], 1)
    assert expected.slope == pytest.approx(slope, rel=1e-9)
    assert expected.slope > 0.5  # the move is feature 0 plus noise: the forecast is worth it
    f = forecast[lo : hi - 1].astype(np.float64) - expected.centre
    assert expected.centre == pytest.approx(float(np.mean(forecast[lo : hi - 1])), abs=1e-6)
    np.testing.assert_allclose(np.diff(expected.close[lo:hi]), expected.slope * f, atol=1e-9)
    np.testing.assert_allclose(
        np.diff(half.close[lo:hi]), 0.5 * moves[lo : hi - 1] + 0.5 * expected.slope * f, atol=1e-9
    )
    # the expected moves keep the signal and drop the noise: they follow the real moves
    assert np.corrcoef(np.diff(expected.close[lo:hi]), moves[lo : hi - 1])[0, 1] > 0.7
    for path in (half, expected):  # only the training part's moves are shaped
        np.testing.assert_array_equal(path.close[: lo + 1], close[: lo + 1])
        np.testing.assert_array_equal(path.close[hi:], close[hi:])


def test_the_reward_path_does_not_reward_the_training_part_s_drift() -> None:
    """A market rising 2 points a bar on top of the signal, and a forecast carrying that
    mean move: the expected moves sum to nothing over the training rows, and still follow
    the signal."""
    market = signal_market()
    lo, hi = FOLD.train
    close = np.asarray(market.close) + 2.0 * np.arange(market.n_rows)
    drifting = dataclasses.replace(market, close=close)
    forecast = _forecast(market) + np.float32(5.0)  # an intercept: the drift in sd units

    path = reward_path(drifting, FOLD, forecast, 1.0)

    expected = np.diff(path.close[lo:hi])
    assert abs(float(expected.sum())) < 1e-6 * float(np.abs(expected).sum())
    assert path.slope > 0.5
    assert np.corrcoef(expected, np.diff(close[lo:hi]))[0, 1] > 0.7


def test_the_reward_path_reads_the_training_part_only_and_skips_rolls() -> None:
    market = signal_market()
    forecast = _forecast(market)
    lo, hi = FOLD.train
    scrambled = _scrambled(market, hi, market.n_rows)
    roll = lo + 50  # a roll's gap is no move: it does not tilt the slope
    is_roll = np.zeros(market.n_rows, dtype=bool)
    is_roll[roll] = True
    close = np.array(market.close)
    close[roll:] += 3000.0
    rolled = dataclasses.replace(market, close=close, is_roll=is_roll)
    unrolled = dataclasses.replace(rolled, is_roll=np.zeros(market.n_rows, dtype=bool))

    base = reward_path(market, FOLD, forecast, 1.0)
    same = reward_path(scrambled, FOLD, forecast, 1.0)
    with_roll = reward_path(rolled, FOLD, forecast, 1.0)
    without = reward_path(unrolled, FOLD, forecast, 1.0)

    assert same.slope == base.slope
    np.testing.assert_array_equal(same.close[:hi], base.close[:hi])
    moves = np.diff(np.asarray(market.close)[lo:hi])
    keep = np.arange(lo, hi - 1) + 1 != roll
    slope, _ = np.polyfit(forecast[lo : hi - 1][keep].astype(np.float64), moves[keep], 1)
    assert with_roll.slope == pytest.approx(slope, rel=1e-9)
    assert abs(without.slope - with_roll.slope) > 0.01  # counted, the gap would tilt it


@pytest.mark.parametrize(
    ("weight", "message"),
    [
        (-0.1, r"must be in \[0, 1\], was -0\.1\."),
        (1.5, r"must be in \[0, 1\], was 1\.5\."),
        (float("nan"), r"must be a finite number, was nan\."),
    ],
)
def test_a_reward_forecast_outside_0_to_1_is_refused(weight: float, message: str) -> None:
    market = signal_market()
    with pytest.raises(InvalidInputError, match=rf"^`reward_forecast` {message}$"):
        reward_path(market, FOLD, _forecast(market), weight)
    with pytest.raises(InvalidInputError, match=rf"^`reward_forecast` {message}$"):
        dataclasses.replace(TINY, reward_forecast=weight)


@pytest.mark.parametrize(("mode", "weight"), [("off", 1.0), ("only", 0.5)])
def test_a_run_rewarded_by_the_forecast_records_it_and_books_the_real_market(
    store: Path, mode: str, weight: float, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the training environment books the forecast's moves: the references are the same
    rows as a run without it, and the agent's test result is its positions booked on the
    real market."""
    from fxstore.train.env.data import open_cache
    from fxstore.train.env.market import contract_spec, evaluate_positions

    config = dataclasses.replace(TINY, forecast=mode, reward_forecast=weight, max_folds=1)
    plain = train(dataclasses.replace(config, reward_forecast=0.0), store)

    with caplog.at_level("INFO", logger="fxstore.train.loop"):
        result = train(config, store)

    saved = json.loads((result.run_dir / "config.json").read_text())
    assert saved["config"]["reward_forecast"] == weight
    assert f"training rewards book {weight:g} of the forecast's expected move" in caplog.text
    for policy in ("linear", "flat", "long"):
        rows = [next(r for r in run.folds if r.policy == policy) for run in (plain, result)]
        np.testing.assert_array_equal(rows[0].pnl, rows[1].pnl)
    cache = open_cache(store, config.symbol, config.featureset, "cpu")
    spec = contract_spec(config.symbol, config.env, cache.contracts)
    agent = next(r for r in result.folds if r.policy == "agent")
    book = evaluate_positions(cache.market, agent.positions, *agent.fold.test, config.env, spec)
    np.testing.assert_allclose(agent.pnl, book.pnl, rtol=0, atol=1e-9)


def test_a_run_rewarded_by_the_forecast_resumes_to_the_same_result(store: Path) -> None:
    config = dataclasses.replace(TINY, forecast="input", reward_forecast=0.75)

    whole, resumed = interrupt_then_resume(config, store)

    assert_same_run(whole.run_dir, resumed.run_dir)


def test_a_reward_path_of_a_forecast_of_other_rows_is_refused() -> None:
    market = signal_market()
    with pytest.raises(InvalidInputError, match=r"one value per market row \(\d+\), was \(5,\)"):
        reward_path(market, FOLD, _forecast(market)[:5], 1.0)
