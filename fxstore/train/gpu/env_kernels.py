"""CuPy fused kernels of :class:`fxstore.train.env.vecenv.VecEnv`: the GPU twin of its numpy step.

Only :class:`~fxstore.train.env.vecenv.VecEnv` imports this module, and only when the market's
arrays
are CuPy: it imports CuPy at import time. One launch per step (and per reset) does what the
numpy path spreads over ~40 array operations: per environment the book of ``env._book`` (cost,
move or roll legs, pnl, carried position), the close-out at the episode end, the reward, the
next row, the new start of a finished episode from the counter-based draw of
:func:`fxstore.train.gpu.rng.uniform` (splitmix64 re-done on uint64, bit for bit), and then,
block by block, the observation rows.

Float64 arithmetic follows the numpy expressions operation by operation, compiled without
fused multiply-adds (``--fmad=false``): every ``+ - * /`` is one IEEE round to nearest, as in
numpy, so the kernel books the same dollars to the last bit and draws the same starts.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Final, NamedTuple

import cupy
import numpy as np

from fxstore.train.gpu.inputs import CostArrays, MarketArrays
from fxstore.train.gpu.rng import CUDA_SOURCE, counter_base
from fxstore.train.gpu.xp import F32, F64, I64, Bool

if TYPE_CHECKING:
    from fxstore.config import EnvConfig

__all__ = ["CupyEnvKernels", "Stepped"]

logger = logging.getLogger(__name__)


_THREADS: Final = 128

# One thread per environment, FX_THREADS environments per block. Each thread books its env and
# leaves the env's next row and observed position in shared memory; after one barrier the
# block writes its observation rows together (consecutive threads, consecutive floats).
_SOURCE: Final = (
    CUDA_SOURCE
    + r"""
// VecEnv._restart's start row of env i: lo + min(floor(u * span), span - 1)
__device__ __forceinline__ i64 fx_start(u64 base, i64 i, i64 lo, i64 span) {
    const i64 draw = (i64)floor(fx_uniform(base, (u64)i) * (double)span);
    return (draw < span - 1 ? draw : span - 1) + lo;
}

// The block's `count` observation rows from env `first` on: features[row], then the position.
__device__ __forceinline__ void fx_observe(const float* features, i64 n_features,
                                           const i64* s_row, const float* s_pos, i64 first,
                                           i64 count, float* obs) {
    const i64 width = n_features + 1;
    float* out = obs + first * width;
    for (i64 k = threadIdx.x; k < count * width; k += blockDim.x) {
        const i64 e = k / width;
        const i64 j = k - e * width;
        out[k] = j < n_features ? features[s_row[e] * n_features + j] : s_pos[e];
    }
}

extern "C" __global__ void fx_env_reset(
    const float* features, u64 base, i64 n, i64 n_features, i64 lo, i64 span,
    i64 episode_bars, i64* t_out, i64* stop_out, double* held_out, float* obs) {
    __shared__ i64 s_row[FX_THREADS];
    __shared__ float s_pos[FX_THREADS];
    const i64 first = (i64)blockIdx.x * FX_THREADS;
    const i64 i = first + threadIdx.x;
    if (i < n) {
        const i64 start = fx_start(base, i, lo, span);
        t_out[i] = start;
        stop_out[i] = start + episode_bars - 1;
        held_out[i] = 0.0;
        s_row[threadIdx.x] = start;
        s_pos[threadIdx.x] = 0.0f;
    }
    __syncthreads();
    fx_observe(features, n_features, s_row, s_pos, first,
               n - first < FX_THREADS ? n - first : FX_THREADS, obs);
}

extern "C" __global__ void fx_env_step(
    const i64* t_in, const i64* stop_in, const double* held_in, const i64* action,
    const double* values, i64 n_actions, const double* close, const double* cost,
    const double* unit, const bool* is_roll, const float* features, u64 base, i64 n,
    i64 n_features, i64 lo, i64 span, i64 episode_bars, const double* multiplier,
    double max_position, int is_roll_mode, i64* t_out, i64* stop_out, double* held_out,
    float* obs, float* reward_out, double* pnl_out, bool* done_out) {
    __shared__ i64 s_row[FX_THREADS];
    __shared__ float s_pos[FX_THREADS];
    const i64 first = (i64)blockIdx.x * FX_THREADS;
    const i64 i = first + threadIdx.x;
    if (i < n) {
        // out-of-range actions wrap like CuPy's fancy index did (never a memory fault)
        i64 a = action[i] % n_actions;
        if (a < 0) a += n_actions;
        const double target = values[a];
        const double held = held_in[i];
        const i64 t = t_in[i];
        const i64 nxt = t + 1;
        const bool done = nxt == stop_in[i];
        const bool carry = !done && is_roll_mode;
        const bool roll = is_roll[nxt];
        // env._book, expression by expression
        const double move = target * (close[nxt] - close[t]) * multiplier[t];
        const double gross = roll ? 0.0 : move;
        const double at_roll = fabs(target) * (cost[t] + (carry ? cost[nxt] : 0.0));
        const double paid = fabs(target - held) * cost[t] + (roll ? at_roll : 0.0);
        const double carried = (carry || !roll) ? target : 0.0;
        // the last row of an episode closes the position out at that row's cost
        const double pnl = (gross - paid) - (done ? fabs(carried) * cost[nxt] : 0.0);
        pnl_out[i] = pnl;
        reward_out[i] = (float)(pnl / unit[t]);
        done_out[i] = done;
        i64 row = nxt;
        i64 stop = stop_in[i];
        double pos = carried;
        if (done) {
            row = fx_start(base, i, lo, span);
            stop = row + episode_bars - 1;
            pos = 0.0;
        }
        t_out[i] = row;
        stop_out[i] = stop;
        held_out[i] = pos;
        s_row[threadIdx.x] = row;
        s_pos[threadIdx.x] = (float)(pos / max_position);
    }
    __syncthreads();
    fx_observe(features, n_features, s_row, s_pos, first,
               n - first < FX_THREADS ? n - first : FX_THREADS, obs);
}
"""
)


@functools.cache
def _module() -> cupy.RawModule:
    """The env kernels, compiled once per process (and cached on disk by CuPy)."""
    logger.debug("compiling the VecEnv kernels")
    options = (f"-DFX_THREADS={_THREADS}", "--fmad=false", "--std=c++11")
    return cupy.RawModule(code=_SOURCE, options=options)


def _counter_base(key: int, counter: int) -> np.uint64:
    """What :func:`fxstore.train.gpu.rng.uniform` adds to ``i * golden`` for draw i of `counter`."""
    return np.uint64(counter_base(key, counter))


class Stepped(NamedTuple):
    """One fused step: the environments' new state and what the step returns."""

    t: I64
    stop: I64
    held: F64
    obs: F32
    reward: F32
    pnl: F64
    done: Bool


class CupyEnvKernels:
    """The fused reset and step of one VecEnv's market, costs and settings, on CuPy arrays.

    Pure in the state: both take the current arrays and return new ones (nothing is written in
    place), so references a caller holds (``VecEnv.rows``) never change under it.
    """

    def __init__(
        self,
        market: MarketArrays,
        costs: CostArrays,
        values: F64,
        config: EnvConfig,
        window: tuple[int, int],
        episode_bars: int,
    ) -> None:
        lo, hi = window
        self._features = cupy.ascontiguousarray(market.features, dtype=cupy.float32)
        self._close = cupy.ascontiguousarray(market.close, dtype=cupy.float64)
        self._is_roll = cupy.ascontiguousarray(market.is_roll, dtype=cupy.bool_)
        self._cost = cupy.ascontiguousarray(costs.cost, dtype=cupy.float64)
        self._unit = cupy.ascontiguousarray(costs.unit, dtype=cupy.float64)
        self._values = cupy.ascontiguousarray(values, dtype=cupy.float64)
        self._n_features = int(self._features.shape[1])
        self._multiplier = cupy.ascontiguousarray(costs.multiplier, dtype=cupy.float64)
        self._max_position = np.float64(config.max_position)
        self._is_roll_mode = np.int32(config.roll == "roll")
        self._lo = np.int64(lo)
        self._span = np.int64(hi - lo - episode_bars + 1)
        self._episode_bars = np.int64(episode_bars)
        self._reset_kernel = _module().get_function("fx_env_reset")
        self._step_kernel = _module().get_function("fx_env_step")

    def _new_state(self, n: int) -> tuple[I64, I64, F64, F32]:
        return (
            cupy.empty(n, dtype=cupy.int64),
            cupy.empty(n, dtype=cupy.int64),
            cupy.empty(n, dtype=cupy.float64),
            cupy.empty((n, self._n_features + 1), dtype=cupy.float32),
        )

    def reset(self, key: int, counter: int, n_envs: int) -> tuple[I64, I64, F64, F32]:
        """Fresh episodes for all `n_envs` from draw `counter`: ``(t, stop, held, obs)``."""
        t, stop, held, obs = self._new_state(n_envs)
        args = (
            self._features,
            _counter_base(key, counter),
            np.int64(n_envs),
            np.int64(self._n_features),
            self._lo,
            self._span,
            self._episode_bars,
            t,
            stop,
            held,
            obs,
        )
        self._reset_kernel(_grid(n_envs), (_THREADS,), args)
        return t, stop, held, obs

    def step(self, t: I64, stop: I64, held: F64, action: I64, key: int, counter: int) -> Stepped:
        """Trade every env to ``values[action]`` and move it on; restarts use draw `counter`."""
        n = int(t.shape[0])
        is_ready = isinstance(action, cupy.ndarray) and action.dtype == cupy.int64
        if not is_ready or not action.flags.c_contiguous:
            action = cupy.ascontiguousarray(action, dtype=cupy.int64)  # one more launch
        t_out, stop_out, held_out, obs = self._new_state(n)
        reward = cupy.empty(n, dtype=cupy.float32)
        pnl = cupy.empty(n, dtype=cupy.float64)
        done = cupy.empty(n, dtype=cupy.bool_)
        args = (
            t,
            stop,
            held,
            action,
            self._values,
            np.int64(self._values.shape[0]),
            self._close,
            self._cost,
            self._unit,
            self._is_roll,
            self._features,
            _counter_base(key, counter),
            np.int64(n),
            np.int64(self._n_features),
            self._lo,
            self._span,
            self._episode_bars,
            self._multiplier,
            self._max_position,
            self._is_roll_mode,
            t_out,
            stop_out,
            held_out,
            obs,
            reward,
            pnl,
            done,
        )
        self._step_kernel(_grid(n), (_THREADS,), args)
        return Stepped(t_out, stop_out, held_out, obs, reward, pnl, done)


def _grid(n: int) -> tuple[int]:
    return ((n + _THREADS - 1) // _THREADS,)
