"""The learning tests' market, training settings and store (test_learning*.py): the whole
pipeline (synth -> ingest -> precompute -> train, CPU, small sizes) on a planted-signal market
and on the same market without the signal. Two files, so that parallel workers train the two
markets at once.
"""

from __future__ import annotations

import datetime as dt
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


def learning_store(tmp_path_factory: pytest.TempPathFactory, strength: float) -> Path:
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


def train_on(root: Path) -> BacktestResult:
    import dataclasses

    return train(dataclasses.replace(LEARN, signal_dir=str(root / "synth")), root)
