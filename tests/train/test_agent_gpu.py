"""fxstore.train.agent and replay on CuPy: the fused kernels against the numpy reference.

Every test here needs CuPy and a CUDA device; tests/train/conftest.py skips them otherwise.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from fxstore.config import AgentConfig
from fxstore.errors import TrainingDivergedError
from fxstore.train.agent import Agent, make_rng
from fxstore.train.replay import Batch, NStepAccumulator, PrioritizedReplay
from tests.train.test_agent import make_batch

pytestmark = pytest.mark.gpu

CONFIG = AgentConfig(hidden=32, layers=2, n_atoms=11, v_min=-3.0, v_max=3.0, lr=1e-3, seed=2)


def to_device(batch: Batch) -> Batch:
    import cupy

    return Batch(*(cupy.asarray(x) for x in batch))


def test_q_values_cupy_equal_numpy() -> None:
    import cupy

    obs = np.random.default_rng(0).normal(size=(300, 6)).astype(np.float32)
    host = Agent(CONFIG, 6, 3).q_values(obs)
    device = Agent(CONFIG, 6, 3, xp=cupy).q_values(cupy.asarray(obs))
    assert device.dtype == cupy.float32 and device.shape == (300, 3)
    np.testing.assert_allclose(cupy.asnumpy(device), host, atol=1e-4)


@pytest.mark.parametrize(
    ("n_actions", "weight_decay", "layers"),
    [(1, 0.0, 2), (3, 0.0, 2), (4, 0.0, 2), (3, 50.0, 2), (3, 0.0, 0)],
)
def test_update_cupy_equals_numpy(n_actions: int, weight_decay: float, layers: int) -> None:
    import cupy

    config = dataclasses.replace(CONFIG, weight_decay=weight_decay, layers=layers)
    host, device = Agent(config, 6, n_actions), Agent(config, 6, n_actions, xp=cupy)
    for seed in range(5):
        batch = make_batch(200, 6, n_actions, seed=seed)
        (stats_h, prio_h), (stats_d, prio_d) = host.update(batch), device.update(to_device(batch))
        assert stats_d.loss == pytest.approx(stats_h.loss, rel=1e-4)
        assert stats_d.grad_norm == pytest.approx(stats_h.grad_norm, rel=1e-3)
        np.testing.assert_allclose(cupy.asnumpy(prio_d), prio_h, rtol=1e-4, atol=1e-5)
    for key, value in host.state_dict().items():
        np.testing.assert_allclose(device.state_dict()[key], value, rtol=1e-4, atol=1e-4)


def test_gradient_cupy_equals_numpy() -> None:
    import cupy

    host, device = Agent(CONFIG, 6, 3), Agent(CONFIG, 6, 3, xp=cupy)
    batch = make_batch(500, 6, 3, seed=7)
    host._loss_and_grad(host._check_batch(batch))
    device._loss_and_grad(device._check_batch(to_device(batch)))
    np.testing.assert_allclose(cupy.asnumpy(device._grad), host._grad, rtol=1e-3, atol=1e-6)


def test_update_cupy_same_seed_gives_identical_losses() -> None:
    import cupy

    batches = [to_device(make_batch(4096, 6, 3, seed=s)) for s in range(4)]
    runs = []
    for _ in range(2):
        agent = Agent(CONFIG, 6, 3, xp=cupy)
        runs.append([agent.update(b)[0].loss for b in batches])
    assert runs[0] == runs[1]


def test_update_cupy_nan_weight_raises_naming_the_tensor() -> None:
    import cupy

    agent = Agent(CONFIG, 6, 3, xp=cupy)
    agent.parameters["torso.1.bias"][5] = cupy.nan
    message = "step 1: weight torso.1.bias is not finite (nan); lower `lr` or `grad_clip`."
    with pytest.raises(TrainingDivergedError, match=f"^{re.escape(message)}$"):
        agent.update(to_device(make_batch(64, 6, 3)))


def test_replay_and_nstep_cupy_feed_the_agent() -> None:
    import cupy

    config = dataclasses.replace(CONFIG, batch_size=64)
    agent = Agent(config, 6, 3, xp=cupy)
    replay = PrioritizedReplay(1000, 6, alpha=0.6, eps=1e-6, xp=cupy, seed=0)
    nstep = NStepAccumulator(8, 3, 0.9, 6, xp=cupy)
    rng = make_rng(cupy, 0)
    obs = cupy.random.default_rng(1).standard_normal((8, 6), dtype=cupy.float32)
    for t in range(30):
        action = agent.act(obs, 0.5, rng)
        done = cupy.asarray(np.arange(8) == t % 8)
        replay.add(*nstep.push(obs, action, cupy.ones(8, cupy.float32), done, obs + 1))
        obs = obs + 1
    batch = replay.sample(64, 0.4)
    stats, priority = agent.update(batch)
    replay.update_priorities(batch.index, priority)
    assert isinstance(priority, cupy.ndarray) and np.isfinite(stats.loss)
    assert len(replay) > 100


def test_update_tf32_is_close_to_fp32_deterministic_and_restores_precision() -> None:
    import cupy

    from fxstore.train._gpu_kernels import _compute_types

    linalg = _compute_types()
    before = linalg.get_compute_type(np.float32)
    fast = dataclasses.replace(CONFIG, hidden=256, tf32=True)
    exact = dataclasses.replace(CONFIG, hidden=256)
    losses = []
    for config in (fast, fast, exact):
        agent = Agent(config, 6, 3, xp=cupy)
        losses.append(
            [agent.update(to_device(make_batch(512, 6, 3, seed=s)))[0].loss for s in range(5)]
        )
    assert losses[0] == losses[1]  # TF32 is still deterministic
    np.testing.assert_allclose(losses[0], losses[2], rtol=1e-2)
    assert linalg.get_compute_type(np.float32) == before
