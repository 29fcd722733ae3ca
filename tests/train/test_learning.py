"""It must really learn, and not cheat: the whole pipeline on a planted-signal market and on the
same market without the signal (synth -> ingest -> precompute -> train, CPU, small sizes).

The two markets differ only in ``signal_strength``: with it, signed order flow predicts the
next move (fxstore.synth.events) and the agent's out-of-sample daily Sharpe over every test
window must be positive (bootstrap interval above 0) and above every naive baseline's
(flat, long, random, ofi-sign); without it, nothing is predictable and the agent's Sharpe must
not be significantly above 0 (nor its deflated Sharpe) -- a leak of future data into features,
folds or evaluation would show up here as a positive Sharpe. The references 'linear' (ridge
on the features) and 'oracle' (the planted signal itself) are reported next to it; they are
not bars the agent must clear here (at this signal strength the ridge model did better).
The market without the signal is test_learning_null.py (a second file: parallel workers
train the two at once).
"""

from __future__ import annotations

import math

import pytest

from fxstore.train.evaluate.results import BacktestResult
from tests.train._learning import learning_store, train_on

pytestmark = pytest.mark.slow

#: The baselines that fit nothing and see no planted signal.
NAIVE = ("flat", "long", "random", "ofi-sign")


@pytest.fixture(scope="module")
def signal_result(tmp_path_factory: pytest.TempPathFactory) -> BacktestResult:
    return train_on(learning_store(tmp_path_factory, 1.0))


def test_train_planted_signal_out_of_sample_sharpe_is_positive(
    signal_result: BacktestResult,
) -> None:
    agent = signal_result.totals["agent"]
    assert agent.sharpe_daily_ci[0] > 0.0
    assert agent.total_pnl > 0.0


def test_train_planted_signal_agent_beats_every_naive_baseline(
    signal_result: BacktestResult,
) -> None:
    agent = signal_result.totals["agent"]
    for policy in NAIVE:
        metrics = signal_result.totals[policy]
        assert agent.total_pnl > metrics.total_pnl, policy
        if not math.isnan(metrics.sharpe_daily):  # flat: no variance, no Sharpe
            assert agent.sharpe_daily > metrics.sharpe_daily, policy


def test_train_planted_signal_oracle_made_money_and_the_share_is_printed(
    signal_result: BacktestResult,
) -> None:
    oracle = signal_result.totals["oracle"]
    assert oracle.total_pnl > 0.0
    share = signal_result.share_of_oracle("agent")
    assert share == signal_result.totals["agent"].total_pnl / oracle.total_pnl
    assert any(
        line.startswith(f"agent's share of the oracle's PnL: {share:.1%}")
        for line in signal_result.format_table().splitlines()
    )
