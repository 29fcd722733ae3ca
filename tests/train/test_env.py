"""The trading environment: hand-computed books, VecEnv == evaluate_positions, no look-ahead."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.config import EnvConfig
from fxstore.errors import FxStoreError, InvalidInputError, SchemaError
from fxstore.train.env.loader import open_fxcache
from fxstore.train.env.market import (
    ContractSpec,
    Market,
    _costs,
    _rolling_sigma,
    contract_spec,
    evaluate_positions,
    market_from_view,
    policy_positions,
)
from fxstore.train.env.vecenv import VecEnv
from tests.train._fxcache import SYMBOL, write_fxcache

pytestmark = pytest.mark.quick

ES = ContractSpec("ES", 50.0, 0.25)
#: 1 contract traded costs 0.125 * 50 + 1 * 0.25 * 50 + 1.25 = 6.25 + 12.5 + 1.25 = $20.
COST = 20.0
CONFIG = EnvConfig(commission_per_contract=1.25, slippage_ticks=1.0, reward="dollars")


def make_market(
    close: Sequence[float],
    *,
    half_spread: float | Sequence[float] = 0.125,
    rolls: Sequence[int] = (),
    features: npt.NDArray[np.float32] | None = None,
    day_bars: int = 2,
) -> Market:
    """A hand-made market: `rolls` are the rows opening a new contract."""
    n = len(close)
    is_roll = np.zeros(n, dtype=bool)
    is_roll[list(rolls)] = True
    if features is None:
        features = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    return Market(
        features=features,
        close=np.asarray(close, dtype=np.float64),
        half_spread=np.broadcast_to(np.asarray(half_spread, dtype=np.float64), (n,)).copy(),
        is_roll=is_roll,
        trading_day=(19_700 + np.arange(n) // day_bars).astype(np.int32),
        feature_names=tuple(f"f_{i}" for i in range(features.shape[1])),
        bars_per_day=float(day_bars),
    )


def random_market(n: int, seed: int, n_features: int = 3, rolls: Sequence[int] = ()) -> Market:
    """A random walk on the 0.25 grid with a big gap at every roll."""
    rng = np.random.default_rng(seed)
    close = 4000.0 + 0.25 * np.cumsum(rng.integers(-4, 5, n))
    for row in rolls:
        close[row:] += 50.0  # the next contract trades higher: a jump nobody may earn
    features = rng.standard_normal((n, n_features)).astype(np.float32)
    spread = 0.125 * rng.integers(1, 4, n)
    return make_market(close, half_spread=spread, rolls=rolls, features=features, day_bars=10)


def replace_rows(market: Market, **columns: np.ndarray) -> Market:
    """`market` with some columns replaced."""
    fields = {
        name: getattr(market, name)
        for name in (
            "features",
            "close",
            "half_spread",
            "is_roll",
            "trading_day",
            "feature_names",
            "bars_per_day",
        )
    }
    return Market(**(fields | columns))


# --- contract specs -------------------------------------------------------------------------


def test_contract_spec_es_symbol_gives_50_dollars_and_quarter_tick() -> None:
    spec = contract_spec("ES.FUT")

    assert (spec.root, spec.multiplier, spec.tick_size, spec.tick_value) == ("ES", 50.0, 0.25, 12.5)


def test_contract_spec_config_overrides_known_root() -> None:
    spec = contract_spec("ES.FUT", EnvConfig(multiplier=5.0))

    assert (spec.multiplier, spec.tick_size) == (5.0, 0.25)


def test_contract_spec_unknown_root_with_config_values_uses_them() -> None:
    spec = contract_spec("XX.FUT", EnvConfig(multiplier=10.0, tick_size=0.5))

    assert spec == ContractSpec("XX", 10.0, 0.5, "option")


def test_contract_spec_unknown_root_raises_one_line_error() -> None:
    with pytest.raises(InvalidInputError) as info:
        contract_spec("XX.FUT")

    message = str(info.value)
    assert message.startswith(
        "no contract spec for 'XX.FUT' (root 'XX'; known: 6B, 6E, 6J, CL, EMD, ES"
    )
    assert message.endswith("pass --multiplier and --tick-size.")
    assert "\n" not in message


# --- evaluate_positions: hand-computed books --------------------------------------------------


@pytest.mark.parametrize(
    ("commission", "half_spread", "slippage_ticks", "cost"),
    [
        (1.25, 0.0, 0.0, 1.25),
        (0.0, 0.125, 0.0, 6.25),
        (0.0, 0.0, 2.0, 25.0),
        (1.25, 0.125, 1.0, 20.0),
    ],
)
def test_evaluate_positions_round_trip_on_flat_market_pays_cost_twice(
    commission: float, half_spread: float, slippage_ticks: float, cost: float
) -> None:
    market = make_market([100.0, 100.0, 100.0, 100.0], half_spread=half_spread)
    config = EnvConfig(commission_per_contract=commission, slippage_ticks=slippage_ticks)

    book = evaluate_positions(market, np.array([2.0, 0.0, 0.0, 0.0]), 0, 4, config, ES)

    np.testing.assert_allclose(book.pnl, [-2 * cost, -2 * cost, 0.0, 0.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(book.costs, [2 * cost, 2 * cost, 0.0, 0.0], rtol=0, atol=1e-12)


def test_evaluate_positions_held_long_earns_moves_times_multiplier() -> None:
    market = make_market([100.0, 101.0, 103.0, 102.0])

    book = evaluate_positions(market, np.ones(4), 0, 4, CONFIG, ES)

    # +1 pt - entry, +2 pts, -1 pt, then the close-out at the window's last row
    np.testing.assert_allclose(book.pnl, [50.0 - COST, 100.0, -50.0, -COST], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(book.positions, [1.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(book.trading_day, market.trading_day)


def test_evaluate_positions_flip_pays_both_legs() -> None:
    market = make_market([100.0, 101.0, 99.0, 99.0])

    book = evaluate_positions(market, np.array([1.0, -1.0, -1.0, 0.0]), 0, 4, CONFIG, ES)

    # long +1 pt; flip to short (2 contracts traded) and gain 2 pts; hold; close out
    np.testing.assert_allclose(
        book.pnl, [50.0 - COST, 100.0 - 2 * COST, 0.0, -COST], rtol=0, atol=1e-12
    )


def test_evaluate_positions_sub_window_closes_out_at_last_row_cost() -> None:
    market = make_market([100.0, 101.0, 102.0, 110.0, 120.0], half_spread=[0.125] * 2 + [0.25] * 3)

    book = evaluate_positions(market, np.array([1.0, 1.0, 1.0]), 1, 4, CONFIG, ES)

    # row 3 closes at its own cost (0.25 * 50 + 12.5 + 1.25 = 26.25); row 4's move is not earned
    np.testing.assert_allclose(book.pnl, [50.0 - COST, 400.0, -26.25], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(book.positions, [1.0, 1.0, 0.0])


def test_evaluate_positions_roll_mode_closes_and_reopens_across_roll() -> None:
    # row 2 opens the new contract, 100 points higher
    market = make_market(
        [100.0, 101.0, 201.0, 202.0, 204.0], half_spread=[0.125] * 2 + [0.25] * 3, rolls=(2,)
    )
    config = EnvConfig(commission_per_contract=1.25, slippage_ticks=1.0, roll="roll")
    new_cost = 0.25 * 50 + 12.5 + 1.25

    book = evaluate_positions(market, np.ones(5), 0, 5, config, ES)

    # row 1: no move across the roll; close at row 1's cost, reopen at row 2's
    expected = [50.0 - COST, -COST - new_cost, 50.0, 100.0, -new_cost]
    np.testing.assert_allclose(book.pnl, expected, rtol=0, atol=1e-12)


#: ESH4 at $50 a point, ESM4 (a spec changed mid-series) at $5 and a tick of 0.5.
CHANGED = ContractSpec(
    "ES", 5.0, 0.5, "bars", ("ESH4", "ESM4"), (("ESH4", 50.0, 0.25), ("ESM4", 5.0, 0.5))
)


def test_evaluate_positions_books_each_contract_at_its_own_facts_across_the_roll() -> None:
    market = dataclasses.replace(
        make_market([100.0, 101.0, 201.0, 202.0, 204.0], rolls=(2,)),
        contract_runs=((0, "ESH4"), (2, "ESM4")),
    )
    config = EnvConfig(commission_per_contract=1.25, slippage_ticks=1.0, roll="roll")
    new_cost = 0.125 * 5 + 1.0 * 0.5 * 5 + 1.25  # half spread, slippage, commission at ESM4's

    book = evaluate_positions(market, np.ones(5), 0, 5, config, CHANGED)

    # ESH4: +1 pt at $50 less its $20; closed at ESH4's cost, reopened at ESM4's; then $5 a pt
    expected = [50.0 - COST, -COST - new_cost, 5.0, 10.0, -new_cost]
    np.testing.assert_allclose(book.pnl, expected, rtol=0, atol=1e-12)
    assert CHANGED.varies
    assert CHANGED.to_json()["by_contract"] == {
        "ESH4": {"multiplier": 50.0, "tick_size": 0.25},
        "ESM4": {"multiplier": 5.0, "tick_size": 0.5},
    }
    assert (CHANGED.to_json()["multiplier"], CHANGED.to_json()["tick_size"]) == (None, None)


@pytest.mark.parametrize("reward", ["ticks", "vol"])
def test_costs_reward_unit_is_each_rows_own_contracts(reward: str) -> None:
    market = dataclasses.replace(
        make_market([100.0, 101.0, 201.0, 202.0, 204.0], rolls=(2,)),
        contract_runs=((0, "ESH4"), (2, "ESM4")),
    )
    config = EnvConfig(reward=reward, vol_window=3)  # type: ignore[arg-type]

    unit = _costs(market, config, CHANGED).unit

    if reward == "ticks":
        np.testing.assert_array_equal(unit, [12.5, 12.5, 2.5, 2.5, 2.5])
    else:
        sigma = _rolling_sigma(market.close, market.is_roll, 3, np)
        mult = np.array([50.0, 50.0, 5.0, 5.0, 5.0])
        want = np.maximum(sigma * market.close * mult, [12.5, 12.5, 2.5, 2.5, 2.5])
        np.testing.assert_array_equal(unit, want)


def test_contracts_that_agree_book_the_same_bits_as_one_spec() -> None:
    market = dataclasses.replace(
        random_market(120, seed=8, rolls=(40, 77)),
        contract_runs=((0, "ESH4"), (40, "ESM4"), (77, "ESU4")),
    )
    spec = ContractSpec(
        "ES", 50.0, 0.25, "bars", ("ESH4", "ESM4", "ESU4"),
        tuple((raw, 50.0, 0.25) for raw in ("ESH4", "ESM4", "ESU4")),
    )  # fmt: skip
    positions = np.random.default_rng(2).integers(-2, 3, 120).astype(np.float64)

    got = evaluate_positions(market, positions, 0, 120, CONFIG, spec)
    want = evaluate_positions(market, positions, 0, 120, CONFIG, ES)

    assert not spec.varies
    np.testing.assert_array_equal(got.pnl, want.pnl)
    np.testing.assert_array_equal(got.costs, want.costs)


@pytest.mark.parametrize("roll", ["roll", "close"])
def test_vecenv_books_each_contract_at_its_own_facts_like_evaluate_positions(roll: str) -> None:
    market = dataclasses.replace(
        random_market(120, seed=8, rolls=(40, 77)),
        contract_runs=((0, "ESH4"), (40, "ESM4"), (77, "ESH4")),
    )
    config = EnvConfig(roll=roll, slippage_ticks=0.5, reward="dollars")  # type: ignore[arg-type]
    env = VecEnv(market, config, CHANGED, n_envs=6, window=(10, 110), episode_bars=15, seed=3)
    rng = np.random.default_rng(9)

    episodes, _ = run_episodes(env, lambda obs: rng.integers(0, 5, 6), 100)

    assert len(episodes) >= 30
    for start, positions, pnl_sum in episodes:
        book = evaluate_positions(market, np.array(positions), start, start + 15, config, CHANGED)
        assert pnl_sum == pytest.approx(float(book.pnl.sum()), abs=1e-9)


def test_contracts_that_disagree_on_a_market_without_its_rows_contracts_raise_one_line() -> None:
    market = make_market([100.0, 101.0, 201.0, 202.0], rolls=(2,))

    with pytest.raises(InvalidInputError) as info:
        evaluate_positions(market, np.ones(4), 0, 4, CONFIG, CHANGED)

    assert one_line(info) == (
        "the contracts of the bars have different multipliers or tick sizes (ESH4 50 x 0.25, "
        "ESM4 5 x 0.5), but the fxcache does not record which rows are whose; re-run "
        "`fxstore precompute --force` (or pass --multiplier and --tick-size to book every "
        "contract at one value)."
    )


def test_market_contract_runs_not_from_row_0_raise_schema_error() -> None:
    with pytest.raises(SchemaError, match="must start at row 0"):
        dataclasses.replace(make_market([1.0, 2.0, 3.0]), contract_runs=((1, "ESH4"),))


def test_evaluate_positions_close_mode_starts_new_contract_flat() -> None:
    market = make_market(
        [100.0, 101.0, 201.0, 202.0, 204.0], half_spread=[0.125] * 2 + [0.25] * 3, rolls=(2,)
    )
    config = EnvConfig(commission_per_contract=1.25, slippage_ticks=1.0, roll="close")
    new_cost = 0.25 * 50 + 12.5 + 1.25

    book = evaluate_positions(market, np.ones(5), 0, 5, config, ES)

    # row 1 closes at its cost; row 2 starts flat, so holding 1 again is a new entry
    expected = [50.0 - COST, -COST, 50.0 - new_cost, 100.0, -new_cost]
    np.testing.assert_allclose(book.pnl, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("roll", ["roll", "close"])
def test_evaluate_positions_window_ending_on_roll_closes_once_at_old_contract(roll: str) -> None:
    market = make_market([100.0, 101.0, 201.0], half_spread=[0.125, 0.125, 0.25], rolls=(2,))
    config = EnvConfig(commission_per_contract=1.25, slippage_ticks=1.0, roll=roll)  # type: ignore[arg-type]

    book = evaluate_positions(market, np.ones(3), 0, 3, config, ES)

    # not reopened at row 2 just to be closed out there: one exit, at row 1's cost
    np.testing.assert_allclose(book.pnl, [50.0 - COST, -COST, 0.0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("roll", ["roll", "close"])
def test_vecenv_episode_ending_on_roll_books_like_evaluate_positions(roll: str) -> None:
    market = make_market([100.0, 101.0, 201.0, 202.0], half_spread=0.25, rolls=(2,))
    config = EnvConfig(roll=roll, reward="dollars")  # type: ignore[arg-type]
    env = VecEnv(market, config, ES, n_envs=1, window=(0, 3), episode_bars=3)
    env.reset()

    pnl = [float(env.step(np.array([4])).pnl[0]) for _ in range(2)]

    book = evaluate_positions(market, np.array([2.0, 2.0, 0.0]), 0, 3, config, ES)
    assert sum(pnl) == pytest.approx(float(book.pnl.sum()), abs=1e-9)
    assert sum(pnl) == pytest.approx(2 * 50.0 - 4 * (0.25 * 50 + 1.25), abs=1e-9)


@pytest.mark.parametrize("roll", ["roll", "close"])
def test_evaluate_positions_roll_jump_size_never_changes_pnl(roll: str) -> None:
    market = random_market(60, seed=1, rolls=(20, 41))
    shifted = market.close.copy()
    shifted[20:] += 1_000.0
    shifted[41:] -= 3_000.0
    jumped = replace_rows(market, close=shifted)
    positions = np.random.default_rng(2).integers(-2, 3, 60).astype(np.float64)
    config = EnvConfig(roll=roll)  # type: ignore[arg-type]

    a = evaluate_positions(market, positions, 0, 60, config, ES)
    b = evaluate_positions(jumped, positions, 0, 60, config, ES)

    np.testing.assert_allclose(a.pnl, b.pnl, rtol=0, atol=1e-9)


def test_evaluate_positions_costs_are_included_in_pnl() -> None:
    market = random_market(40, seed=3, rolls=(15,))
    positions = np.random.default_rng(4).integers(-2, 3, 40).astype(np.float64)
    free = EnvConfig(commission_per_contract=0.0, slippage_ticks=0.0)
    zero_spread = replace_rows(market, half_spread=np.zeros(40))

    book = evaluate_positions(market, positions, 0, 40, CONFIG, ES)
    gross = evaluate_positions(zero_spread, positions, 0, 40, free, ES)

    assert (book.costs >= 0).all()
    np.testing.assert_allclose(book.pnl + book.costs, gross.pnl, rtol=0, atol=1e-9)


# --- rewards --------------------------------------------------------------------------------


def step_once(market: Market, config: EnvConfig, action: int) -> tuple[float, float]:
    """(reward, pnl) of one env's first step from row 0 of a 2-row window."""
    env = VecEnv(market, config, ES, n_envs=1, window=(0, 2), episode_bars=2)
    env.reset()
    step = env.step(np.array([action]))
    return float(step.reward[0]), float(step.pnl[0])


@pytest.mark.parametrize(("reward", "unit"), [("dollars", 1.0), ("ticks", 12.5)])
def test_vecenv_reward_fixed_unit_is_pnl_over_unit(reward: str, unit: float) -> None:
    market = make_market([100.0, 102.0, 103.0])
    config = EnvConfig(commission_per_contract=1.25, slippage_ticks=1.0, reward=reward)  # type: ignore[arg-type]

    got_reward, pnl = step_once(market, config, action=3)  # +1 contract

    assert pnl == pytest.approx(100.0 - 2 * COST)  # entry and close-out
    assert got_reward == pytest.approx(pnl / unit, rel=1e-6)


def test_costs_vol_unit_is_rolling_rms_of_log_returns_times_dollar_price() -> None:
    close = [100.0, 101.0, 100.0, 102.0]
    market = make_market(close)
    r = np.diff(np.log(close))
    sigma = [0.0, abs(r[0]), math.sqrt((r[0] ** 2 + r[1] ** 2) / 2), math.sqrt(np.mean(r[1:] ** 2))]

    unit = _costs(market, EnvConfig(reward="vol", vol_window=2), ES).unit

    expected = np.maximum(np.array(sigma) * np.array(close) * 50.0, 12.5)
    np.testing.assert_allclose(unit, expected, rtol=1e-12)
    assert unit[0] == 12.5  # no return yet: floored at one tick


def test_costs_vol_unit_ignores_roll_gap() -> None:
    calm = make_market([100.0, 100.25, 100.0, 100.25])
    rolled = make_market([100.0, 100.25, 200.0, 200.25], rolls=(2,))
    config = EnvConfig(reward="vol", vol_window=3)

    a, b = (_costs(m, config, ES).unit for m in (calm, rolled))

    assert b[2] < a[2] * 2.01  # the 100-point gap is no return


def test_costs_vol_unit_is_causal_future_closes_do_not_change_it() -> None:
    market = random_market(300, seed=5, rolls=(120,))
    future = market.close.copy()
    future[150:] = np.random.default_rng(6).permutation(future[150:]) * 1.5
    config = EnvConfig(reward="vol", vol_window=50)

    a = _costs(market, config, ES).unit
    b = _costs(replace_rows(market, close=future), config, ES).unit

    np.testing.assert_array_equal(a[:150], b[:150])
    assert not np.array_equal(a[150:], b[150:])


def test_vecenv_vol_reward_is_pnl_over_vol_unit_at_the_row() -> None:
    market = random_market(50, seed=7)
    config = EnvConfig(reward="vol", vol_window=10)
    unit = _costs(market, config, ES).unit
    env = VecEnv(market, config, ES, n_envs=16, window=(0, 50), episode_bars=12, seed=1)
    env.reset()

    rows = env.rows.copy()
    step = env.step(np.full(16, 4))

    np.testing.assert_allclose(step.reward, step.pnl / unit[rows], rtol=1e-6)


# --- VecEnv == evaluate_positions ------------------------------------------------------------


def run_episodes(
    env: VecEnv, policy: Callable[[np.ndarray], np.ndarray], n_steps: int
) -> tuple[list[tuple[int, list[float], float]], list[tuple[int, int]]]:
    """Step `env`; return finished episodes (start, positions, summed pnl) and (row, action)s."""
    values = np.asarray(env.config.positions, dtype=np.float64)
    obs = env.reset()
    starts = env.rows.copy()
    positions: list[list[float]] = [[] for _ in range(env.n_envs)]
    pnl_sums = np.zeros(env.n_envs)
    episodes, taken = [], []
    for _ in range(n_steps):
        action = policy(obs)
        rows = env.rows.copy()
        taken.extend(zip(rows.tolist(), action.tolist(), strict=True))
        step = env.step(action)
        pnl_sums += step.pnl
        for i in range(env.n_envs):
            positions[i].append(float(values[action[i]]))
            if step.done[i]:
                episodes.append((int(starts[i]), positions[i] + [0.0], float(pnl_sums[i])))
                positions[i], pnl_sums[i], starts[i] = [], 0.0, env.rows[i]
        obs = step.obs
    return episodes, taken


@pytest.mark.parametrize("roll", ["roll", "close"])
def test_vecenv_random_actions_book_same_episode_pnl_as_evaluate_positions(roll: str) -> None:
    market = random_market(120, seed=8, rolls=(40, 77))
    config = EnvConfig(roll=roll, slippage_ticks=0.5, reward="dollars")  # type: ignore[arg-type]
    env = VecEnv(market, config, ES, n_envs=6, window=(10, 110), episode_bars=15, seed=3)
    rng = np.random.default_rng(9)

    episodes, _ = run_episodes(env, lambda obs: rng.integers(0, 5, 6), 100)

    assert len(episodes) >= 30
    for start, positions, pnl_sum in episodes:
        book = evaluate_positions(market, np.array(positions), start, start + 15, config, ES)
        assert pnl_sum == pytest.approx(float(book.pnl.sum()), abs=1e-9)


def test_vecenv_episodes_never_cross_window_edges() -> None:
    market = random_market(60, seed=10)
    env = VecEnv(market, CONFIG, ES, n_envs=64, window=(20, 35), episode_bars=5, seed=2)
    rng = np.random.default_rng(0)

    episodes, taken = run_episodes(env, lambda obs: rng.integers(0, 5, 64), 40)

    rows = np.array([row for row, _ in taken])
    assert rows.min() == 20 and rows.max() == 35 - 2  # the last row is the close-out, no action
    assert all(start >= 20 and start + 5 <= 35 for start, _, _ in episodes)
    assert all(len(positions) == 5 for _, positions, _ in episodes)
    assert {start for start, _, _ in episodes} == set(range(20, 31))


def test_vecenv_observation_is_features_then_held_over_max_position() -> None:
    market = random_market(30, seed=11, n_features=3)
    env = VecEnv(market, CONFIG, ES, n_envs=4, window=(0, 30), episode_bars=10, seed=4)

    first = env.reset()
    step = env.step(np.array([0, 1, 3, 4]))  # -2, -1, +1, +2 contracts

    assert first.dtype == np.float32 and first.shape == (4, 4) == (env.n_envs, env.n_obs)
    np.testing.assert_array_equal(first[:, :3], market.features[env.rows - 1])
    np.testing.assert_array_equal(first[:, 3], 0.0)
    np.testing.assert_array_equal(step.obs[:, :3], market.features[env.rows])
    np.testing.assert_array_equal(step.obs[:, 3], [-1.0, -0.5, 0.5, 1.0])


@pytest.mark.parametrize("roll", ["roll", "close"])
def test_policy_positions_table_agrees_with_stepping(roll: str) -> None:
    market = random_market(40, seed=12, rolls=(9, 25))
    config = EnvConfig(roll=roll)  # type: ignore[arg-type]
    table = np.random.default_rng(13).integers(0, 5, (30, 5))
    env = VecEnv(market, config, ES, n_envs=1, window=(5, 35), episode_bars=30)
    index = {p: i for i, p in enumerate(config.positions)}

    def policy(obs: np.ndarray) -> np.ndarray:
        held = round(float(obs[0, -1]) * config.max_position)
        return np.array([table[int(env.rows[0]) - 5, index[held]]])

    episodes, _ = run_episodes(env, policy, 29)
    positions = policy_positions(table, market, 5, 35, config)

    assert len(episodes) == 1
    np.testing.assert_array_equal(positions[:-1], episodes[0][1][:-1])


def test_vecenv_state_dict_resume_continues_exactly() -> None:
    market = random_market(80, seed=18, rolls=(33,))
    rng = np.random.default_rng(19)
    actions = rng.integers(0, 5, (60, 8))

    def make() -> VecEnv:
        return VecEnv(market, CONFIG, ES, n_envs=8, window=(0, 80), episode_bars=9, seed=6)

    whole = make()
    whole.reset()
    steps = [whole.step(a) for a in actions]
    first = make()
    first.reset()
    for a in actions[:25]:
        first.step(a)
    resumed = make()
    resumed.load_state_dict(first.state_dict())
    rest = [resumed.step(a) for a in actions[25:]]

    for a, b in zip(steps[25:], rest, strict=True):
        np.testing.assert_array_equal(a.obs, b.obs)
        np.testing.assert_array_equal(a.pnl, b.pnl)
        np.testing.assert_array_equal(a.done, b.done)


def test_vecenv_load_state_dict_other_n_envs_raises_one_line() -> None:
    env = VecEnv(make_market([1.0, 2.0, 3.0]), CONFIG, ES, n_envs=2, window=(0, 3), episode_bars=3)
    other = VecEnv(
        make_market([1.0, 2.0, 3.0]), CONFIG, ES, n_envs=3, window=(0, 3), episode_bars=3
    )

    with pytest.raises(InvalidInputError, match=r"state `t` must have shape \(2,\)") as info:
        env.load_state_dict(other.state_dict())

    assert one_line(info)


# --- no look-ahead ----------------------------------------------------------------------------


def obs_policy(obs: np.ndarray) -> np.ndarray:
    """A deterministic policy of the observation alone (features and held position)."""
    score = obs[:, :-1].sum(axis=1) - 0.7 * obs[:, -1]
    return np.digitize(score, [-1.5, -0.5, 0.5, 1.5]).astype(np.int64)


def shuffle_after(market: Market, row: int, seed: int) -> Market:
    """Every row after `row` shuffled (features, closes, spreads, roll flags)."""
    order = np.arange(market.n_rows)
    order[row + 1 :] = np.random.default_rng(seed).permutation(order[row + 1 :])
    return replace_rows(
        market,
        features=market.features[order],
        close=market.close[order],
        half_spread=market.half_spread[order],
        is_roll=market.is_roll[order],
    )


@pytest.mark.parametrize("cut", [50, 130])
def test_vecenv_actions_up_to_t_unchanged_when_rows_after_t_are_shuffled(cut: int) -> None:
    market = random_market(200, seed=14, rolls=(60, 140))
    config = EnvConfig(reward="vol", vol_window=20)

    def actions(m: Market) -> list[tuple[int, int]]:
        env = VecEnv(m, config, ES, n_envs=8, window=(0, 200), episode_bars=25, seed=5)
        return run_episodes(env, obs_policy, 150)[1]

    a, b = actions(market), actions(shuffle_after(market, cut, seed=15))

    assert [x for x in a if x[0] <= cut] == [x for x in b if x[0] <= cut]
    assert a != b  # the shuffle did change later actions


def test_evaluation_positions_and_pnl_up_to_t_unchanged_when_rows_after_t_are_shuffled() -> None:
    market = random_market(100, seed=16, rolls=(30,))
    config = EnvConfig(reward="dollars")
    cut = 60

    def book(m: Market) -> tuple[np.ndarray, np.ndarray]:
        held = np.asarray(config.positions, dtype=np.float32) / config.max_position
        obs = np.concatenate(
            [
                np.repeat(m.features[:, None, :], 5, axis=1),
                np.broadcast_to(held, (100, 5))[..., None],
            ],
            axis=2,
        )
        table = obs_policy(obs.reshape(500, -1)).reshape(100, 5)
        positions = policy_positions(table, m, 0, 100, config)
        return positions, evaluate_positions(m, positions, 0, 100, config, ES).pnl

    (pos_a, pnl_a), (pos_b, pnl_b) = book(market), book(shuffle_after(market, cut, seed=17))

    np.testing.assert_array_equal(pos_a[: cut + 1], pos_b[: cut + 1])
    np.testing.assert_array_equal(pnl_a[:cut], pnl_b[:cut])  # row t's pnl needs close t+1


# --- market_from_view ---------------------------------------------------------------------------


def test_market_from_view_cpu_holds_cache_columns(tmp_path: Path) -> None:
    cache = write_fxcache(tmp_path, months=((2024, 1), (2024, 2)), rows_per_shard=50)
    with open_fxcache(tmp_path, SYMBOL, device="cpu") as view:
        market = market_from_view(view)
        close = np.concatenate(view.columns["mkt_close"])

    assert market.n_rows == 100 and market.xp is np
    assert market.feature_names == tuple(cache.features)
    np.testing.assert_array_equal(market.close, close)
    assert market.close.dtype == np.float64 and market.is_roll.dtype == np.bool_
    assert market.bars_per_day == cache.manifest["bars_per_day"]
    np.testing.assert_array_equal(market.feature("00"), market.features[:, 0])


def test_market_feature_unknown_name_raises_listing_features() -> None:
    market = make_market([1.0, 2.0])

    with pytest.raises(InvalidInputError, match=r"no feature 'f_ofi_all'; it has f_0, f_1\.$"):
        market.feature("ofi_all")


# --- bad inputs ---------------------------------------------------------------------------------


def one_line(error: pytest.ExceptionInfo[FxStoreError]) -> str:
    message = str(error.value)
    assert "\n" not in message and message.endswith(".")
    return message


@pytest.mark.parametrize(
    ("lo", "hi", "positions"),
    [(0, 5, 5), (-1, 3, 4), (2, 3, 1), (0, 4, 3), (0, 4, 5)],
)
def test_evaluate_positions_bad_window_or_shape_raises_one_line(
    lo: int, hi: int, positions: int
) -> None:
    market = make_market([1.0, 2.0, 3.0, 4.0])

    with pytest.raises(InvalidInputError) as info:
        evaluate_positions(market, np.zeros(positions), lo, hi, CONFIG, ES)

    assert one_line(info)


def test_evaluate_positions_nan_position_raises_one_line() -> None:
    market = make_market([1.0, 2.0, 3.0])

    with pytest.raises(InvalidInputError, match="NaN or inf") as info:
        evaluate_positions(market, np.array([1.0, np.nan, 0.0]), 0, 3, CONFIG, ES)

    assert one_line(info)


@pytest.mark.parametrize(
    ("table", "match"),
    [
        (np.zeros((3, 4), dtype=np.int64), r"must be \(3, 5\)"),
        (np.full((3, 5), 5), r"must be in 0\.\.4"),
        (np.full((3, 5), -1), r"must be in 0\.\.4"),
    ],
)
def test_policy_positions_bad_table_raises_one_line(table: np.ndarray, match: str) -> None:
    market = make_market([1.0, 2.0, 3.0])

    with pytest.raises(InvalidInputError, match=match) as info:
        policy_positions(table, market, 0, 3, CONFIG)

    assert one_line(info)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_envs": 0}, "`n_envs` must be >= 1, was 0"),
        ({"episode_bars": 1}, r"`episode_bars` must be in 2\.\.4"),
        ({"episode_bars": 5}, r"`episode_bars` must be in 2\.\.4"),
        ({"window": (2, 7)}, r"window \[2, 7\) must hold"),
    ],
)
def test_vecenv_bad_arguments_raise_one_line(kwargs: dict[str, object], match: str) -> None:
    market = make_market([1.0, 2.0, 3.0, 4.0, 5.0])
    args: dict[str, object] = {"n_envs": 2, "window": (1, 5), "episode_bars": 3} | kwargs

    with pytest.raises(InvalidInputError, match=match) as info:
        VecEnv(market, CONFIG, ES, **args)  # type: ignore[arg-type]

    assert one_line(info)


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (np.array([0, 5]), r"`action` must be in 0\.\.4, was 0\.\.5"),
        (np.array([-1, 0]), r"`action` must be in 0\.\.4"),
        (np.array([0, 1, 2]), r"shape \(2,\)"),
        (np.array([0.0, 1.0]), "must be an int array"),
    ],
)
def test_vecenv_step_bad_action_raises_one_line(action: np.ndarray, match: str) -> None:
    env = VecEnv(make_market([1.0, 2.0, 3.0]), CONFIG, ES, n_envs=2, window=(0, 3), episode_bars=3)
    env.reset()

    with pytest.raises(InvalidInputError, match=match) as info:
        env.step(action)

    assert one_line(info)


def test_vecenv_step_before_reset_raises_one_line() -> None:
    env = VecEnv(make_market([1.0, 2.0, 3.0]), CONFIG, ES, n_envs=2, window=(0, 3), episode_bars=3)

    with pytest.raises(InvalidInputError, match=r"call reset\(\) first") as info:
        env.step(np.array([0, 0]))

    assert one_line(info)


def test_market_mismatched_column_raises_schema_error() -> None:
    market = make_market([1.0, 2.0, 3.0])

    with pytest.raises(SchemaError, match=r"`close` must have shape \(3,\), was \(2,\)") as info:
        replace_rows(market, close=np.array([1.0, 2.0]))

    assert one_line(info)


@pytest.mark.parametrize("horizons", [(4, 2), (0, 4), (2, 2), (1.5,)])
def test_market_bad_target_horizons_raise_one_line(horizons: tuple[int, ...]) -> None:
    market = make_market([1.0, 2.0, 3.0])

    with pytest.raises(InvalidInputError, match="`target_horizons` must be increasing") as info:
        replace_rows(market, target_horizons=horizons)  # type: ignore[arg-type]

    assert one_line(info)


def test_market_single_row_raises_one_line() -> None:
    with pytest.raises(InvalidInputError, match="at least 2 rows") as info:
        make_market([1.0])

    assert one_line(info)


@pytest.mark.parametrize("episode_bars", [2, 3, 9])
def test_vecenv_episode_ended_is_done_for_every_env_and_survives_a_resume(
    episode_bars: int,
) -> None:
    market = random_market(80, seed=18, rolls=(33,))
    actions = np.random.default_rng(3).integers(0, 5, (40, 8))

    def make() -> VecEnv:
        return VecEnv(market, CONFIG, ES, n_envs=8, window=(0, 80), episode_bars=episode_bars)

    env = make()
    env.reset()
    for i, a in enumerate(actions):
        done = env.step(a).done
        assert done.all() == env.episode_ended and done.any() == env.episode_ended
        if i == 16:
            resumed = make()
            resumed.load_state_dict(env.state_dict())
            env = resumed
    assert env.episode_ended == bool(done.all())


@pytest.mark.parametrize("window", [(0, 120), (10, 60), (40, 77), (41, 90), (77, 120), (90, 92)])
def test_rows_of_a_market_book_each_contract_as_the_whole_market_does(
    window: tuple[int, int],
) -> None:
    market = dataclasses.replace(
        random_market(120, seed=9, rolls=(40, 77)),
        contract_runs=((0, "ESH4"), (40, "ESM4"), (77, "ESU4")),
    )
    spec = ContractSpec(
        "ES", 50.0, 0.25, "bars", ("ESH4", "ESM4", "ESU4"),
        (("ESH4", 50.0, 0.25), ("ESM4", 5.0, 0.25), ("ESU4", 20.0, 0.5)),
    )  # fmt: skip
    lo, hi = window
    positions = np.random.default_rng(3).integers(-2, 3, hi - lo).astype(np.float64)

    part = market.rows(lo, hi)
    got = evaluate_positions(part, positions, 0, hi - lo, CONFIG, spec)
    want = evaluate_positions(market, positions, lo, hi, CONFIG, spec)

    assert part.contract_runs[0][0] == 0 and part.n_rows == hi - lo
    np.testing.assert_array_equal(got.pnl, want.pnl)


@pytest.mark.parametrize("reward", ["dollars", "vol"])
def test_vecenv_with_a_reward_close_books_its_moves_at_the_real_costs_and_units(
    reward: str,
) -> None:
    """A shaped training reward: the steps book the given closes' moves, while the costs,
    the reward units (the real market's volatility) and the episodes are the market's."""
    market = random_market(120, seed=8, rolls=(40, 77))
    config = EnvConfig(slippage_ticks=0.5, reward=reward, vol_window=7)  # type: ignore[arg-type]
    drift = 0.5  # every bar of the reward's path moves half a point more
    shaped = np.asarray(market.close) + drift * np.arange(120)
    envs = [
        VecEnv(market, config, ES, n_envs=6, window=(10, 110), episode_bars=15, seed=3, **kw)
        for kw in ({}, {"reward_close": shaped})
    ]
    unit = _costs(market, config, ES).unit
    values = np.asarray(config.positions, dtype=np.float64)
    rng = np.random.default_rng(9)
    np.testing.assert_array_equal(envs[0].reset(), envs[1].reset())
    booked = 0.0
    for _ in range(100):
        action = rng.integers(0, 5, 6)
        rows = envs[0].rows.copy()
        real, moved = (env.step(action) for env in envs)
        extra = np.where(market.is_roll[rows + 1], 0.0, values[action] * drift * ES.multiplier)
        np.testing.assert_allclose(moved.pnl - real.pnl, extra, rtol=0, atol=1e-9)
        np.testing.assert_allclose(
            moved.reward - real.reward, extra / unit[rows], rtol=1e-5, atol=1e-5
        )
        np.testing.assert_array_equal(moved.obs, real.obs)
        np.testing.assert_array_equal(moved.done, real.done)
        booked += float(np.abs(extra).sum())
    assert booked > 0.0  # positions were held over the path's extra moves


def test_vecenv_refuses_a_reward_close_of_the_wrong_length() -> None:
    market = random_market(30, seed=1)

    with pytest.raises(InvalidInputError, match=r"`reward_close` must have one close per .*30"):
        VecEnv(
            market,
            CONFIG,
            ES,
            n_envs=2,
            window=(0, 30),
            episode_bars=5,
            reward_close=np.zeros(29),
        )
