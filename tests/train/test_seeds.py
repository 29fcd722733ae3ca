"""Several seeds per fold: names, mean ± std over seeds, and a two-seed run."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from fxstore.errors import InvalidInputError
from fxstore.train.env.data import open_cache
from fxstore.train.env.market import contract_spec
from fxstore.train.evaluate.metrics import BacktestMetrics, compute_metrics
from fxstore.train.evaluate.results import BacktestResult, evaluate_fold
from fxstore.train.evaluate.seeds import agent_policies, seed_notes, summarize_seeds
from fxstore.train.evaluate.walkforward import make_folds
from fxstore.train.loop import KeptValues, _ensemble, train
from tests.train.test_loop import TINY

pytestmark = pytest.mark.quick


def _totals(pnl: float, sharpe: float) -> BacktestMetrics:
    base = compute_metrics(
        np.array([1.0, -1.0]), np.ones(2), np.array([0, 1], np.int32), bars_per_day=1, capital=1.0
    )
    return dataclasses.replace(base, total_pnl=pnl, sharpe_daily=sharpe)


def test_agent_policies_names_the_extra_seeds() -> None:
    assert agent_policies(1) == ("agent",)
    assert agent_policies(3) == ("agent", "agent-s1", "agent-s2")


def test_summarize_seeds_hand_case() -> None:
    totals = {
        "agent": _totals(100.0, 1.0),
        "agent-s1": _totals(200.0, 2.0),
        "agent-s2": _totals(600.0, 3.0),
        "oracle": _totals(1000.0, 9.0),
    }

    summary = summarize_seeds(totals, agent_policies(3))

    # PnL 100, 200, 600: mean 300, deviations -200 -100 300 -> var (4 + 1 + 9) e4 / 2 = 7e4
    assert summary.n_seeds == 3
    assert summary.pnl == pytest.approx((300.0, math.sqrt(7e4)))
    assert summary.sharpe_daily == pytest.approx((2.0, 1.0))
    assert summary.share_of_oracle == pytest.approx((0.3, math.sqrt(7e4) / 1000.0))


def test_summarize_seeds_without_an_oracle_has_no_share() -> None:
    totals = {"agent": _totals(100.0, 1.0), "agent-s1": _totals(300.0, 2.0)}

    summary = summarize_seeds(totals, agent_policies(2))

    assert summary.pnl == pytest.approx((200.0, math.sqrt(2e4)))
    assert all(math.isnan(v) for v in summary.share_of_oracle)
    assert "share of the oracle n/a" in summary.format_line()


def test_seed_notes_one_seed_has_no_line() -> None:
    assert seed_notes({"agent": _totals(1.0, 1.0)}, agent_policies(1)) == ()


def test_train_two_seeds_trains_two_agents_per_fold(store: Path) -> None:
    config = dataclasses.replace(TINY, seeds=2, max_folds=1)

    result = train(config, store)

    assert result.policies[:2] == ("agent", "agent-s1")
    first, second = (next(r for r in result.folds if r.policy == p) for p in ("agent", "agent-s1"))
    assert first.fold.index == second.fold.index == 0
    assert (result.run_dir / "fold00" / "evals-seed1.json").is_file()
    assert not list((result.run_dir / "fold00").glob("checkpoint*.npz"))
    # the first seed is the one-seed run's agent
    one = train(dataclasses.replace(TINY, max_folds=1), store)
    np.testing.assert_array_equal(first.pnl, next(r for r in one.folds if r.policy == "agent").pnl)
    lines = result.format_table().splitlines()
    assert any(line.startswith("agent over 2 seeds (mean ± std): PnL $ ") for line in lines)
    (sig,) = result.significance
    assert sig.n_trials == 4 * 2  # 3 evaluations + flat, x 2 seeds


def test_train_ensemble_trades_the_seeds_average_beside_them(store: Path) -> None:
    config = dataclasses.replace(TINY, seeds=2, max_folds=1, no_trade_bands=(0.0, 0.5))

    plain = train(config, store)
    result = train(dataclasses.replace(config, ensemble=True), store)

    assert result.policies[:3] == ("agent", "agent-s1", "ensemble")
    for policy in ("agent", "agent-s1"):  # the seeds trade as without the ensemble
        np.testing.assert_array_equal(_pnl(result, policy), _pnl(plain, policy))
    assert _pnl(result, "ensemble").shape == _pnl(result, "agent").shape
    agent, ensemble = result.significance
    assert (agent.policy, ensemble.policy) == ("agent", "ensemble")
    # per seed: 3 evaluations x 2 bands + flat; x 2 seeds; + the ensemble's 2 bands
    assert agent.n_trials == ensemble.n_trials == 7 * 2 + 2
    assert "ensemble" in result.format_table()


def _pnl(result: BacktestResult, policy: str) -> np.ndarray:
    return next(r.pnl for r in result.folds if r.policy == policy)


def test_ensemble_averages_the_seeds_that_trade_and_leaves_out_those_that_stand_aside(
    store: Path,
) -> None:
    config = dataclasses.replace(TINY, seeds=3, ensemble=True)
    cache = open_cache(store, config.symbol, None, "cpu")
    market = cache.market
    fold = make_folds(
        market.trading_day, config.walkforward, max_target_horizon_bars=cache.horizon
    )[0]
    spec = contract_spec(config.symbol, config.env, cache.contracts)

    def values(long: float, short: float) -> KeptValues:
        """Action values that prefer going long by `long` and short by `short` everywhere."""

        def window(lo: int, hi: int) -> np.ndarray:
            q = np.zeros((hi - lo, 3, 3), np.float32)
            q[:, :, 0], q[:, :, 2] = short, long
            return q

        return KeptValues(window(*fold.validation), window(*fold.test), window(*fold.train), 0.0)

    # one seed strongly long, one weakly short, one standing aside: the mean goes long
    result = _ensemble(market, fold, config, spec, [values(3.0, 0.0), values(0.0, 1.0), None])
    held = np.ones(fold.test[1] - fold.test[0])
    long = evaluate_fold(market, fold, held, config.env, spec, capital=config.capital, seed=0)
    assert result.policy == "ensemble"
    np.testing.assert_array_equal(result.pnl, long.pnl)
    assert result.metrics.total_pnl == long.metrics.total_pnl

    flat = _ensemble(market, fold, config, spec, [None, None, None])
    assert not flat.positions.any() and flat.metrics.n_trades == 0


def test_ensemble_needs_two_seeds() -> None:
    with pytest.raises(InvalidInputError, match=r"`ensemble` .* needs `seeds` >= 2, was 1"):
        dataclasses.replace(TINY, ensemble=True)
