"""fxstore.train.agent.replay on CuPy: the device sampler (fxstore.train.gpu.replay_kernels) draws
what the numpy reference draws.

Every test here needs CuPy and a CUDA device; tests/train/conftest.py skips them otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fxstore.train.agent.replay import Batch, PrioritizedReplay

pytestmark = pytest.mark.gpu


def twin_replays(capacity: int, filled: int, n_obs: int) -> tuple[PrioritizedReplay, ...]:
    """A numpy and a CuPy replay holding the same transitions and priorities."""
    import cupy

    rng = np.random.default_rng(5)
    obs = rng.standard_normal((filled, n_obs)).astype(np.float32)
    action = rng.integers(0, 5, filled)
    reward = rng.standard_normal(filled).astype(np.float32)
    discount = rng.choice([0.0, 0.729], filled).astype(np.float32)
    # a few slots with a hundred times the others' priority, and a few near zero
    priority = rng.gamma(0.5, size=filled).astype(np.float32)
    priority[rng.integers(0, filled, 5)] *= 100.0
    out = []
    for xp in (np, cupy):
        replay = PrioritizedReplay(capacity, n_obs, alpha=0.6, eps=1e-6, xp=xp, seed=9)
        for lo in range(0, filled, 700):  # several adds: the ring wraps when filled > capacity
            part = slice(lo, min(lo + 700, filled))
            replay.add(*(xp.asarray(x[part]) for x in (obs, action, reward, discount, obs + 1.0)))
        replay.update_priorities(xp.arange(min(filled, capacity)), xp.asarray(priority[:capacity]))
        out.append(replay)
    # the same powers (numpy's and CUDA's float32 ** may differ in the last bit)
    out[1].priority[...] = cupy.asarray(out[0].priority)
    return tuple(out)


@pytest.mark.parametrize(
    ("capacity", "filled", "n_obs", "batch"),
    [(3000, 2500, 31, 512), (3000, 4100, 31, 1000), (1024, 1024, 40, 64), (5, 3, 2, 9)],
)
def test_device_sampler_draws_what_numpy_draws(
    capacity: int, filled: int, n_obs: int, batch: int
) -> None:
    import cupy

    host, device = twin_replays(capacity, filled, n_obs)
    for beta in (0.4, 1.0, 0.0):
        want = host.sample(batch, beta)
        got = device.sample(batch, beta)
        np.testing.assert_array_equal(cupy.asnumpy(got.index), want.index)
        for name in ("obs", "next_obs", "action", "reward", "discount"):
            np.testing.assert_array_equal(cupy.asnumpy(getattr(got, name)), getattr(want, name))
        np.testing.assert_allclose(cupy.asnumpy(got.weight), want.weight, rtol=2e-7)
        assert got.index.dtype == np.int64 and got.weight.dtype == np.float32


def test_device_sampler_writes_into_out_and_does_not_race_the_host() -> None:
    """Many draws queued without a wait: each batch holds its own uniforms' slots (the pinned
    ring is not overwritten before its copy ran)."""
    import cupy

    host, device = twin_replays(4096, 4096, 8)
    out = Batch(
        obs=cupy.empty((256, 8), cupy.float32),
        action=cupy.empty(256, cupy.int64),
        reward=cupy.empty(256, cupy.float32),
        discount=cupy.empty(256, cupy.float32),
        next_obs=cupy.empty((256, 8), cupy.float32),
        weight=cupy.empty(256, cupy.float32),
        index=cupy.empty(256, cupy.int64),
    )
    kept = cupy.empty((40, 256), cupy.int64)
    for i in range(40):
        assert device.sample(256, 0.5, out=out) is out
        kept[i] = out.index
    want = np.stack([host.sample(256, 0.5).index for _ in range(40)])
    np.testing.assert_array_equal(cupy.asnumpy(kept), want)


def test_device_sampler_fills_row_views_of_padded_buffers() -> None:
    """The learner's obs buffers are row views of arrays padded for aligned GEMMs: the
    kernel writes each row at the view's stride and leaves the padding alone."""
    import cupy

    host, device = twin_replays(3000, 2500, 31)
    padded = cupy.full((2 * 300, 32), 7.0, dtype=cupy.float32)
    fresh = device.sample(300, 0.4)  # the replay's own buffers, for the other fields
    host.sample(300, 0.4)  # keeps the twins' generators in step
    out = fresh._replace(obs=padded[:300, :31], next_obs=padded[300:, :31])
    got = device.sample(300, 0.4, out=out)
    want = host.sample(300, 0.4)
    np.testing.assert_array_equal(cupy.asnumpy(got.index), want.index)
    np.testing.assert_array_equal(cupy.asnumpy(padded[:300, :31]), want.obs)
    np.testing.assert_array_equal(cupy.asnumpy(padded[300:, :31]), want.next_obs)
    assert bool((padded[:, 31] == 7.0).all())


@pytest.mark.parametrize("special", ["none", "nan", "no_new_max"])
def test_priority_write_back_in_one_kernel_matches_cupy_expressions(
    special: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """update_priorities' one-kernel write-back gives CuPy's own expressions' bits: the
    priorities (repeated slots included), and the running maximum (NaN wins, as in
    cupy.maximum; a batch below the maximum leaves it)."""
    import cupy

    import fxstore.train.agent.replay as replay_module

    rng = np.random.default_rng(2)
    # every slot once, then 100 drawn twice with the same priority both times (as a batch
    # does: one transition, one network); slots drawn with different priorities would make
    # CuPy's scatter itself depend on the order its writes land
    index = rng.permutation(900)
    p = rng.gamma(0.5, size=900).astype(np.float32) * 3.0
    index, p = np.concatenate([index, index[:100]]), np.concatenate([p, p[:100]])
    if special == "nan":
        p[7] = p[907] = np.nan
    if special == "no_new_max":
        p = np.minimum(p, np.float32(0.5))
    got = []
    for fused in (True, False):
        replay = PrioritizedReplay(1000, 3, alpha=0.6, eps=1e-6, xp=cupy, seed=1)
        replay.add(*(cupy.zeros((900, 3), cupy.float32),), cupy.zeros(900, cupy.int64),
                   cupy.zeros(900, cupy.float32), cupy.zeros(900, cupy.float32),
                   cupy.zeros((900, 3), cupy.float32))  # fmt: skip
        if not fused:
            monkeypatch.setattr(replay_module, "_fused_write", lambda *_: False)
        replay.update_priorities(cupy.asarray(index), cupy.asarray(p))
        replay.update_priorities(cupy.asarray(index[:10]), cupy.asarray(p[:10] * 0.5))
        got.append((cupy.asnumpy(replay.priority), cupy.asnumpy(replay._max_priority)))
    np.testing.assert_array_equal(got[0][0], got[1][0])  # NaN where NaN, else the same bits
    (_, fused_max), (_, cupy_max) = got
    if special == "nan":
        assert np.isnan(fused_max) and np.isnan(cupy_max)
    else:
        assert fused_max.tobytes() == cupy_max.tobytes()
    if special == "no_new_max":
        assert fused_max == 1.0


def _push_both(
    steps: list[tuple[np.ndarray, ...]],
    capacity: int,
    *,
    reward_dtype: type = np.float32,
    raise_priority_at: int | None = None,
) -> tuple[tuple[dict[str, np.ndarray], ...], int]:
    """The windows' and replays' states after `steps` (obs, action, reward, done, all_done)
    pushed by push + add and by push_into, both on CuPy; and how often the kernel ran."""
    import cupy

    from fxstore.train.agent.replay import NStepAccumulator
    from fxstore.train.gpu import replay_kernels as _replay_kernels

    calls = [0]
    kernel = _replay_kernels.nstep_add

    def counted(*args: object) -> None:
        calls[0] += 1
        kernel(*args)  # type: ignore[arg-type]

    n_envs, n_obs = steps[0][0].shape
    states = []
    for fused in (False, True):
        nstep = NStepAccumulator(n_envs, 3, 0.9, n_obs, xp=cupy)
        replay = PrioritizedReplay(capacity, n_obs, alpha=0.6, eps=1e-6, xp=cupy, seed=1)
        for t, (obs, action, reward, done, all_done) in enumerate(steps):
            if t == raise_priority_at and len(replay):  # a larger max priority from here on
                replay.update_priorities(cupy.arange(2), cupy.asarray([3.5, 0.2], cupy.float32))
            args = [cupy.asarray(x) for x in (obs, action, reward.astype(reward_dtype), done)]
            args.append(args[0] + 1.0)
            flag = None if all_done is None else bool(all_done)
            if fused:
                _replay_kernels.nstep_add = counted  # type: ignore[assignment]
                try:
                    nstep.push_into(replay, *args, all_done=flag)
                finally:
                    _replay_kernels.nstep_add = kernel
            else:
                replay.add(*nstep.push(*args, all_done=flag))
        states.append((nstep.state_dict(), replay.state_dict()))
    return (*states[0], *states[1]), calls[0]


def _episodes(
    n_envs: int, n_steps: int, length: int, general_at: int | None = None
) -> list[tuple[Any, ...]]:
    """Steps of episodes of `length` that start and end together (all_done given), but at
    step `general_at`, where one env's episode ends alone (all_done None: the general push)."""
    rng = np.random.default_rng(8)
    out = []
    for t in range(n_steps):
        obs = rng.standard_normal((n_envs, 5)).astype(np.float32)
        action, reward = rng.integers(0, 5, n_envs), rng.standard_normal(n_envs)
        ended = t % length == length - 1
        done = np.full(n_envs, ended)
        all_done: bool | None = ended
        if t == general_at:
            done[1], all_done = True, None
        out.append((obs, action, reward, done, all_done))
    return out


@pytest.mark.parametrize(
    ("capacity", "length", "general_at", "fused_calls"),
    [
        (500, 4, None, 14),  # the ring wraps; episodes end with 1, 2 and 3 open steps
        (200, 2, None, 14),  # 2-step episodes: the window never fills
        (500, 5, 6, 6),  # after a lone episode end only the general push is exact
    ],
)
def test_push_into_one_kernel_equals_push_then_add(
    capacity: int, length: int, general_at: int | None, fused_calls: int
) -> None:
    (before_nstep, before_replay, nstep, replay), calls = _push_both(
        _episodes(40, 14, length, general_at), capacity, raise_priority_at=5
    )
    assert calls == fused_calls
    for key in before_nstep:
        np.testing.assert_array_equal(nstep[key], before_nstep[key], err_msg=key)
    for key in before_replay:
        if key == "reward":  # the return's products summed in the matmul's order, by fmaf
            np.testing.assert_allclose(replay[key], before_replay[key], rtol=1e-6, atol=0)
        else:
            np.testing.assert_array_equal(replay[key], before_replay[key], err_msg=key)


def test_push_into_falls_back_where_one_kernel_cannot_write_it() -> None:
    """Rewards of another dtype, and windows larger than the replay: push, then add."""
    steps = _episodes(40, 6, 4)
    for capacity, dtype in ((500, np.float64), (100, np.float32)):  # 3 x 40 > 100
        (before_nstep, before_replay, nstep, replay), calls = _push_both(
            steps, capacity, reward_dtype=dtype
        )
        assert calls == 0
        for before, after in ((before_nstep, nstep), (before_replay, replay)):
            for key in before:
                np.testing.assert_array_equal(after[key], before[key], err_msg=key)
