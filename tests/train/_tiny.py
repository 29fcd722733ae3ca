"""The smallest training config that still trains walk-forward: shared by the loop tests and
the fault-injection suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fxstore.config import AgentConfig, EnvConfig, TrainConfig, WalkForwardConfig
from fxstore.train.evaluate.results import BacktestResult
from fxstore.train.loop import Progress, train

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


class Interrupt(Exception):
    """Raised from the progress callback to kill a run in the middle of a fold."""


def interrupt_then_resume(config: TrainConfig, store: Path) -> tuple[BacktestResult, ...]:
    """An uninterrupted run of `config`, and a run killed in fold 1 at step 100 (after its
    checkpoint there) and resumed: (whole, resumed)."""
    whole = train(config, store)

    def stop_in_second_fold(report: Progress) -> None:
        if report.fold == 1 and report.step == 100:
            raise Interrupt

    with pytest.raises(Interrupt):
        train(config, store, on_progress=stop_in_second_fold)
    run_id = max(p.name for p in (store / "runs").iterdir() if p.name != whole.run_dir.name)
    assert (store / "runs" / run_id / "fold01" / "checkpoint.npz").is_file()
    resumed = train(TrainConfig(), store, resume=run_id)
    assert resumed.run_dir.name == run_id
    return whole, resumed


def _result_files(fold: Path) -> list[str]:
    """A fold folder's files that hold its results (results.npz, every seed's evaluations,
    metrics.json): none holds a timing; the checkpoints and the plot are left out."""
    return sorted(
        p.name
        for p in fold.iterdir()
        if p.suffix in (".npz", ".json") and not p.name.startswith("checkpoint")
    )


def assert_same_run(a: Path, b: Path) -> None:
    """Two run folders hold the same results: metrics.json (less the folder's own path) and
    every fold's results, evaluations (every seed's) and metrics, byte for byte; `b` keeps
    no checkpoint."""
    metrics = [json.loads((p / "metrics.json").read_text()) for p in (a, b)]
    assert metrics[0].pop("run_dir") == str(a) and metrics[1].pop("run_dir") == str(b)
    assert metrics[0] == metrics[1]
    folds = sorted(p.name for p in a.glob("fold*"))
    assert folds and folds == sorted(p.name for p in b.glob("fold*"))
    for fold in folds:
        names = _result_files(a / fold)
        assert {"results.npz", "evals.json", "metrics.json"} <= set(names)
        assert names == _result_files(b / fold), fold
        for name in names:
            same = (a / fold / name).read_bytes() == (b / fold / name).read_bytes()
            assert same, (fold, name)
        assert not list((b / fold).glob("checkpoint*.npz"))
