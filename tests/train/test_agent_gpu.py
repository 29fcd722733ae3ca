"""fxstore.train.agent.dqn and replay on CuPy: the fused kernels against the numpy reference.

Every test here needs CuPy and a CUDA device; tests/train/conftest.py skips them otherwise.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from fxstore.config import AgentConfig
from fxstore.errors import TrainingDivergedError
from fxstore.train.agent.dqn import Agent, make_rng
from fxstore.train.agent.replay import Batch, NStepAccumulator, PrioritizedReplay
from fxstore.train.gpu.rng import CounterRng
from tests.train.test_agent import make_batch

pytestmark = pytest.mark.gpu

CONFIG = AgentConfig(hidden=32, layers=2, n_atoms=11, v_min=-3.0, v_max=3.0, lr=1e-3, seed=2)


def to_device(batch: Batch) -> Batch:
    import cupy

    return Batch(*(cupy.asarray(x) for x in batch))


@pytest.mark.parametrize("n_atoms", [11, 32, 51, 101])  # one to four atoms a lane
def test_q_values_cupy_equal_numpy(n_atoms: int) -> None:
    import cupy

    config = dataclasses.replace(CONFIG, n_atoms=n_atoms)
    obs = np.random.default_rng(0).normal(size=(301, 6)).astype(np.float32)
    host = Agent(config, 6, 3).q_values(obs)
    device = Agent(config, 6, 3, xp=cupy).q_values(cupy.asarray(obs))
    assert device.dtype == cupy.float32 and device.shape == (301, 3)
    np.testing.assert_allclose(cupy.asnumpy(device), host, atol=1e-4)


def test_q_values_cupy_equal_numpy_with_padded_rows() -> None:
    """31 features and 5 actions of 51 atoms (the default network): the first layer's rows
    and the head's 306 columns are stored padded (to 32 and 308)."""
    import cupy

    config = dataclasses.replace(CONFIG, n_atoms=51)
    obs = np.random.default_rng(1).normal(size=(257, 31)).astype(np.float32)
    host, device = Agent(config, 31, 5), Agent(config, 31, 5, xp=cupy)
    assert device._net["head.weight"].shape == (32, 308)
    got = device.q_values(cupy.asarray(obs))
    np.testing.assert_allclose(cupy.asnumpy(got), host.q_values(obs), atol=1e-4)


@pytest.mark.parametrize(
    ("n_actions", "weight_decay", "layers"),
    [(1, 0.0, 2), (3, 0.0, 2), (4, 0.0, 2), (3, 50.0, 2), (3, 0.0, 0), (5, 0.0, 2)],
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


@pytest.mark.parametrize("n_atoms", [11, 51, 101])
def test_gradient_cupy_equals_numpy(n_atoms: int) -> None:
    import cupy

    config = dataclasses.replace(CONFIG, n_atoms=n_atoms)
    host, device = Agent(config, 6, 3), Agent(config, 6, 3, xp=cupy)
    batch = make_batch(501, 6, 3, seed=7)
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


def test_update_tf32_is_close_to_fp32_and_deterministic() -> None:
    import cupy

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
    assert losses[0] != losses[2]  # and TF32 was used


@pytest.mark.parametrize("tf32", [False, True])
def test_update_cuda_graph_equals_kernel_by_kernel_bit_for_bit(tf32: bool) -> None:
    import cupy

    runs = []
    for cuda_graph in (False, True):
        config = dataclasses.replace(CONFIG, cuda_graph=cuda_graph, tf32=tf32, target_period=3)
        agent = Agent(config, 6, 3, xp=cupy)
        priorities = [
            cupy.asnumpy(agent.update_async(to_device(make_batch(300, 6, 3, seed=s))))
            for s in range(7)
        ]
        runs.append((priorities, agent.state_dict(), agent.loss_totals()))
    (prio_a, state_a, totals_a), (prio_b, state_b, totals_b) = runs
    for a, b in zip(prio_a, prio_b, strict=True):
        np.testing.assert_array_equal(a, b)
    for key, value in state_a.items():
        np.testing.assert_array_equal(state_b[key], value)
    assert totals_a == totals_b and totals_a[1] == 7


@pytest.mark.parametrize("period", [0, 4])
def test_step_scalars_on_device_equal_the_host_reference(period: int) -> None:
    import cupy

    from fxstore.train.agent.ops import host_step_scalars
    from fxstore.train.gpu.update_kernels import CupyOps

    config = dataclasses.replace(CONFIG, target_period=period, target_tau=0.3, grad_clip=2.0)
    ops = CupyOps()
    for t, grad_sq, loss_sum in [(1, 0.25, 3.0), (7, 16.0, -2.0), (8, 1e-9, 0.5), (1000, 4.0, 1)]:
        progress = cupy.asarray([t - 1, 0, 10.0, 3, 0, 0], dtype=cupy.float64)
        out = cupy.zeros(5, dtype=cupy.float32)
        sums = cupy.asarray([loss_sum, grad_sq], dtype=cupy.float64)
        ops.step_scalars(sums, progress, out, batch=4, config=config)
        expected = host_step_scalars(config, t, float(np.sqrt(grad_sq)))
        np.testing.assert_allclose(cupy.asnumpy(out), expected, rtol=2e-7)
        assert cupy.asnumpy(progress).tolist() == [
            t,
            0,
            10.0 + loss_sum / 4,
            4,
            loss_sum / 4,
            float(np.sqrt(grad_sq)),
        ]


@pytest.mark.parametrize("cuda_graph", [False, True])
def test_update_async_divergence_skips_updates_and_check_finite_names_the_step(
    cuda_graph: bool,
) -> None:
    import cupy

    agent = Agent(dataclasses.replace(CONFIG, cuda_graph=cuda_graph), 6, 3, xp=cupy)
    for s in range(3):
        agent.update_async(to_device(make_batch(64, 6, 3, seed=s)))
    bad = make_batch(64, 6, 3, seed=3)
    bad.reward[5] = np.nan
    agent.update_async(to_device(bad))  # update 4: does not raise, does not apply
    before = agent.state_dict()
    for s in range(4, 6):  # later updates are skipped too
        agent.update_async(to_device(make_batch(64, 6, 3, seed=s)))
    after = agent.state_dict()
    for key in ("params", "target_params", "adam_m", "adam_v"):
        np.testing.assert_array_equal(after[key], before[key])
    message = "step 4: loss is not finite (nan); lower `lr` or `grad_clip`."
    with pytest.raises(TrainingDivergedError, match=f"^{re.escape(message)}$"):
        agent.check_finite()
    assert agent.step == 3 and agent.loss_totals()[1] == 3


def test_update_cuda_graph_resume_from_state_dict_continues_identically() -> None:
    import cupy

    batches = [to_device(make_batch(256, 6, 3, seed=s)) for s in range(6)]
    whole = Agent(CONFIG, 6, 3, xp=cupy)
    for batch in batches:
        whole.update_async(batch)
    first = Agent(CONFIG, 6, 3, xp=cupy)
    for batch in batches[:3]:
        first.update_async(batch)
    resumed = Agent(CONFIG, 6, 3, xp=cupy)
    resumed.update_async(batches[0])  # captured, then overwritten by the restore
    resumed.load_state_dict(first.state_dict())
    for batch in batches[3:]:
        resumed.update_async(batch)
    for key, value in whole.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[key], value)


@pytest.mark.parametrize("all_epilogues", [False, True])
@pytest.mark.parametrize("tf32", [False, True])
def test_fused_epilogues_are_used_and_match_the_separate_kernels(
    tf32: bool, all_epilogues: bool
) -> None:
    """cuBLASLt's epilogues (bias+ReLU by default; with `all_epilogues` also the ReLU mask
    and the ReLU- and bias-gradient one) give the gradients and updates of the separate
    kernels, and are not silently off."""
    import cupy

    from fxstore.train.gpu.cublaslt import (
        EPILOGUE_DRELU_BGRAD,
        EPILOGUE_RELU_AUX_BIAS,
        EPILOGUE_RELU_BIAS,
    )

    config = dataclasses.replace(CONFIG, n_atoms=51, hidden=256, tf32=tf32)
    fused, separate = Agent(config, 31, 5, xp=cupy), Agent(config, 31, 5, xp=cupy)
    if all_epilogues:
        fused._ops.epilogues = {EPILOGUE_RELU_BIAS, EPILOGUE_RELU_AUX_BIAS, EPILOGUE_DRELU_BGRAD}  # type: ignore[attr-defined]
    separate._ops._lt = None  # type: ignore[attr-defined]
    batch = to_device(make_batch(1024, 31, 5, seed=3))
    for _ in range(3):
        (stats_f, prio_f), (stats_s, prio_s) = fused.update(batch), separate.update(batch)
        assert stats_f.loss == pytest.approx(stats_s.loss, rel=1e-4 if not tf32 else 1e-2)
        np.testing.assert_allclose(
            cupy.asnumpy(prio_f), cupy.asnumpy(prio_s), rtol=1e-3 if not tf32 else 3e-2, atol=1e-5
        )
    assert fused._ops._lt is not None and not fused._ops.refused  # type: ignore[attr-defined]
    masks = fused._workspace.masks  # type: ignore[union-attr]
    assert all(m.written for m in masks) if all_epilogues else all(m is None for m in masks)
    tol = 1e-4 if not tf32 else 2e-2
    np.testing.assert_allclose(
        cupy.asnumpy(fused._params), cupy.asnumpy(separate._params), rtol=tol, atol=tol
    )


@pytest.mark.parametrize("cols", [200, 201])  # float4 rows, and not
def test_relu_grad_col_sum_matches_numpy_on_row_views(cols: int) -> None:
    """The fused ReLU-gradient + bias-gradient pass on padded row views (as the update's
    buffers are): the gradient zeroed where h <= 0 (NaN h keeps it), the padding untouched,
    column sums as numpy's, and the same bits on every run."""
    import cupy

    from fxstore.train.gpu.update_kernels import CupyOps

    rng = np.random.default_rng(5)
    rows = 1000  # not a multiple of the chunks
    h = rng.standard_normal((rows, cols + 8)).astype(np.float32)
    h[3, 7] = np.nan
    d = rng.standard_normal((rows, cols + 8)).astype(np.float32)
    want = d[:, :cols].copy()
    want[h[:, :cols] <= 0] = 0
    ops = CupyOps()
    runs = []
    for _ in range(2):
        h_dev, d_dev = cupy.asarray(h), cupy.asarray(d)
        out = cupy.zeros(cols, dtype=cupy.float32)
        ops.relu_grad_col_sum(h_dev[:, :cols], d_dev[:, :cols], out)
        np.testing.assert_array_equal(cupy.asnumpy(d_dev[:, :cols]), want)
        np.testing.assert_array_equal(cupy.asnumpy(d_dev[:, cols:]), d[:, cols:])
        runs.append(cupy.asnumpy(out))
    np.testing.assert_allclose(runs[0], want.sum(axis=0, dtype=np.float64), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("tf32", [False, True])
def test_grad_matmul_splits_the_batch_and_matches_numpy(tf32: bool) -> None:
    """A weight gradient over a long batch, by split-K in fp32 (chunks of the batch, then
    their sum in order) and by one GEMM in TF32: numpy's product on transposed and padded
    row views, the output's padding untouched, the same bits on every run; short batches
    are not split."""
    import cupy

    from fxstore.train.gpu.update_kernels import CupyOps, split_k

    ops = CupyOps(tf32=tf32)
    rows, n_in, n_out = 8192, 40, 308
    sms = ops._sms  # type: ignore[attr-defined]
    assert (split_k(n_in, n_out, rows, sms, tf32=tf32) > 1) == (not tf32)
    assert split_k(n_in, n_out, 1024, sms, tf32=tf32) == 1
    rng = np.random.default_rng(11)
    acts = rng.standard_normal((rows, n_in + 8)).astype(np.float32)
    d = rng.standard_normal((rows, n_out + 4)).astype(np.float32)
    want = acts[:, :n_in].astype(np.float64).T @ d[:, :n_out]
    runs = []
    for _ in range(2):
        out = cupy.full((n_in, n_out + 4), 7.0, dtype=cupy.float32)
        a_dev, d_dev = cupy.asarray(acts), cupy.asarray(d)
        ops.grad_matmul(a_dev[:, :n_in].T, d_dev[:, :n_out], out[:, :n_out])
        got = cupy.asnumpy(out)
        assert (got[:, n_out:] == 7.0).all()
        runs.append(got[:, :n_out])
    tol = 1e-4 if not tf32 else 2e-2
    np.testing.assert_allclose(runs[0], want, rtol=tol, atol=tol * np.sqrt(rows))
    np.testing.assert_array_equal(runs[0], runs[1])


class _Delegating:
    """A generator with CounterRng's draws that is not one: Agent.act's generic path."""

    def __init__(self, rng: CounterRng) -> None:
        self.rng = rng

    def random(self, size: int) -> object:
        return self.rng.random(size)

    def integers(self, low: int, high: int, size: int) -> object:
        return self.rng.integers(low, high, size)


@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0])
def test_act_in_one_kernel_equals_the_generic_path(epsilon: float) -> None:
    """Agent.act with the loop's CounterRng on CuPy (one kernel after the Q-values) gives the
    generic path's actions bit for bit, and counts the same two calls."""
    import cupy

    from fxstore.train.gpu.rng import derive_key

    agent = Agent(CONFIG, 6, 5, xp=cupy)
    obs = cupy.random.default_rng(4).standard_normal((3000, 6), dtype=cupy.float32)
    fused, generic = CounterRng(cupy, derive_key(1), 9), CounterRng(cupy, derive_key(1), 9)
    for _ in range(3):
        got = agent.act(obs, epsilon, fused)
        want = agent.act(obs, epsilon, _Delegating(generic))  # type: ignore[arg-type]
        assert got.dtype == cupy.int64
        np.testing.assert_array_equal(cupy.asnumpy(got), cupy.asnumpy(want))
    assert fused.counter == generic.counter == 15


def test_act_in_one_kernel_breaks_ties_and_nans_as_numpy_argmax() -> None:
    """Equal Q-values pick the first action; a NaN Q counts as the largest (numpy's argmax)."""
    import cupy

    from fxstore.train.gpu import act as _act_kernel

    q = np.array(
        [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, np.nan, 5.0], [np.nan, 9.0, np.nan],
         [-1.0, -2.0, np.nan]],
        dtype=np.float32,
    )  # fmt: skip
    padded = cupy.zeros((5, 4), dtype=cupy.float32)  # rows of a wider array, as q_values'
    padded[:, :3] = cupy.asarray(q)
    got = _act_kernel.epsilon_greedy(padded[:, :3], 0.0, 0, 0)
    assert cupy.asnumpy(got).tolist() == np.argmax(q, axis=1).tolist() == [1, 0, 1, 0, 2]


@pytest.mark.parametrize("n", [0, 1, 1000, 16_384, 300_001])
def test_update_sums_are_float64_sums_in_a_fixed_order(n: int) -> None:
    """CupyOps.total and sum_squares (the loss total and the gradient norm, without CUB):
    the float64 sums of the values (and of their squares), the same bits on every call."""
    import cupy

    from fxstore.train.gpu.update_kernels import CupyOps

    ops = CupyOps()
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) * 3.0
    got = []
    for _ in range(2):
        out = cupy.zeros(2, dtype=cupy.float64)
        ops.total(cupy.asarray(x), out[0:1].reshape(()))
        ops.sum_squares(cupy.asarray(x), out[1:2].reshape(()))
        got.append(cupy.asnumpy(out))
    wide = x.astype(np.float64)
    np.testing.assert_allclose(got[0], [wide.sum(), (wide * wide).sum()], rtol=1e-12, atol=1e-9)
    assert got[0].tolist() == got[1].tolist()


def test_matmul_of_empty_operands() -> None:
    """Empty products: an empty output (CuPy gives it strides 0) is left as it is, and an
    empty inner dimension gives zeros."""
    import cupy

    from fxstore.train.gpu.update_kernels import CupyOps

    ops = CupyOps()
    empty = ops.matmul(cupy.zeros((0, 5), cupy.float32), cupy.ones((5, 4), cupy.float32))
    assert empty.shape == (0, 4)
    none = ops.matmul(cupy.ones((3, 5), cupy.float32), cupy.ones((5, 0), cupy.float32))
    assert none.shape == (3, 0)
    zero_k = ops.matmul(cupy.zeros((3, 0), cupy.float32), cupy.ones((0, 4), cupy.float32))
    assert cupy.asnumpy(zero_k).tolist() == [[0.0] * 4] * 3


def test_cublaslt_plain_product_and_its_bias_rule() -> None:
    """CublasLt.matmul with the DEFAULT epilogue (as bench/diag_gemm_algos.py times it): a
    plain product on a transposed view, numpy's within fp32 rounding; a bias is refused
    there, and required by the bias epilogues."""
    import cupy

    from fxstore.train.gpu.cublaslt import EPILOGUE_DEFAULT, EPILOGUE_RELU_BIAS
    from fxstore.train.gpu.update_kernels import CupyOps

    lt = CupyOps()._lt  # type: ignore[attr-defined]
    assert lt is not None
    rng = np.random.default_rng(4)
    a = rng.standard_normal((300, 40)).astype(np.float32)
    w = rng.standard_normal((24, 40)).astype(np.float32)
    out = cupy.empty((300, 24), cupy.float32)
    lt.matmul(cupy.asarray(a), cupy.asarray(w).T, out, epilogue=EPILOGUE_DEFAULT)
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(cupy.asnumpy(out), want, rtol=1e-4, atol=1e-4)
    x, y, o = cupy.ones((4, 8), cupy.float32), cupy.ones((8, 6), cupy.float32), out[:4, :6]
    with pytest.raises(ValueError, match="epilogue 1"):
        lt.matmul(x, y, o, epilogue=EPILOGUE_DEFAULT, bias=cupy.zeros(6, cupy.float32))
    with pytest.raises(ValueError, match="epilogue 6"):
        lt.matmul(x, y, o, epilogue=EPILOGUE_RELU_BIAS)
