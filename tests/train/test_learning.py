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
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest

from fxstore.config import (
    AgentConfig,
    EnvConfig,
    FeatureConfig,
    IngestConfig,
    SynthConfig,
    TrainConfig,
    WalkForwardConfig,
)
from fxstore.train.evaluate.results import BacktestResult
from fxstore.train.loop import train

pytestmark = pytest.mark.slow

#: 78 trading days at 200,000 records a day (about 97 dollar-imbalance bars a day).
MARKET = SynthConfig(
    start=dt.date(2024, 1, 2), end=dt.date(2024, 4, 19), events_per_day=200_000, seed=3
)
#: Two folds of 15 test days after 40-day training windows; about 35 s on 2 cores.
LEARN = TrainConfig(
    device="cpu",
    env=EnvConfig(positions=(-1, 0, 1)),
    agent=AgentConfig(
        hidden=64,
        n_atoms=21,
        v_min=-6.0,
        v_max=6.0,
        gamma=0.9,
        n_step=3,
        lr=3e-4,
        eps_decay_steps=800,
        eps_end=0.02,
        target_tau=0.01,
    ),
    walkforward=WalkForwardConfig(train_days=40, test_days=15, validation_fraction=0.2),
    n_envs=32,
    batch_size=256,
    replay_size=100_000,
    episode_bars=300,
    env_steps=1500,
    learn_start=1000,
    updates_per_step=4,
    eval_every=250,
    patience=0,
    checkpoint_every=0,
)


def _store(tmp_path_factory: pytest.TempPathFactory, strength: float) -> Path:
    """MARKET with `strength`, ingested into dollar-imbalance bars and precomputed."""
    import dataclasses

    from fxstore.features.precompute import precompute
    from fxstore.ingest.run.pipeline import ingest
    from fxstore.synth import generate_market

    root = tmp_path_factory.mktemp(f"learn_{strength:g}")
    folder = root / "synth"
    generate_market(dataclasses.replace(MARKET, signal_strength=strength), folder)
    ingest(IngestConfig(symbol="ES.FUT", workers=2), [folder], root)
    precompute(FeatureConfig(), root)
    return root


def _train(root: Path) -> BacktestResult:
    import dataclasses

    return train(dataclasses.replace(LEARN, signal_dir=str(root / "synth")), root)


#: The baselines that fit nothing and see no planted signal.
NAIVE = ("flat", "long", "random", "ofi-sign")


@pytest.fixture(scope="module")
def signal_result(tmp_path_factory: pytest.TempPathFactory) -> BacktestResult:
    return _train(_store(tmp_path_factory, 1.0))


@pytest.fixture(scope="module")
def null_result(tmp_path_factory: pytest.TempPathFactory) -> BacktestResult:
    return _train(_store(tmp_path_factory, 0.0))


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


def test_train_no_signal_out_of_sample_sharpe_not_above_zero(null_result: BacktestResult) -> None:
    agent = null_result.totals["agent"]
    low, _high = agent.sharpe_daily_ci
    # NaN: the agent stood aside in every fold (validation never beat flat): no Sharpe at all.
    assert math.isnan(low) or low <= 0.0


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


def test_train_no_signal_deflated_sharpe_not_significant(null_result: BacktestResult) -> None:
    (significance,) = null_result.significance
    # NaN: the agent stood aside in every fold
    assert not significance.dsr > 0.95
