"""train.agent.replay: prioritised sampling, importance weights, the ring, n-step returns."""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.errors import InvalidInputError
from fxstore.train.agent.replay import NStepAccumulator, PrioritizedReplay

pytestmark = pytest.mark.quick


def filled_replay(
    priorities: list[float], *, alpha: float = 1.0, capacity: int | None = None, seed: int = 0
) -> PrioritizedReplay:
    """A replay holding one transition per priority; obs[i] = i, action = i."""
    n = len(priorities)
    replay = PrioritizedReplay(capacity or n, 1, alpha=alpha, eps=0.0, seed=seed)
    obs = np.arange(n, dtype=np.float32)[:, None]
    zeros = np.zeros(n, dtype=np.float32)
    replay.add(obs, np.arange(n), zeros, zeros, obs + 0.5)
    replay.update_priorities(np.arange(n), np.asarray(priorities, dtype=np.float32))
    return replay


def counts_of(replay: PrioritizedReplay, draws: int, batch: int) -> npt.NDArray[np.int64]:
    index = np.concatenate([replay.sample(batch, 0.4).index for _ in range(draws // batch)])
    return np.bincount(index, minlength=len(replay))


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0])
def test_sample_frequencies_follow_priority_power_alpha(alpha: float) -> None:
    priorities = [1.0, 2.0, 3.0, 4.0, 10.0]
    replay = filled_replay(priorities, alpha=alpha)
    draws = 50_000
    counts = counts_of(replay, draws, batch=50)
    expected = draws * np.power(priorities, alpha) / np.power(priorities, alpha).sum()
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square < 18.5  # 99.9% quantile of chi-square with 4 degrees of freedom


def test_sample_importance_weights_match_hand_formula() -> None:
    priorities = np.array([1.0, 2.0, 3.0, 4.0])
    replay = filled_replay(list(priorities))
    beta = 0.5
    batch = replay.sample(16, beta)
    probability = priorities[batch.index] / priorities.sum()
    raw = (len(priorities) * probability) ** -beta
    np.testing.assert_allclose(batch.weight, raw / raw.max(), rtol=1e-6)
    assert batch.weight.dtype == np.float32 and batch.index.dtype == np.int64


def test_sample_returns_the_stored_transitions_of_its_slots() -> None:
    replay = filled_replay([1.0, 1.0, 5.0])
    batch = replay.sample(9, 1.0)
    np.testing.assert_array_equal(batch.obs[:, 0], batch.index.astype(np.float32))
    np.testing.assert_array_equal(batch.next_obs[:, 0], batch.index + 0.5)
    np.testing.assert_array_equal(batch.action, batch.index)


def test_sample_stratified_covers_every_stratum_of_equal_mass() -> None:
    replay = filled_replay([1.0] * 8)
    np.testing.assert_array_equal(np.sort(replay.sample(8, 1.0).index), np.arange(8))


def test_add_past_capacity_wraps_around_oldest_first() -> None:
    replay = filled_replay([1.0, 1.0, 1.0], capacity=5)
    obs = np.arange(3, 7, dtype=np.float32)[:, None]
    zeros = np.zeros(4, dtype=np.float32)
    replay.add(obs, np.arange(3, 7), zeros, zeros, obs)
    assert len(replay) == 5
    np.testing.assert_array_equal(replay.obs[:, 0], [5, 6, 2, 3, 4])


def test_add_more_than_capacity_keeps_the_last_ones() -> None:
    replay = PrioritizedReplay(3, 1, alpha=1.0, eps=0.0)
    obs = np.arange(7, dtype=np.float32)[:, None]
    zeros = np.zeros(7, dtype=np.float32)
    replay.add(obs, np.arange(7), zeros, zeros, obs)
    assert len(replay) == 3
    np.testing.assert_array_equal(np.sort(replay.obs[:, 0]), [4, 5, 6])


def test_add_new_transitions_get_the_max_priority_seen() -> None:
    replay = filled_replay([1.0, 7.0, 2.0], alpha=0.5, capacity=4)
    one = np.zeros((1, 1), dtype=np.float32)
    replay.add(one, np.zeros(1), np.zeros(1, np.float32), np.zeros(1, np.float32), one)
    assert replay.priority[3] == pytest.approx(7.0**0.5)


def test_update_priorities_adds_eps_then_raises_to_alpha() -> None:
    replay = PrioritizedReplay(2, 1, alpha=0.5, eps=0.25)
    obs = np.zeros((2, 1), dtype=np.float32)
    replay.add(obs, np.zeros(2), np.zeros(2, np.float32), np.zeros(2, np.float32), obs)
    replay.update_priorities(np.array([0, 1]), np.array([0.0, 2.0], dtype=np.float32))
    np.testing.assert_allclose(replay.priority, [0.5, 1.5])


def test_sample_empty_replay_raises() -> None:
    replay = PrioritizedReplay(4, 2, alpha=0.6, eps=1e-6)
    message = "cannot sample 3 transitions from a replay holding 0; add transitions first"
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        replay.sample(3, 0.4)


def test_state_dict_round_trip_resumes_the_same_samples() -> None:
    replay = filled_replay([1.0, 2.0, 3.0, 4.0], seed=3)
    state = replay.state_dict()
    expected = [replay.sample(5, 0.5).index for _ in range(3)]
    restored = PrioritizedReplay(4, 1, alpha=1.0, eps=0.0, seed=99)
    restored.load_state_dict(state)
    for index in expected:
        np.testing.assert_array_equal(restored.sample(5, 0.5).index, index)


def test_state_dict_round_trip_gives_new_transitions_the_same_priority_bits() -> None:
    # alpha 0.6: numpy's float32 scalar and 0-d-array powers differ in the last bit for
    # many values (this one among them), which made a resumed training run drift.
    def fresh() -> PrioritizedReplay:
        return PrioritizedReplay(8, 1, alpha=0.6, eps=0.0, seed=0)

    replay = fresh()
    one = np.zeros(1, dtype=np.float32)
    replay.add(one[:, None], np.zeros(1), one, one, one[:, None])
    replay.update_priorities(
        np.zeros(1, dtype=np.int64), np.asarray([4.6753621101379395], dtype=np.float32)
    )
    restored = fresh()
    restored.load_state_dict(replay.state_dict())
    for buffer in (replay, restored):
        buffer.add(one[:, None], np.zeros(1), one, one, one[:, None])
    assert restored.priority.tobytes() == replay.priority.tobytes()


def test_load_state_dict_wrong_shape_raises_naming_the_key() -> None:
    state = filled_replay([1.0, 2.0]).state_dict()
    state["obs"] = np.zeros((3, 1), dtype=np.float32)
    message = "replay state 'obs' must have shape (2, 1), was (3, 1)."
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        PrioritizedReplay(2, 1, alpha=1.0, eps=0.0).load_state_dict(state)


def push_steps(accumulator: NStepAccumulator, steps: int) -> list[tuple[list[float], ...]]:
    """Env 0 earns 2**t and terminates at t = 1; env 1 earns 1 and never ends.

    obs of env e at step t is 10·e + t, next_obs that + 0.5, action t.
    """
    out = []
    for t in range(steps):
        obs = np.array([[t], [10 + t]], dtype=np.float32)
        reward = np.array([2.0**t, 1.0], dtype=np.float32)
        done = np.array([t == 1, False])
        got = accumulator.push(obs, np.array([t, t]), reward, done, obs + 0.5)
        out.append(
            (
                got.obs[:, 0].tolist(),
                got.reward.tolist(),
                got.discount.tolist(),
                got.next_obs[:, 0].tolist(),
                got.action.tolist(),
            )
        )
    return out


def test_nstep_push_returns_hand_computed_returns_across_done() -> None:
    got = push_steps(NStepAccumulator(2, 3, 0.5, 1), 5)
    assert got == [
        ([], [], [], [], []),
        # env 0 terminates: both open starts close, discount 0, no reward past t = 1
        ([0.0, 1.0], [1 + 0.5 * 2, 2.0], [0.0, 0.0], [1.5, 1.5], [0, 1]),
        ([10.0], [1.75], [0.125], [12.5], [0]),
        ([11.0], [1.75], [0.125], [13.5], [1]),
        # env 0's new episode (t = 2..4): 4 + 0.5·8 + 0.25·16
        ([2.0, 12.0], [12.0, 1.75], [0.125, 0.125], [4.5, 14.5], [2, 2]),
    ]


def test_nstep_one_step_is_the_plain_transition() -> None:
    accumulator = NStepAccumulator(1, 1, 0.9, 2)
    obs = np.ones((1, 2), dtype=np.float32)
    got = accumulator.push(obs, np.array([1]), np.array([3.0]), np.array([False]), obs * 2)
    assert got.reward.tolist() == [3.0]
    assert got.discount.tolist() == [pytest.approx(0.9)]
    np.testing.assert_array_equal(got.next_obs, obs * 2)


def test_nstep_push_wrong_obs_shape_raises() -> None:
    accumulator = NStepAccumulator(2, 3, 0.5, 4)
    obs = np.zeros((2, 3), dtype=np.float32)
    message = "`obs` and `next_obs` must have shape (2, 4), were (2, 3) and (2, 3)."
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        accumulator.push(obs, np.zeros(2), np.zeros(2), np.zeros(2, bool), obs)


def test_nstep_state_dict_round_trip_continues_the_same_transitions() -> None:
    accumulator = NStepAccumulator(2, 3, 0.5, 1)
    push_steps(accumulator, 2)
    restored = NStepAccumulator(2, 3, 0.5, 1)
    restored.load_state_dict(accumulator.state_dict())
    obs = np.array([[7.0], [8.0]], dtype=np.float32)
    args = (obs, np.array([1, 1]), np.array([1.0, 1.0]), np.array([False, False]), obs)
    for a, b in zip(accumulator.push(*args), restored.push(*args), strict=True):
        np.testing.assert_array_equal(a, b)


def test_sample_into_out_buffers_equals_a_fresh_batch() -> None:
    from fxstore.train.agent.replay import Batch

    drawn = [filled_replay([1.0, 2.0, 3.0, 4.0, 10.0], seed=s) for s in (3, 3)]
    fresh = drawn[0].sample(7, 0.4)
    out = Batch(
        *(np.full_like(x, -1) for x in fresh)  # same shapes and dtypes, other values
    )
    got = drawn[1].sample(7, 0.4, out=out)
    assert got is out
    for name in Batch._fields:
        np.testing.assert_array_equal(getattr(out, name), getattr(fresh, name), err_msg=name)


def test_sample_into_out_buffers_of_the_wrong_shape_is_refused() -> None:
    from fxstore.train.agent.replay import Batch

    replay = filled_replay([1.0, 2.0])
    good = replay.sample(4, 0.4)
    bad = good._replace(obs=np.zeros((4, 2), dtype=np.float32))
    message = (
        "sample `out.obs` must be a float32 array (rows of adjacent floats, obs's row stride) "
        "of shape (4, 1)"
    )
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        replay.sample(4, 0.4, out=bad)
    with pytest.raises(InvalidInputError, match=re.escape("`out.index` must be")):
        replay.sample(4, 0.4, out=good._replace(index=good.index.astype(np.int32)))
    assert isinstance(good, Batch)
    # obs and next_obs with different row strides (each a row view, but not of one layout)
    wide = np.zeros((4, 4), dtype=np.float32)[:, :1]
    with pytest.raises(InvalidInputError, match=re.escape("`out.next_obs` must be")):
        replay.sample(4, 0.4, out=good._replace(obs=wide))


def test_sample_into_row_views_of_padded_buffers_fills_only_their_columns() -> None:
    """The learner's obs buffers are row views of arrays padded for aligned GEMMs: the
    sample fills the view and leaves the padding as it was."""
    fresh = filled_replay([1.0, 2.0, 3.0]).sample(4, 0.4)
    padded = np.full((8, 4), 7.0, dtype=np.float32)
    out = fresh._replace(obs=padded[:4, :1], next_obs=padded[4:, :1])
    got = filled_replay([1.0, 2.0, 3.0]).sample(4, 0.4, out=out)  # same seed, same draw
    np.testing.assert_array_equal(got.obs, fresh.obs)
    np.testing.assert_array_equal(got.next_obs, fresh.next_obs)
    assert (padded[:, 1:] == 7.0).all()


@pytest.mark.parametrize(("n_step", "episode"), [(3, 5), (3, 2), (1, 4), (4, 4)])
def test_nstep_push_with_all_done_known_equals_the_general_push(n_step: int, episode: int) -> None:
    """Episodes that start and end together (VecEnv's): the host-known path gives the same
    transitions, in the same order, as the general one, and keeps doing so after a resume."""
    rng = np.random.default_rng(n_step * 10 + episode)
    n_envs, n_obs = 4, 3
    general = NStepAccumulator(n_envs, n_step, 0.9, n_obs)
    known = NStepAccumulator(n_envs, n_step, 0.9, n_obs)
    obs = rng.standard_normal((n_envs, n_obs)).astype(np.float32)
    for t in range(23):
        if t == 11:  # a resume in the middle of an episode
            restored = NStepAccumulator(n_envs, n_step, 0.9, n_obs)
            restored.load_state_dict(known.state_dict())
            known = restored
        ended = (t + 1) % (episode - 1) == 0 if episode > 1 else True
        done = np.full(n_envs, ended)
        action = rng.integers(0, 5, n_envs)
        reward = rng.standard_normal(n_envs).astype(np.float32)
        nxt = rng.standard_normal((n_envs, n_obs)).astype(np.float32)
        want = general.push(obs, action, reward, done, nxt)
        got = known.push(obs, action, reward, done, nxt, all_done=ended)
        for name, a, b in zip(want._fields, want, got, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype, name
            np.testing.assert_array_equal(a, b, err_msg=f"{name} at step {t}")
        obs = nxt


def test_sample_into_the_same_out_with_another_batch_size_is_refused() -> None:
    replay = filled_replay([1.0, 2.0, 3.0])
    out = replay.sample(4, 0.4)
    assert replay.sample(4, 0.4, out=out) is out  # checked, then remembered
    with pytest.raises(InvalidInputError, match=re.escape("of shape (5, 1)")):
        replay.sample(5, 0.4, out=out)


def test_nstep_push_into_adds_what_push_returns() -> None:
    """On numpy push_into is push then add: the same replay and the same windows after."""
    accumulators = [NStepAccumulator(3, 3, 0.5, 2) for _ in range(2)]
    replays = [PrioritizedReplay(7, 2, alpha=0.6, eps=1e-6) for _ in range(2)]  # ring wraps
    rng = np.random.default_rng(4)
    for t in range(9):
        obs = rng.standard_normal((3, 2)).astype(np.float32)
        action, reward = rng.integers(0, 3, 3), rng.standard_normal(3).astype(np.float32)
        done = np.full(3, t % 4 == 3) if t < 6 else np.array([t % 2 == 0, False, False])
        all_done = bool(done[0]) if t < 6 else None
        args = (obs, action, reward, done, obs + 1.0)
        replays[0].add(*accumulators[0].push(*args, all_done=all_done))
        accumulators[1].push_into(replays[1], *args, all_done=all_done)
    for a, b in ((x.state_dict(), y.state_dict()) for x, y in (accumulators, replays)):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert len(replays[1]) == 7


def test_nstep_push_into_wrong_obs_shape_raises_before_any_change() -> None:
    accumulator = NStepAccumulator(2, 3, 0.5, 4)
    replay = PrioritizedReplay(8, 4, alpha=0.6, eps=1e-6)
    obs = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(InvalidInputError, match=re.escape("must have shape (2, 4)")):
        accumulator.push_into(replay, obs, np.zeros(2), np.zeros(2), np.zeros(2, bool), obs)
    assert accumulator.state_dict()["t"] == 0 and len(replay) == 0


def test_one_kernel_paths_are_taken_for_cupy_arrays_only() -> None:
    """The CuPy-only kernels (write-back, push_into) check arrays' module, not an import."""
    from fxstore.train.agent.replay import _all_cupy

    fake = type("ndarray", (), {"__module__": "cupy._core.core"})()
    assert _all_cupy((fake, fake))
    assert not _all_cupy((fake, np.zeros(2)))
