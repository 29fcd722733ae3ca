"""Several seeds per fold: names, mean ± std over seeds, and a two-seed run."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from fxstore.train.evaluate.metrics import BacktestMetrics, compute_metrics
from fxstore.train.evaluate.seeds import agent_policies, seed_notes, summarize_seeds
from fxstore.train.loop import train
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
    assert lines[-1].startswith("agent over 2 seeds (mean ± std): PnL $ ")
    (sig,) = result.significance
    assert sig.n_trials == 4 * 2  # 3 evaluations + flat, x 2 seeds
