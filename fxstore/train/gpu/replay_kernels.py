"""The prioritised replay's sampling on CuPy in four kernels and no host wait.

Only :class:`fxstore.train.agent.replay.PrioritizedReplay` imports this module, and only for CuPy
storage: it imports CuPy at import time. It draws what the numpy reference draws
(``PrioritizedReplay.sample``): the slot of stratum k is the first whose cumulative priority
mass exceeds ``(k + u_k) / B`` of the total (``searchsorted(..., side="right")``), clamped to
the filled part, with importance weights ``(N P(i)) ** -beta`` over the batch's largest. The
cumulative sums are taken in float64 in blocks instead of one running sum, so a slot can
differ from numpy's only where a stratum's target falls within float64 rounding of a slot's
boundary.

The kernels:

1. ``fx_block_sums``: the float64 sum of each block of ``BLOCK`` priorities (a fixed-order
   tree, so it repeats bit for bit).
2. ``fx_scan_blocks``: one thread block turns them into inclusive prefix sums.
3. ``fx_sample``: one warp per stratum finds its block by binary search on the prefix sums,
   then its slot by a warp-wide scan of that block, and copies the transition (obs and
   next_obs one lane per column) straight into the caller's buffers; each thread block
   takes the smallest priority it drew into the batch's (an atomic minimum of the
   float32's bits, which order positive floats: the same result in any order).
4. ``fx_weights``: one thread per stratum writes the normalised importance weight.

The host's part is drawing the uniforms (numpy's generator, so a seed samples the same slots
on the CPU and on a GPU) into a pinned buffer, whose copy to the device is queued on the
stream: nothing waits for the device. A ring of pinned buffers, each released by an event
once its copy ran, keeps the host from overwriting uniforms not yet copied.

Two more kernels serve the training loop's other replay calls: ``fx_write_priorities`` (the
priority write-back) and ``fx_nstep_add`` (an n-step push whose transitions go straight into
the replay, :meth:`fxstore.train.agent.replay.NStepAccumulator.push_into`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import cupy
import numpy as np

__all__ = ["BLOCK", "DeviceSampler", "nstep_add", "write_priorities"]

#: Priorities per block of the two-level cumulative sum (one warp scans one block: at 1,024
#: the scan took a stratum's warp up to 32 steps and the sampling kernel 38 µs of the
#: learner step at batch 16,384 on the H200, `bench/diag_update_kernels.py --learner-step`).
BLOCK: Final = 256
_RING: Final = 8  # pinned uniform buffers in flight
_THREADS: Final = 256

_SRC: Final = r"""
#define BLOCK 256
#define THREADS 256

extern "C" __global__ void fx_block_sums(const float* __restrict__ p, long long n,
                                         double* __restrict__ sums) {
    __shared__ double part[THREADS];
    const long long base = (long long)blockIdx.x * BLOCK;
    double s = 0.0;
    for (int i = threadIdx.x; i < BLOCK; i += THREADS) {
        const long long j = base + i;
        if (j < n) s += (double)p[j];
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = part[0];
}

// One block: inclusive prefix sums of `nb` block sums, THREADS at a time (Hillis-Steele);
// also resets the batch's smallest priority (float32 bits) to +inf for fx_sample.
extern "C" __global__ void fx_scan_blocks(double* __restrict__ sums, long long nb,
                                          unsigned int* __restrict__ min_bits) {
    __shared__ double buf[THREADS];
    __shared__ double carry;
    if (threadIdx.x == 0) {
        carry = 0.0;
        *min_bits = 0x7f800000u;
    }
    __syncthreads();
    for (long long start = 0; start < nb; start += THREADS) {
        const long long j = start + threadIdx.x;
        buf[threadIdx.x] = j < nb ? sums[j] : 0.0;
        __syncthreads();
        for (int off = 1; off < THREADS; off <<= 1) {
            const double add = threadIdx.x >= off ? buf[threadIdx.x - off] : 0.0;
            __syncthreads();
            buf[threadIdx.x] += add;
            __syncthreads();
        }
        if (j < nb) sums[j] = carry + buf[threadIdx.x];
        __syncthreads();
        if (threadIdx.x == THREADS - 1) carry += buf[THREADS - 1];
        __syncthreads();
    }
}

// The slot of stratum k's draw, by warp k (lane `lane`; every lane returns it): see fx_sample.
__device__ long long find_slot(const float* __restrict__ p, long long n,
                               const double* __restrict__ prefix, long long nb,
                               const double* __restrict__ params, long long k, int lane) {
    const long long size = (long long)params[0];
    const double total = prefix[nb - 1];
    const double target = params[2 + k] * total;
    // first block whose inclusive prefix exceeds the target
    long long lo = 0, hi = nb;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (prefix[mid] > target) hi = mid; else lo = mid + 1;
    }
    long long index = size - 1;
    if (lo < nb) {
        double run = lo > 0 ? prefix[lo - 1] : 0.0;
        const long long base = lo * BLOCK;
        long long found = -1;
        for (int c = 0; c < BLOCK && found < 0; c += 32) {
            const long long j = base + c + lane;
            const double x = j < n ? (double)p[j] : 0.0;
            double s = x;  // inclusive warp scan
            for (int off = 1; off < 32; off <<= 1) {
                const double y = __shfl_up_sync(0xffffffffu, s, off);
                if (lane >= off) s += y;
            }
            const unsigned hit = __ballot_sync(0xffffffffu, run + s > target);
            if (hit) found = base + c + (__ffs(hit) - 1);
            run += __shfl_sync(0xffffffffu, s, 31);
        }
        // not found: the target lies within float64 rounding of the block's end (the block
        // sums and the warp scan add in different orders): the block's last slot
        if (found < 0) found = (lo + 1) * BLOCK < n ? (lo + 1) * BLOCK - 1 : n - 1;
        if (found < index) index = found;
    }
    return index;
}

// params: [size, beta, strata_0 .. strata_{B-1}] (float64, from the host).
extern "C" __global__ void fx_sample(
        const float* __restrict__ p, long long n, const double* __restrict__ prefix,
        long long nb, const double* __restrict__ params, long long batch, int n_obs,
        long long out_ld,
        const float* __restrict__ obs, const float* __restrict__ next_obs,
        const long long* __restrict__ action, const float* __restrict__ reward,
        const float* __restrict__ discount,
        float* __restrict__ out_obs, float* __restrict__ out_next_obs,
        long long* __restrict__ out_action, float* __restrict__ out_reward,
        float* __restrict__ out_discount, long long* __restrict__ out_index,
        float* __restrict__ out_p, unsigned int* __restrict__ min_bits) {
    const long long k = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    __shared__ unsigned int block_min;
    if (threadIdx.x == 0) block_min = 0x7f800000u;  // +inf
    __syncthreads();
    if (k < batch) {
        const long long index = find_slot(p, n, prefix, nb, params, k, lane);
        for (int c = lane; c < n_obs; c += 32) {
            out_obs[k * out_ld + c] = obs[index * n_obs + c];
            out_next_obs[k * out_ld + c] = next_obs[index * n_obs + c];
        }
        if (lane == 0) {
            out_action[k] = action[index];
            out_reward[k] = reward[index];
            out_discount[k] = discount[index];
            out_index[k] = index;
            out_p[k] = p[index];
            atomicMin(&block_min, __float_as_uint(p[index]));  // p > 0: bits order as values
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicMin(min_bits, block_min);
}

// One thread per stratum: weight_k = (N P_k) ** -beta / max over the batch (the smallest
// priority's, which fx_sample left in min_bits as float32 bits).
extern "C" __global__ void fx_weights(const float* __restrict__ sampled_p,
                                      const unsigned int* __restrict__ min_bits,
                                      const double* __restrict__ prefix, long long nb,
                                      const double* __restrict__ params, long long batch,
                                      float* __restrict__ weight) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= batch) return;
    const double size = params[0], beta = params[1], total = prefix[nb - 1];
    const double top = pow(size * ((double)__uint_as_float(*min_bits) / total), -beta);
    weight[k] = (float)(pow(size * ((double)sampled_p[k] / total), -beta) / top);
}
"""

_module = cupy.RawModule(code=_SRC)

# The priority write-back of PrioritizedReplay.update_priorities in one kernel, one thread a
# sampled slot: priority[index] = (p + eps) ** alpha (powf, as CuPy's float32 power), and
# the largest raw p + eps into max_raw by an atomic maximum of the float32's bits (positive
# floats order as their bits; a NaN's bits exceed every positive float's, so NaN wins, as
# in cupy.maximum; non-positive values cannot raise a maximum that starts at 1 and are
# skipped). Before: six CuPy calls (add, power, scatter, a two-kernel max, maximum).
_write_priorities = cupy.RawKernel(
    r"""
extern "C" __global__ void fx_write_priorities(const long long* __restrict__ index,
                                               const float* __restrict__ p, long long n,
                                               float eps, float alpha,
                                               float* __restrict__ priority,
                                               unsigned int* __restrict__ max_raw) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const float raw = p[k] + eps;
    priority[index[k]] = powf(raw, alpha);
    if (raw > 0.0f || isnan(raw)) atomicMax(max_raw, __float_as_uint(raw));
}
""",
    "fx_write_priorities",
)


# NStepAccumulator.push_into's case where every environment's window holds the same open
# steps, in one launch (it was ~25 CuPy calls across push and PrioritizedReplay.add). Rows
# 0 .. k*n_envs-1 are the completed transitions, env-major and oldest first (row = env * k
# + j, the start `first - j` steps old), written to replay slot (pos + row) % capacity at
# priority max_raw ** alpha (powf, as CuPy's float32 power); their return is
# sum_a gain[age][a] * r_a, the same products and order as the matmul of push, with the
# reward a steps old read from the window (this step's from the input). Rows k*n_envs ..
# +n_envs-1 write this step into the window's slot `slot` (no transition reads that slot:
# only ages 1..n-1 are read from the window) and every env's open count. One warp's lanes
# take a row's columns.
_nstep_add = cupy.RawKernel(
    r"""
extern "C" __global__ void fx_nstep_add(
        const float* __restrict__ obs, const long long* __restrict__ action,
        const float* __restrict__ reward, const float* __restrict__ next_obs,
        float* __restrict__ ring_obs, long long* __restrict__ ring_action,
        float* __restrict__ ring_reward, long long* __restrict__ pending, long long open,
        const float* __restrict__ gain, long long n_envs, long long n_obs, int n, int slot,
        int k, int first, float discount,
        float* __restrict__ r_obs, float* __restrict__ r_next, long long* __restrict__ r_action,
        float* __restrict__ r_reward, float* __restrict__ r_discount,
        float* __restrict__ r_priority, const float* __restrict__ max_raw, float alpha,
        long long pos, long long capacity) {
    const long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    const long long n_rows = (long long)k * n_envs;
    if (row < n_rows) {
        const long long e = row / k;
        const int age = first - (int)(row % k);
        const long long from = ((long long)((slot - age + n) % n) * n_envs + e);
        const float* src = age == 0 ? obs + e * n_obs : ring_obs + from * n_obs;
        const long long dst = (pos + row) % capacity;
        for (long long d = threadIdx.x; d < n_obs; d += blockDim.x) {
            r_obs[dst * n_obs + d] = src[d];
            r_next[dst * n_obs + d] = next_obs[e * n_obs + d];
        }
        if (threadIdx.x == 0) {
            float ret = 0.0f;
            for (int a = 0; a < n; ++a) {
                const float r = a == 0 ? reward[e]
                                       : ring_reward[(long long)((slot - a + n) % n) * n_envs + e];
                ret = fmaf(gain[age * n + a], r, ret);
            }
            r_action[dst] = age == 0 ? action[e] : ring_action[from];
            r_reward[dst] = ret;
            r_discount[dst] = discount;
            r_priority[dst] = powf(*max_raw, alpha);
        }
    } else if (row < n_rows + n_envs) {
        const long long e = row - n_rows;
        const long long at = (long long)slot * n_envs + e;
        for (long long d = threadIdx.x; d < n_obs; d += blockDim.x) {
            ring_obs[at * n_obs + d] = obs[e * n_obs + d];
        }
        if (threadIdx.x == 0) {
            ring_action[at] = action[e];
            ring_reward[at] = reward[e];
            pending[e] = open;
        }
    }
}
""",
    "fx_nstep_add",
)
_NSTEP_ROWS: Final = 8  # rows per thread block of fx_nstep_add (a warp each)


def nstep_add(
    step: tuple[Any, Any, Any, Any],
    window: tuple[Any, Any, Any, Any, Any],
    shape: tuple[int, int, int, int, int, float],
    storage: tuple[Any, Any, Any, Any, Any, Any],
    max_raw: Any,
    alpha: float,
    pos: int,
) -> None:
    """One launch of fx_nstep_add (see above). `step`: this step's (obs, action, reward,
    next_obs); `window`: the accumulator's (obs, action, reward, pending, gain); `shape`:
    (open count after the step, window slot, k, first age, n_step, discount); `storage`: the
    replay's (obs, next_obs, action, reward, discount, priority); all CuPy, contiguous,
    float32 but int64 actions and pending."""
    obs, action, reward, next_obs = step
    ring_obs, ring_action, ring_reward, pending, gain = window
    open_, slot, k, first, n, discount = shape
    n_envs, n_obs = obs.shape
    capacity = storage[0].shape[0]
    rows = (k + 1) * n_envs
    _nstep_add(
        (-(-rows // _NSTEP_ROWS),),
        (32, _NSTEP_ROWS),
        (
            obs, action, reward, next_obs, ring_obs, ring_action, ring_reward, pending,
            np.int64(open_), gain, np.int64(n_envs), np.int64(n_obs), np.int32(n),
            np.int32(slot), np.int32(k), np.int32(first), np.float32(discount), *storage,
            max_raw, np.float32(alpha), np.int64(pos), np.int64(capacity),
        ),
    )  # fmt: skip


def write_priorities(
    priority: Any, index: Any, p: Any, eps: float, alpha: float, max_raw: Any
) -> None:
    """``priority[index] = (p + eps) ** alpha`` and ``max_raw = max(max_raw, max(p + eps))``
    in one launch (float32 `priority`, `p` and 0-d `max_raw`, int64 `index`, all CuPy,
    `index` and `p` contiguous and of one length)."""
    n = index.shape[0]
    if not n:
        return
    _write_priorities(
        (-(-n // _THREADS),),
        (_THREADS,),
        (index, p, np.int64(n), np.float32(eps), np.float32(alpha), priority, max_raw),
    )


@dataclass(slots=True)
class _Staging:
    """The uniforms of draws of one batch size: a ring of pinned host buffers (each with the
    event of its last copy), their device copy, and the sampled priorities."""

    ring: list[tuple[Any, Any, Any]]
    params: Any
    sampled_p: Any
    next: int = 0

    @classmethod
    def make(cls, batch: int) -> _Staging:
        ring = []
        for _ in range(_RING):
            mem = cupy.cuda.alloc_pinned_memory((batch + 2) * 8)
            view = np.frombuffer(mem, dtype=np.float64, count=batch + 2)
            # an event not recorded yet: synchronize() returns at once
            ring.append((mem, view, cupy.cuda.Event(block=False, disable_timing=True)))
        params = cupy.empty(batch + 2, dtype=cupy.float64)
        return cls(ring, params, cupy.empty(batch, dtype=cupy.float32))


class DeviceSampler:
    """Sampling state of one replay on the GPU: the prefix sums, the pinned uniform ring.

    Parameters
    ----------
    capacity
        The replay's capacity (the priorities' length).
    """

    def __init__(self, capacity: int) -> None:
        self._nb = max(1, -(-capacity // BLOCK))
        self._capacity = capacity
        self._prefix = cupy.zeros(self._nb, dtype=cupy.float64)
        self._min_bits = cupy.empty(1, dtype=cupy.uint32)  # the batch's smallest priority
        # per batch size, kept for the sampler's life: a CUDA graph that captured a launch
        # holds these buffers' addresses, so another batch size must not replace them
        self._staging: dict[int, _Staging] = {}
        # fetched once: RawModule.get_function looks the kernel up anew on every call
        self._block_sums, self._scan, self._sample, self._weights = (
            _module.get_function(name)
            for name in ("fx_block_sums", "fx_scan_blocks", "fx_sample", "fx_weights")
        )

    def _free_slot(self, batch: int) -> tuple[Any, Any, Any]:
        """The next ring slot of `batch` strata (pinned memory, host view, event), once its
        last copy ran; the first draw of a batch size makes its ring and device buffers."""
        staging = self._staging.get(batch)
        if staging is None:
            staging = self._staging[batch] = _Staging.make(batch)
        slot = staging.ring[staging.next]
        slot[2].synchronize()  # its last copy ran: the host may overwrite it
        staging.next = (staging.next + 1) % _RING
        return slot

    def sample(
        self,
        priority: Any,
        strata: np.ndarray,
        size: int,
        beta: float,
        storage: tuple[Any, Any, Any, Any, Any],
        out: tuple[Any, Any, Any, Any, Any, Any, Any],
    ) -> None:
        """Draw one batch into `out` (obs, next_obs, action, reward, discount, weight, index).

        `priority` is the replay's (capacity,) float32 ``priority ** alpha``; `strata`
        the host's (B,) float64 stratified uniforms in [0, 1); `storage` the replay's (obs,
        next_obs, action, reward, discount) buffers. `out`'s obs and next_obs may be row
        views of wider arrays (the learner's padded inputs): rows of adjacent floats, one row
        stride for both.
        """
        self.stage(strata, size, beta)
        self.launch(priority, strata.shape[0], storage, out)

    def stage(self, strata: np.ndarray, size: int, beta: float) -> None:
        """The host's part of :meth:`sample`: `size`, `beta` and `strata` into the next
        pinned ring slot and its copy to the device queued on the current stream."""
        batch = strata.shape[0]
        mem, view, event = self._free_slot(batch)
        view[0], view[1] = float(size), float(beta)
        view[2:] = strata
        stream = cupy.cuda.get_current_stream()
        params = self._staging[batch].params
        params.data.copy_from_host_async(mem.ptr, (batch + 2) * 8, stream)
        event.record(stream)

    def launch(
        self,
        priority: Any,
        batch: int,
        storage: tuple[Any, Any, Any, Any, Any],
        out: tuple[Any, Any, Any, Any, Any, Any, Any],
    ) -> None:
        """The device's part of :meth:`sample`, for the last :meth:`stage` of `batch`
        strata: four kernels, no host work that depends on the data (a CUDA graph may
        capture them: they read the staged values from the device)."""
        staging = self._staging.get(batch)
        if staging is None:
            raise ValueError(f"launch of {batch} strata without a stage of as many")
        params, sampled_p = staging.params, staging.sampled_p
        nb = np.int64(self._nb)
        self._block_sums(
            (self._nb,), (_THREADS,), (priority, np.int64(self._capacity), self._prefix)
        )
        self._scan((1,), (_THREADS,), (self._prefix, nb, self._min_bits))
        obs, next_obs, action, reward, discount = storage
        o_obs, o_next, o_action, o_reward, o_discount, o_weight, o_index = out
        warps_per_block = _THREADS // 32
        self._sample(
            (-(-batch // warps_per_block),),
            (_THREADS,),
            (
                priority,
                np.int64(self._capacity),
                self._prefix,
                nb,
                params,
                np.int64(batch),
                np.int32(obs.shape[1]),
                np.int64(o_obs.strides[0] // o_obs.itemsize),
                obs,
                next_obs,
                action,
                reward,
                discount,
                o_obs,
                o_next,
                o_action,
                o_reward,
                o_discount,
                o_index,
                sampled_p,
                self._min_bits,
            ),
        )
        self._weights(
            (-(-batch // _THREADS),),
            (_THREADS,),
            (
                sampled_p,
                self._min_bits,
                self._prefix,
                nb,
                params,
                np.int64(batch),
                o_weight,
            ),
        )
