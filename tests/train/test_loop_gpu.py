"""The training loop on a GPU: the captured update trains as the kernel-by-kernel one does,
a seed repeats, and a resumed run equals an uninterrupted one (tiny sizes).

Every test here needs CuPy and a CUDA device; tests/train/conftest.py skips them otherwise.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fxstore.train.evaluate.results import BacktestResult
from fxstore.train.loop import train
from tests.train._tiny import TINY, interrupt_then_resume
from tests.train.test_concurrent_seeds import (
    SEEDS,
    assert_a_stop_saves_every_seed,
    assert_side_by_side_is_serial,
)

pytestmark = pytest.mark.gpu

GPU = dataclasses.replace(TINY, device="cuda", batch_size=64)


def _agent(result: BacktestResult) -> tuple[list[np.ndarray], list[object]]:
    pnl = [r.pnl for r in result.folds if r.policy == "agent"]
    evals = [json.loads((result.run_dir / f"fold0{i}" / "evals.json").read_text()) for i in (0, 1)]
    return pnl, evals


def test_train_cuda_graph_equals_kernel_by_kernel_and_repeats(store: Path) -> None:
    eager = dataclasses.replace(GPU, agent=dataclasses.replace(GPU.agent, cuda_graph=False))
    runs = [_agent(train(config, store)) for config in (GPU, GPU, eager)]
    for pnl, evals in runs[1:]:
        for a, b in zip(runs[0][0], pnl, strict=True):
            np.testing.assert_array_equal(a, b)
        assert evals == runs[0][1]
    losses = [e["loss"] for e in runs[0][1][0]["evals"]]
    assert all(loss is not None and np.isfinite(loss) for loss in losses[1:])


def test_train_cuda_resume_after_interrupt_equals_uninterrupted_run(store: Path) -> None:
    config = dataclasses.replace(GPU, env_steps=200, eval_every=50, checkpoint_every=100)
    whole, resumed = interrupt_then_resume(config, store)
    (pnl_a, evals_a), (pnl_b, evals_b) = _agent(whole), _agent(resumed)
    for a, b in zip(pnl_a, pnl_b, strict=True):
        np.testing.assert_array_equal(a, b)
    assert evals_a == evals_b


def test_train_cuda_pushes_each_step_into_the_replay_in_one_kernel(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop's environments start and end episodes together, so every n-step push goes
    straight into the replay as one kernel (NStepAccumulator.push_into), never push + add."""
    from fxstore.train.agent.replay import PrioritizedReplay
    from fxstore.train.gpu import replay_kernels as _replay_kernels

    calls = {"kernel": 0, "add": 0}
    kernel, add = _replay_kernels.nstep_add, PrioritizedReplay.add

    def counted_kernel(*args: Any) -> None:
        calls["kernel"] += 1
        kernel(*args)

    def counted_add(self: PrioritizedReplay, *args: Any) -> None:
        calls["add"] += 1
        add(self, *args)

    monkeypatch.setattr(_replay_kernels, "nstep_add", counted_kernel)
    monkeypatch.setattr(PrioritizedReplay, "add", counted_add)
    config = dataclasses.replace(GPU, env_steps=30, eval_every=30, max_folds=1)
    train(config, store)
    assert calls == {"kernel": 30, "add": 0}


def test_train_cuda_seeds_side_by_side_on_their_streams_give_the_serial_run(store: Path) -> None:
    """Each seed on its own CUDA stream, its graphs captured while the others' work runs:
    the same bits as the seeds one after another, a stop included."""
    config = dataclasses.replace(SEEDS, device="cuda", batch_size=64)
    assert_side_by_side_is_serial(config, store)
    assert_a_stop_saves_every_seed(config, store)
