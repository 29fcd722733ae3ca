"""Prioritised experience replay and the n-step return accumulator, on numpy or CuPy.

:class:`PrioritizedReplay` (Schaul et al. 2016, proportional variant) keeps a ring buffer of
transitions on the array module it was given. Sampling needs no sequential sum tree: a float64
cumulative sum of ``priority ** alpha`` and a ``searchsorted`` of one stratified uniform per
stratum pick the slots in one pass, deterministically. The uniforms come from a host numpy
generator, so a seed samples the same slots on the CPU and on a GPU (up to float rounding of
the cumulative sum, which the GPU takes in blocks: :mod:`fxstore.train.gpu.replay_kernels`),
and its state is checkpointed with the buffer.

:class:`NStepAccumulator` turns the per-step transitions of parallel environments into n-step
transitions ``(s_t, a_t, R_t, gamma**n, s_{t+n})``, cut at episode ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias, cast

import numpy as np
import numpy.typing as npt

from fxstore.errors import InvalidInputError
from fxstore.train.agent.checkpoint import check_state
from fxstore.train.gpu.xp import to_host

if TYPE_CHECKING:
    from fxstore.train.gpu.replay_kernels import DeviceSampler

__all__ = [
    "Batch",
    "NStepAccumulator",
    "PrioritizedReplay",
    "Transitions",
    "fused_write_back",
]

logger = logging.getLogger(__name__)

#: A numpy or CuPy array (CuPy has no stubs: typed as its numpy twin).
Array: TypeAlias = npt.NDArray[np.generic]
F32: TypeAlias = npt.NDArray[np.float32]
I64: TypeAlias = npt.NDArray[np.int64]


class Batch(NamedTuple):
    """A sampled batch of n-step transitions, on the replay's array module."""

    obs: F32
    """(B, n_obs) float32 observations s_t."""
    action: I64
    """(B,) int64 actions a_t."""
    reward: F32
    """(B,) float32 n-step discounted reward sum_k gamma**k r_{t+k}."""
    discount: F32
    """(B,) float32 gamma**n, 0.0 where the episode ended inside the n steps."""
    next_obs: F32
    """(B, n_obs) float32 observations s_{t+n} (any value where discount is 0)."""
    weight: F32
    """(B,) float32 importance weights, max 1 (1.0 for uniform sampling)."""
    index: I64  # type: ignore[assignment]  # shadows tuple.index: the name is the API
    """(B,) int64 replay slots, for :meth:`PrioritizedReplay.update_priorities`."""


class Transitions(NamedTuple):
    """Completed n-step transitions, ready for :meth:`PrioritizedReplay.add`."""

    obs: F32
    """(n, n_obs) float32."""
    action: I64
    """(n,) int64."""
    reward: F32
    """(n,) float32 discounted reward sum over the (up to n) steps."""
    discount: F32
    """(n,) float32 gamma**n, or 0.0 when the episode terminated inside the window."""
    next_obs: F32
    """(n, n_obs) float32."""


_STATE_KEYS = ("obs", "action", "reward", "discount", "next_obs", "priority")


def _dense_rows(x: Array, like: Array) -> bool:
    """`x` (rows, n) holds each row's n floats adjacent, rows at least n apart, and shares
    `like`'s row stride (a row view of a padded buffer qualifies)."""
    return bool(
        x.ndim == 2
        and x.strides[1] == x.itemsize
        and x.strides[0] >= x.shape[1] * x.itemsize
        and x.strides[0] == like.strides[0]
    )


def fused_write_back(replay: PrioritizedReplay, index: Array, priority: Array) -> bool:
    """Whether ``replay.update_priorities(index, priority)`` runs as one kernel on the
    device (CuPy, contiguous int64 slots and float32 priorities of one length), updating
    the replay's buffers in place: what a captured CUDA graph needs."""
    return replay.xp is not np and _fused_write(index, priority, replay.max_priority)


def _targets(out: Batch) -> tuple[Array, Array, Array, Array, Array, Array, Array]:
    """`out`'s buffers in the device sampler's order."""
    return (
        out.obs, out.next_obs, out.action, out.reward, out.discount, out.weight, out.index
    )  # fmt: skip


def _all_cupy(arrays: tuple[Array, ...]) -> bool:
    """Whether every array is a CuPy array (checked without importing CuPy)."""
    return all(type(x).__module__.split(".")[0] == "cupy" for x in arrays)


def _fused_write(index: Array, priority: Array, max_priority: Array) -> bool:
    """Whether CuPy's priority write-back can run as one kernel: CuPy arrays of contiguous
    int64 slots and float32 priorities of one length, and the running maximum a float32 0-d
    one (updated in place)."""
    arrays = (index, priority, max_priority)
    return bool(
        _all_cupy(arrays)
        and index.dtype == np.int64
        and priority.dtype == np.float32
        and max_priority.dtype == np.float32
        and index.ndim == 1
        and priority.shape == index.shape
        and max_priority.shape == ()
        and index.flags.c_contiguous
        and priority.flags.c_contiguous
    )


class PrioritizedReplay:
    """A ring buffer of transitions sampled in proportion to ``priority ** alpha``.

    Parameters
    ----------
    capacity
        Transitions kept; the oldest are overwritten first.
    n_obs
        Observation width.
    alpha
        Priority exponent (0 samples uniformly).
    eps
        Added to every priority given to :meth:`update_priorities`, so none is 0.
    xp
        Array module of the storage (numpy or cupy).
    seed
        Seed of the sampling uniforms.
    """

    def __init__(
        self,
        capacity: int,
        n_obs: int,
        *,
        alpha: float,
        eps: float,
        xp: ModuleType = np,
        seed: int = 0,
    ) -> None:
        if capacity < 1 or n_obs < 1:
            raise InvalidInputError(
                f"`capacity` and `n_obs` must be >= 1, were {capacity} and {n_obs}."
            )
        self.capacity, self.n_obs, self.alpha, self.eps = int(capacity), int(n_obs), alpha, eps
        self.xp = xp
        self.obs = xp.zeros((capacity, n_obs), dtype=xp.float32)
        self.next_obs = xp.zeros((capacity, n_obs), dtype=xp.float32)
        self.action = xp.zeros(capacity, dtype=xp.int64)
        self.reward = xp.zeros(capacity, dtype=xp.float32)
        self.discount = xp.zeros(capacity, dtype=xp.float32)
        self.priority = xp.zeros(capacity, dtype=xp.float32)
        """(capacity,) float32 ``priority ** alpha`` of each slot (0 for empty slots)."""
        self._max_priority: Any = xp.ones((), dtype=xp.float32)  # raw, before ** alpha
        self._pos = 0
        self._size = 0
        self._rng = np.random.default_rng(seed)
        self._sampler: DeviceSampler | None = None  # CuPy: made at the first sample
        self._checked_out: tuple[Batch, int] | None = None  # last good (out, batch_size)

    def __len__(self) -> int:
        return self._size

    @property
    def max_priority(self) -> Array:
        """The largest raw priority (before ``** alpha``) written so far, 0-d: what
        :meth:`add` gives new transitions. On CuPy a device array, which the one-kernel
        priority write-back updates in place."""
        return cast(Array, self._max_priority)

    def add(
        self, obs: Array, action: Array, reward: Array, discount: Array, next_obs: Array
    ) -> None:
        """Store a batch of n transitions (arrays as in :class:`Transitions`) at max priority.

        When n exceeds the capacity only the last `capacity` are kept.
        """
        xp = self.xp
        n = int(action.shape[0])
        if obs.shape != (n, self.n_obs) or next_obs.shape != (n, self.n_obs):
            raise InvalidInputError(
                f"`obs` and `next_obs` must have shape ({n}, {self.n_obs}), were "
                f"{tuple(obs.shape)} and {tuple(next_obs.shape)}."
            )
        if reward.shape != (n,) or discount.shape != (n,):
            raise InvalidInputError(
                f"`reward` and `discount` must have shape ({n},), were "
                f"{tuple(reward.shape)} and {tuple(discount.shape)}."
            )
        if n == 0:
            return
        keep = slice(max(n - self.capacity, 0), n)
        n_keep = keep.stop - keep.start
        slots = (self._claim(n_keep) + xp.arange(n_keep)) % self.capacity
        self.obs[slots] = xp.asarray(obs[keep], dtype=xp.float32)
        self.next_obs[slots] = xp.asarray(next_obs[keep], dtype=xp.float32)
        self.action[slots] = xp.asarray(action[keep], dtype=xp.int64)
        self.reward[slots] = xp.asarray(reward[keep], dtype=xp.float32)
        self.discount[slots] = xp.asarray(discount[keep], dtype=xp.float32)
        self.priority[slots] = self._max_priority**self.alpha

    def _claim(self, n: int) -> int:
        """Move the ring on by `n` (<= capacity) new transitions; return the first's slot."""
        pos = self._pos
        self._pos = (pos + n) % self.capacity
        self._size = min(self._size + n, self.capacity)
        return pos

    def sample(self, batch_size: int, beta: float, out: Batch | None = None) -> Batch:
        """Draw `batch_size` slots with probability P(i) = p_i / sum p (stratified).

        Stratum k of the cumulative priority mass holds one uniform draw, so the batch covers
        the mass evenly. Importance weights are ``(N · P(i)) ** -beta / max_batch``.

        With `out` (float32 obs, next_obs, reward, discount, weight, int64 action and index,
        on this replay's array module, C-contiguous but for obs and next_obs, which may be row
        views of wider arrays: e.g. the learner's own padded input buffers),
        the batch is written there and `out` is returned. On CuPy the draw is four kernels
        with no wait for the device (:mod:`fxstore.train.gpu.replay_kernels`).

        Raises
        ------
        InvalidInputError
            The buffer is empty, `batch_size` < 1, or `out` has other shapes or dtypes.
        """
        xp = self.xp
        strata = self._strata(batch_size, out)
        if xp is not np:
            if out is None:
                out = self._empty_batch(batch_size)
            self._device_sampler().sample(
                self.priority, strata, self._size, beta, self._storage(), _targets(out)
            )
            return out
        cumulative = np.cumsum(self.priority[: self._size], dtype=np.float64)
        total = cumulative[-1]
        found = np.searchsorted(cumulative, strata * total, side="right")
        index = np.minimum(found, self._size - 1)
        probability = self.priority[index].astype(np.float64) / total
        weight = (self._size * probability) ** (-beta)
        weight = (weight / weight.max()).astype(np.float32)
        index = index.astype(np.int64)
        drawn = Batch(
            obs=self.obs[index],
            action=self.action[index],
            reward=self.reward[index],
            discount=self.discount[index],
            next_obs=self.next_obs[index],
            weight=weight,
            index=index,
        )
        if out is None:
            return drawn
        for name in Batch._fields:
            getattr(out, name)[...] = getattr(drawn, name)
        return out

    def _empty_batch(self, size: int) -> Batch:
        xp = self.xp
        return Batch(
            obs=xp.empty((size, self.n_obs), dtype=xp.float32),
            action=xp.empty(size, dtype=xp.int64),
            reward=xp.empty(size, dtype=xp.float32),
            discount=xp.empty(size, dtype=xp.float32),
            next_obs=xp.empty((size, self.n_obs), dtype=xp.float32),
            weight=xp.empty(size, dtype=xp.float32),
            index=xp.empty(size, dtype=xp.int64),
        )

    def _check_out(self, out: Batch, size: int) -> None:
        for name in Batch._fields:
            got = getattr(out, name)
            rows = name in ("obs", "next_obs")
            want = (size, self.n_obs) if rows else (size,)
            kind = np.int64 if name in ("action", "index") else np.float32
            if (
                not isinstance(got, self.xp.ndarray)
                or tuple(got.shape) != want
                or got.dtype != kind
                or not (_dense_rows(got, out.obs) if rows else got.flags.c_contiguous)
            ):
                layout = "rows of adjacent floats, obs's row stride" if rows else "C-contiguous"
                raise InvalidInputError(
                    f"sample `out.{name}` must be a {np.dtype(kind).name} array ({layout}) "
                    f"of shape {want} on the replay's device, was {type(got).__name__} "
                    f"{getattr(got, 'dtype', '?')} {tuple(getattr(got, 'shape', ()))}."
                )

    def stage_sample(self, batch_size: int, beta: float, out: Batch) -> None:
        """On CuPy, the host's part of ``sample(batch_size, beta, out=out)``: the checks, the
        stratified uniforms (the same draws as :meth:`sample`) and their copy to the device,
        queued. :meth:`launch_sample` then draws the batch on the device with no host work,
        so a CUDA graph may capture it (``fxstore.train.agent.learner.LearnerStep`` does)."""
        if self.xp is np:
            raise TypeError("stage_sample is for a replay on CuPy; use sample")
        strata = self._strata(batch_size, out)
        self._device_sampler().stage(strata, self._size, beta)

    def launch_sample(self, batch_size: int, out: Batch) -> None:
        """On CuPy, the device's part of the :meth:`stage_sample` before it (same `out`)."""
        self._device_sampler().launch(self.priority, batch_size, self._storage(), _targets(out))

    def _strata(self, batch_size: int, out: Batch | None) -> npt.NDArray[np.float64]:
        """The checks of a draw of `batch_size` (into `out`) and its stratified uniforms."""
        if self._size == 0 or batch_size < 1:
            raise InvalidInputError(
                f"cannot sample {batch_size} transitions from a replay holding {self._size}; "
                "add transitions first (and ask for >= 1)."
            )
        strata = (np.arange(batch_size) + self._rng.random(batch_size)) / batch_size
        checked = self._checked_out
        if out is not None and (
            checked is None or checked[0] is not out or checked[1] != batch_size
        ):
            self._check_out(out, batch_size)
            self._checked_out = (out, batch_size)  # the learner passes the same out each time
        return strata

    def _device_sampler(self) -> DeviceSampler:
        if self._sampler is None:
            from fxstore.train.gpu.replay_kernels import DeviceSampler

            self._sampler = DeviceSampler(self.capacity)
        return self._sampler

    def _storage(self) -> tuple[Array, Array, Array, Array, Array]:
        return self.obs, self.next_obs, self.action, self.reward, self.discount

    def update_priorities(self, index: Array, priority: Array) -> None:
        """Set the priorities of slots `index` (B,) to ``(priority + eps) ** alpha``.

        A slot drawn twice gets the same priority from both draws (same transition, same
        network), so it does not matter which write lands.
        """
        xp = self.xp
        if fused_write_back(self, index, priority):
            from fxstore.train.gpu.replay_kernels import write_priorities

            write_priorities(
                self.priority, index, priority, self.eps, self.alpha, self._max_priority
            )
            return
        raw = xp.asarray(priority, dtype=xp.float32) + xp.float32(self.eps)
        self.priority[index] = raw**self.alpha
        self._max_priority = xp.maximum(self._max_priority, raw.max())

    def state_dict(self) -> dict[str, npt.NDArray[np.generic]]:
        """The buffer, its position and the sampling generator's state, as host arrays."""
        state = {key: to_host(getattr(self, key), copy=True) for key in _STATE_KEYS}
        bits = self._rng.bit_generator.state
        state["rng"] = np.array(
            [
                bits["state"]["state"] >> 64,
                bits["state"]["state"] & (2**64 - 1),
                bits["state"]["inc"] >> 64,
                bits["state"]["inc"] & (2**64 - 1),
                bits["has_uint32"],
                bits["uinteger"],
            ],
            dtype=np.uint64,
        )
        state["max_priority"] = np.asarray(to_host(self._max_priority, copy=True), dtype=np.float32)
        state["position"] = np.array([self._pos, self._size], dtype=np.int64)
        return state

    def load_state_dict(self, state: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Restore what :meth:`state_dict` returned (for a buffer of the same shape).

        Raises
        ------
        InvalidInputError
            A key is missing or has the wrong shape; the message names it.
        """
        shapes: dict[str, tuple[int, ...]] = {
            key: tuple(getattr(self, key).shape) for key in _STATE_KEYS
        }
        shapes |= {"rng": (6,), "max_priority": (), "position": (2,)}
        check_state("replay state", state, shapes)
        position = np.asarray(state["position"])
        if not 0 <= position[1] <= self.capacity or not 0 <= position[0] < self.capacity:
            raise InvalidInputError(f"replay state 'position' is out of range: {position}.")
        for key in _STATE_KEYS:
            getattr(self, key)[...] = self.xp.asarray(state[key])
        # `[()]`: numpy's scalar, as `update_priorities` leaves it (cupy: a 0-d array, as
        # there). numpy's scalar and 0-d-array float32 powers differ in the last bit for
        # many values (tests/train/test_replay.py holds one), so a 0-d array here would make
        # a resumed run drift.
        max_priority = self.xp.asarray(state["max_priority"], dtype=self.xp.float32)[()]
        if self.xp is np:
            self._max_priority = max_priority
        else:  # in place: a captured learner step (fxstore.train.agent.learner) reads it there
            self._max_priority[...] = max_priority
        self._pos, self._size = int(position[0]), int(position[1])
        words = [int(w) for w in np.asarray(state["rng"], dtype=np.uint64)]
        self._rng.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": (words[0] << 64) | words[1], "inc": (words[2] << 64) | words[3]},
            "has_uint32": words[4],
            "uinteger": words[5],
        }


class NStepAccumulator:
    """Turn per-step transitions of `n_envs` parallel environments into n-step transitions.

    Each :meth:`push` of step t returns the transitions that are complete at t:

    - an environment whose episode goes on yields the transition that started n - 1 steps ago:
      ``R = sum_{k<n} gamma**k r_{t-n+1+k}``, discount ``gamma**n``, next_obs ``s_{t+1}``;
    - an environment whose episode ended at t (``done``) yields every transition still open in
      that episode (up to n, the oldest first), each with the reward summed up to t and
      discount 0, so no return crosses the episode boundary. Its window is then emptied: the
      next push for that environment starts a new episode (environments auto-reset).

    ``done`` means termination (the value after it is 0). The order of the output is
    environment by environment, oldest start first within one.

    Parameters
    ----------
    n_envs
        Parallel environments (the leading axis of every push).
    n_step
        Steps per transition (n >= 1).
    gamma
        Discount per step.
    n_obs
        Observation width.
    xp
        Array module of the pushed arrays and the output.
    """

    def __init__(
        self, n_envs: int, n_step: int, gamma: float, n_obs: int, xp: ModuleType = np
    ) -> None:
        if n_envs < 1 or n_step < 1 or n_obs < 1:
            raise InvalidInputError(
                f"`n_envs`, `n_step` and `n_obs` must be >= 1, were {n_envs}, {n_step}, {n_obs}."
            )
        self.n_envs, self.n_step, self.gamma, self.n_obs, self.xp = (
            n_envs,
            n_step,
            gamma,
            n_obs,
            xp,
        )
        self._obs = xp.zeros((n_step, n_envs, n_obs), dtype=xp.float32)
        self._action = xp.zeros((n_step, n_envs), dtype=xp.int64)
        self._reward = xp.zeros((n_step, n_envs), dtype=xp.float32)
        self._pending = xp.zeros(n_envs, dtype=xp.int64)  # open steps of each env, < n_step
        # the same open count of every env, known on the host (None: not known to be equal)
        self._open: int | None = 0
        self._index_cache: dict[tuple[int, ...], Array] = {}
        self._t = 0
        # _gain[k, a]: weight of the reward a steps old in the return of the start k steps old
        ages = np.arange(n_step)
        power = (ages[:, None] - ages[None, :]).astype(np.float64)
        gain = np.where(power >= 0, float(gamma) ** np.maximum(power, 0), 0.0)
        self._gain = xp.asarray(gain, dtype=xp.float32)
        self._discount_n = np.float32(float(gamma) ** n_step)

    def push(
        self,
        obs: Array,
        action: Array,
        reward: Array,
        done: Array,
        next_obs: Array,
        *,
        all_done: bool | None = None,
    ) -> Transitions:
        """Record one step of every environment; return the n-step transitions it completes.

        Parameters
        ----------
        obs, next_obs
            (n_envs, n_obs) float32 observations before and after the step.
        action
            (n_envs,) int actions taken.
        reward
            (n_envs,) float rewards of the step.
        done
            (n_envs,) bool: the episode terminated at this step.
        all_done
            The caller knows `done` is all this value (episodes that start and end together,
            as :class:`fxstore.train.env.vecenv.VecEnv`'s): which transitions complete is then
            known on the host, and the push waits for no device (otherwise picking them
            reads the device once). The output is the same.
        """
        xp, n = self.xp, self.n_step
        self._check_obs(obs, next_obs)
        slot = self._t % n
        self._obs[slot] = obs
        self._action[slot] = action
        self._reward[slot] = reward
        self._t += 1
        if all_done is not None and self._open is not None:
            return self._push_uniform(slot, all_done, next_obs)
        self._pending += 1
        done = xp.asarray(done, dtype=bool)
        # age k = the transition that started k steps ago (k = 0: this step)
        slots = (slot - np.arange(n)) % n
        rewards = self._reward[slots]  # (n, n_envs), by age
        returns = self._gain @ rewards  # (n, n_envs): return of the start k steps old
        ages = xp.arange(n)[:, None]
        emit = (ages < self._pending[None, :]) & (done[None, :] | (ages == n - 1))
        discount = xp.where(done, xp.float32(0.0), self._discount_n).astype(xp.float32)
        # env-major order, oldest first: transpose to (n_envs, n) and reverse the age axis
        emit_t = emit.T[:, ::-1]
        env, age = xp.nonzero(emit_t)
        age = n - 1 - age
        self._pending = xp.where(done, 0, xp.minimum(self._pending, n - 1))
        self._open = None  # per-env counts may differ now
        start = xp.asarray(slots)[age]
        return Transitions(
            obs=self._obs[start, env],
            action=self._action[start, env],
            reward=returns[age, env],
            discount=discount[env],
            next_obs=xp.asarray(next_obs, dtype=xp.float32)[env],
        )

    def push_into(
        self,
        replay: PrioritizedReplay,
        obs: Array,
        action: Array,
        reward: Array,
        done: Array,
        next_obs: Array,
        *,
        all_done: bool | None = None,
    ) -> None:
        """``replay.add(*self.push(...))`` (arguments as :meth:`push`), the same state after.

        On CuPy, when every environment's window holds the same open steps and `all_done` is
        given (the training loop's case), one kernel writes the completed transitions
        straight into the replay's slots and this step into the window
        (``fx_nstep_add`` in :mod:`fxstore.train.gpu.replay_kernels`): one launch where push
        and add took about 25 CuPy calls (14 and 10, counted from the code). Otherwise it
        is push, then add.
        """
        self._check_obs(obs, next_obs)
        if all_done is None or not self._fusable(replay, obs, action, reward, next_obs):
            replay.add(*self.push(obs, action, reward, done, next_obs, all_done=all_done))
            return
        from fxstore.train.gpu.replay_kernels import nstep_add

        slot = self._t % self.n_step
        self._t += 1
        ages = self._uniform_ages(all_done)
        k = len(ages)
        discount = 0.0 if all_done else float(self._discount_n)
        assert self._open is not None
        nstep_add(
            (obs, action, reward, next_obs),
            (self._obs, self._action, self._reward, self._pending, self._gain),
            (self._open, slot, k, ages[0] if ages else 0, self.n_step, discount),
            (*replay._storage(), replay.priority),
            replay.max_priority,
            replay.alpha,
            replay._claim(k * self.n_envs),
        )

    def _fusable(
        self, replay: PrioritizedReplay, obs: Array, action: Array, reward: Array, next_obs: Array
    ) -> bool:
        """Whether :meth:`push_into` can run as one kernel (see there)."""
        if self.xp is np or replay.xp is not self.xp or self._open is None:
            return False
        arrays = (obs, action, reward, next_obs, replay.max_priority)
        dtypes = (np.float32, np.int64, np.float32, np.float32, np.float32)
        return bool(
            replay.n_obs == self.n_obs
            and self.n_step * self.n_envs <= replay.capacity
            and _all_cupy(arrays)
            and all(x.dtype == d for x, d in zip(arrays, dtypes, strict=True))
            and action.shape == (self.n_envs,)
            and reward.shape == (self.n_envs,)
            and replay.max_priority.shape == ()
            and all(x.flags.c_contiguous for x in arrays[:4])
        )

    def _check_obs(self, obs: Array, next_obs: Array) -> None:
        if obs.shape != (self.n_envs, self.n_obs) or next_obs.shape != obs.shape:
            raise InvalidInputError(
                f"`obs` and `next_obs` must have shape ({self.n_envs}, {self.n_obs}), were "
                f"{tuple(obs.shape)} and {tuple(next_obs.shape)}."
            )

    def _uniform_ages(self, all_done: bool) -> list[int]:
        """The ages a push emits, oldest first, when every environment holds ``_open`` open
        steps and its `done` is `all_done`; ``_open`` moves on to the count after it."""
        n = self.n_step
        assert self._open is not None
        pending = self._open + 1  # open steps of every env, this one included
        # all open ones at an episode's end, else the n-1 old one once the window is full
        ages = list(range(pending - 1, -1, -1)) if all_done else [n - 1] * (pending == n)
        self._open = 0 if all_done else min(pending, n - 1)
        return ages

    def _push_uniform(self, slot: int, all_done: bool, next_obs: Array) -> Transitions:
        """:meth:`push`'s output when every environment's `done` is `all_done` and all hold
        the same number of open steps (``_open``, on the host): no device read."""
        xp, n = self.xp, self.n_step
        ages = self._uniform_ages(all_done)
        self._pending.fill(self._open)  # kept for state_dict: every env's count
        k = len(ages)
        by_age = self._indices((slot - np.arange(n)) % n)
        slots = self._indices(np.array([(slot - age) % n for age in ages], dtype=np.int64))
        returns = (self._gain @ self._reward[by_age])[self._indices(np.array(ages, np.int64))]
        discount = np.float32(0.0) if all_done else self._discount_n
        return Transitions(
            obs=self._obs[slots].transpose(1, 0, 2).reshape(k * self.n_envs, self.n_obs),
            action=self._action[slots].T.reshape(-1),
            reward=returns.T.reshape(-1),
            discount=xp.full(k * self.n_envs, discount, dtype=xp.float32),
            next_obs=xp.repeat(xp.asarray(next_obs, dtype=xp.float32), k, axis=0),
        )

    def _indices(self, index: npt.NDArray[np.int64]) -> Array:
        """`index` on the array module, copied there once (a host list would be copied, and
        on a GPU waited for, at every push)."""
        key = tuple(int(i) for i in index)
        found = self._index_cache.get(key)
        if found is None:
            found = self._index_cache[key] = self.xp.asarray(index, dtype=self.xp.int64)
        return found

    def state_dict(self) -> dict[str, npt.NDArray[np.generic]]:
        """The open windows of every environment, as host arrays (for an exact resume)."""
        state = {key: to_host(getattr(self, f"_{key}"), copy=True) for key in _NSTEP_KEYS}
        state["t"] = np.array(self._t, dtype=np.int64)
        return state

    def load_state_dict(self, state: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Restore what :meth:`state_dict` returned (same n_envs, n_step and n_obs).

        Raises
        ------
        InvalidInputError
            A key is missing or has the wrong shape; the message names it.
        """
        shapes = {key: tuple(getattr(self, f"_{key}").shape) for key in _NSTEP_KEYS}
        check_state("n-step state", state, shapes | {"t": ()})
        for key in _NSTEP_KEYS:
            getattr(self, f"_{key}")[...] = self.xp.asarray(state[key])
        self._t = int(np.asarray(state["t"]))
        pending = np.asarray(state["pending"])
        same = pending.size > 0 and bool((pending == pending[0]).all())
        self._open = int(pending[0]) if same else None


_NSTEP_KEYS = ("obs", "action", "reward", "pending")
