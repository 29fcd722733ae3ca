"""The smallest training config that still trains walk-forward: shared by the loop tests and
the fault-injection suite."""

from __future__ import annotations

from fxstore.config import AgentConfig, EnvConfig, TrainConfig, WalkForwardConfig

#: A few seconds per run: 2 folds of 10 test days, 120 steps of 8 environments each.
TINY = TrainConfig(
    device="cpu",
    env=EnvConfig(positions=(-1, 0, 1)),
    agent=AgentConfig(hidden=16, n_atoms=11, v_min=-5.0, v_max=5.0, gamma=0.9, lr=1e-3),
    walkforward=WalkForwardConfig(train_days=20, test_days=10, validation_fraction=0.2),
    n_envs=8,
    batch_size=32,
    replay_size=2_000,
    episode_bars=60,
    env_steps=120,
    learn_start=64,
    eval_every=40,
    patience=0,
    checkpoint_every=50,
    max_folds=2,
)
