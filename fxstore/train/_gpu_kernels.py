"""CuPy fused kernels of the agent's update: the GPU twin of ``_ops.NumpyOps``.

Only :func:`fxstore.train.agent._ops_for` imports this module, and only for CuPy arrays: it
imports CuPy at import time. Each method computes the same float32 math as the numpy
reference, in one kernel launch; reductions run in float64 with cupy's fixed-order tree
(no atomics), so results repeat bit for bit on one device. GEMMs go through
:class:`fxstore.train._cublas.Cublas`, so that :meth:`CupyOps.compile` can capture a whole
update as one CUDA graph.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import cupy
import numpy as np

from fxstore.train._cublas import Cublas

if TYPE_CHECKING:
    from fxstore.config import AgentConfig
    from fxstore.train._ops import AdamInputs, C51Inputs
    from fxstore.train.replay import F32

__all__ = ["CupyOps"]

logger = logging.getLogger(__name__)

_relu_grad = cupy.ElementwiseKernel(
    "float32 h", "float32 d", "if (h <= 0.0f) d = 0.0f", "fx_relu_grad"
)
_total = cupy.ReductionKernel(
    "float32 x", "float64 y", "(double)x", "a + b", "y = a", "0", "fx_total"
)
_sum_squares = cupy.ReductionKernel(
    "float32 x", "float64 y", "(double)x * (double)x", "a + b", "y = a", "0", "fx_sum_squares"
)
# `step` is _ops.STEP_SCALARS on the device: clip factor, bias corrections, tau, apply.
_adam = cupy.ElementwiseKernel(
    "float32 g, raw float32 step, float32 beta1, float32 omb1, float32 beta2, float32 omb2, "
    "float32 lr, float32 eps, float32 keep",
    "float32 p, float32 m, float32 v, float32 pt",
    """
    if (step[4] != 0.0f) {  // 0 once a loss or gradient was not finite: weights stay
        float gs = g * step[0];
        m = beta1 * m + omb1 * gs;
        v = beta2 * v + omb2 * (gs * gs);
        p = p * keep;  // decoupled weight decay; keep is exactly 1 without it
        p = p - lr * (m / step[1]) / (sqrtf(v / step[2]) + eps);
        pt = pt + step[3] * (p - pt);
    }
    """,
    "fx_adam_polyak",
)

# _ops.NumpyOps.step_scalars on the device, one thread: reads (sum w·ce, |grad|²), keeps
# agent._PROGRESS, writes STEP_SCALARS. A non-finite loss or gradient marks the update (its
# number in progress[1]) and every later update is skipped, until the host looks.
_STEP_SRC: Final = r"""
extern "C" __global__ void fx_step(const double* sums, double* progress, float* out,
                                   long long batch, double clip, double beta1, double beta2,
                                   long long period, double tau) {
    const double loss = sums[0] / (double)batch;
    const double grad_norm = sqrt(sums[1]);  // NaN for NaN, as the host's
    const bool finite = isfinite(loss) && isfinite(grad_norm);
    const bool clean = progress[1] == 0.0;
    const long long t = (long long)progress[0] + 1;
    if (clean) {
        progress[4] = loss;
        progress[5] = grad_norm;
        if (!finite) progress[1] = (double)t;
    }
    const bool ok = clean && finite;
    if (ok) {
        progress[0] = (double)t;
        progress[2] += loss;
        progress[3] += 1.0;
    }
    out[0] = (float)fmin(1.0, clip / (grad_norm + 1e-6));
    out[1] = (float)(1.0 - pow(beta1, (double)t));
    out[2] = (float)(1.0 - pow(beta2, (double)t));
    out[3] = (float)((period == 0 || t % period == 0) ? tau : 0.0);
    out[4] = ok ? 1.0f : 0.0f;
}
"""
_step = cupy.RawKernel(_STEP_SRC, "fx_step")

# One warp per row: lane l holds atoms l, l + 32, ... (KPL of them); N atoms, A actions and
# the row stride LD >= W of the head arrays (padded for aligned GEMMs) are compile-time
# constants (FX_N, FX_A, FX_LD). Sums over atoms are warp butterflies (a fixed order:
# deterministic). Head rows hold V (N) then A (A x N), no bias. Clamps are written with
# comparisons so that NaN passes through (fminf/fmaxf would drop it).
_DUELING_SRC: Final = r"""
#define N FX_N
#define A FX_A
#define W (N * (A + 1))
#define LD FX_LD
#define KPL ((N + 31) / 32)
#define WARPS 4
#define FULL 0xffffffffu
#define NEG_INF __int_as_float(0xff800000)  // NVRTC has no <math.h> INFINITY

__device__ __forceinline__ float clampf(float x, float lo, float hi) {
    return x < lo ? lo : (x > hi ? hi : x);
}

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) {
        const float y = __shfl_xor_sync(FULL, x, o);
        x = y > x ? y : x;
    }
    return x;
}

// mean over actions of the advantage logits, for this lane's atoms
__device__ void mean_adv(const float* h, const float* bias, int lane, float* mean) {
    for (int s = 0; s < KPL; ++s) {
        const int k = lane + 32 * s;
        if (k >= N) break;
        float sum = 0.0f;
        for (int a = 0; a < A; ++a) sum += h[N + a * N + k] + bias[N + a * N + k];
        mean[s] = sum / (float)A;
    }
}

// log-softmax over the atoms of action a, this lane's share into out[KPL]
__device__ void log_probs(const float* h, const float* bias, const float* mean, int a,
                          int lane, float* out) {
    float mx = NEG_INF;
    for (int s = 0; s < KPL; ++s) {
        const int k = lane + 32 * s;
        if (k >= N) break;
        out[s] = ((h[k] + bias[k]) + (h[N + a * N + k] + bias[N + a * N + k])) - mean[s];
        mx = out[s] > mx ? out[s] : mx;
    }
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int s = 0; s < KPL; ++s) {
        if (lane + 32 * s >= N) break;
        out[s] -= mx;
        sum += expf(out[s]);
    }
    const float ls = logf(warp_sum(sum));
    for (int s = 0; s < KPL; ++s) {
        if (lane + 32 * s >= N) break;
        out[s] -= ls;
    }
}

__device__ float expected(const float* h, const float* bias, const float* mean, int a,
                          const float* support, int lane, float* scratch) {
    log_probs(h, bias, mean, a, lane, scratch);
    float q = 0.0f;
    for (int s = 0; s < KPL; ++s) {
        const int k = lane + 32 * s;
        if (k >= N) break;
        q += expf(scratch[s]) * support[k];
    }
    return warp_sum(q);
}

extern "C" __global__ void fx_q_values(const float* __restrict__ head,
                                       const float* __restrict__ bias,
                                       const float* __restrict__ support,
                                       long long rows, float* __restrict__ q) {
    const int lane = threadIdx.x & 31;
    const long long r = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (r >= rows) return;  // the whole warp: r is the same on every lane
    float mean[KPL], scratch[KPL];
    const float* h = head + r * LD;
    mean_adv(h, bias, lane, mean);
    for (int a = 0; a < A; ++a) {
        const float value = expected(h, bias, mean, a, support, lane, scratch);
        if (lane == 0) q[r * A + a] = value;
    }
}

extern "C" __global__ void fx_c51(const float* __restrict__ head,
                                  const float* __restrict__ head_t,
                                  const float* __restrict__ bias,
                                  const float* __restrict__ bias_t,
                                  const long long* __restrict__ action,
                                  const float* __restrict__ reward,
                                  const float* __restrict__ discount,
                                  const float* __restrict__ weight,
                                  const float* __restrict__ support,
                                  long long batch,
                                  float* __restrict__ d_head,
                                  float* __restrict__ ce,
                                  float* __restrict__ wce) {
    __shared__ float moved_p[WARPS][N];  // the target distribution p_j ...
    __shared__ float moved_b[WARPS][N];  // ... and where r + d z_j lands, in atoms
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long i = (long long)blockIdx.x * WARPS + warp;
    if (i >= batch) return;  // the whole warp
    float mean[KPL], lp[KPL], m[KPL];

    // double DQN: the online net's argmax at s' (first of equal values, like numpy)
    const float* hn = head + (batch + i) * LD;
    mean_adv(hn, bias, lane, mean);
    int best = 0;
    float best_q = NEG_INF;
    for (int a = 0; a < A; ++a) {
        const float q = expected(hn, bias, mean, a, support, lane, lp);
        if (q > best_q) { best_q = q; best = a; }
    }

    // the target net's distribution of that action at s', moved to r + d z
    const float* ht = head_t + i * LD;
    mean_adv(ht, bias_t, lane, mean);
    log_probs(ht, bias_t, mean, best, lane, lp);
    const float v_min = support[0], v_max = support[N - 1];
    const float dz = (v_max - v_min) / (float)(N - 1);
    const float r = reward[i], d = discount[i];
    for (int s = 0; s < KPL; ++s) {
        const int j = lane + 32 * s;
        if (j >= N) break;
        const float tz = clampf(r + d * support[j], v_min, v_max);
        moved_p[warp][j] = expf(lp[s]);
        moved_b[warp][j] = clampf((tz - v_min) / dz, 0.0f, (float)(N - 1));
    }
    __syncwarp();

    // projection onto the support: atom k gathers sum_j p_j clip(1 - |b_j - k|, 0, 1), in
    // j order (the dense weights of project_distribution; NaN b keeps its NaN)
    for (int s = 0; s < KPL; ++s) {
        const int k = lane + 32 * s;
        if (k >= N) break;
        float acc = 0.0f;
        for (int j = 0; j < N; ++j) {
            float w = 1.0f - fabsf(moved_b[warp][j] - (float)k);
            w = w < 0.0f ? 0.0f : w;
            acc += moved_p[warp][j] * w;
        }
        m[s] = acc;
    }

    // cross-entropy to the online distribution of the taken action at s, and its gradient
    const float* hs = head + i * LD;
    const int act = (int)action[i];
    mean_adv(hs, bias, lane, mean);
    log_probs(hs, bias, mean, act, lane, lp);
    float loss = 0.0f, msum = 0.0f;
    for (int s = 0; s < KPL; ++s) {
        if (lane + 32 * s >= N) break;
        loss += m[s] * lp[s];
        msum += m[s];
    }
    loss = -warp_sum(loss);
    msum = warp_sum(msum);
    const float scale = weight[i] / (float)batch;
    float* dh = d_head + i * LD;
    for (int s = 0; s < KPL; ++s) {
        const int k = lane + 32 * s;
        if (k >= N) break;
        const float g = scale * (expf(lp[s]) * msum - m[s]);
        const float share = -g / (float)A;
        dh[k] = g;
        for (int a = 0; a < A; ++a) dh[N + a * N + k] = a == act ? share + g : share;
    }
    if (lane == 0) {
        ce[i] = loss;
        wce[i] = weight[i] * loss;
    }
}
"""

# Bias + ReLU in place over (rows, cols) rows of row stride `ld`: one warp a row, 8 rows a
# block, lanes striding over the columns (coalesced, no index division).
_ROWS_SRC: Final = r"""
extern "C" __global__ void fx_bias_relu(float* __restrict__ z, const float* __restrict__ bias,
                                        long long rows, int cols, long long ld) {
    const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
    if (r >= rows) return;
    float* row = z + r * ld;
    for (int c = threadIdx.x; c < cols; c += 32) {
        const float y = row[c] + bias[c];
        row[c] = y < 0.0f ? 0.0f : y;
    }
}
"""
_ROWS_PER_BLOCK: Final = 8
_rows_module = cupy.RawModule(code=_ROWS_SRC)


@functools.cache
def _bias_relu() -> Any:
    """``fx_bias_relu``, looked up once (the acting path runs it every environment step)."""
    return _rows_module.get_function("fx_bias_relu")


_WARPS: Final = 4  # rows per block of the C51 kernels (WARPS in their source)


@functools.lru_cache(maxsize=32)
def _dueling_kernel(name: str, n_atoms: int, n_actions: int, ld: int) -> Any:
    """Kernel `name` of :func:`_dueling_module` (looked up once: the acting path calls
    ``fx_q_values`` every environment step)."""
    return _dueling_module(n_atoms, n_actions, ld).get_function(name)


@functools.lru_cache(maxsize=16)
def _dueling_module(n_atoms: int, n_actions: int, ld: int) -> cupy.RawModule:
    """The C51 kernels compiled for `n_atoms` atoms, `n_actions` actions and head rows
    `ld` floats apart."""
    logger.debug("compiling C51 kernels: %d atoms, %d actions, rows of %d", n_atoms, n_actions, ld)
    options = (f"-DFX_N={n_atoms}", f"-DFX_A={n_actions}", f"-DFX_LD={ld}", "--std=c++11")
    return cupy.RawModule(code=_DUELING_SRC, options=options)


def _row_stride(*arrays: F32) -> int:
    """The common row stride (in floats) of (rows, W) float32 views whose rows hold W
    adjacent floats: the C51 kernels' LD."""
    strides = {(x.strides[0] // x.itemsize, x.strides[1]) for x in arrays if x.shape[0] > 1}
    widths = {x.shape[1] for x in arrays}
    if len(strides) > 1 or any(col != 4 for _, col in strides) or len(widths) != 1:
        raise ValueError(f"head arrays need one row stride and adjacent columns, had {strides}")
    width = widths.pop()
    return strides.pop()[0] if strides else width


def _grid(rows: int) -> tuple[int]:
    return ((rows + _WARPS - 1) // _WARPS,)


class CupyOps:
    """The fused steps of one update on CuPy float32 arrays (see ``_ops.Ops``).

    Parameters
    ----------
    tf32
        GEMMs round float32 inputs to TF32 (tensor cores).
    cuda_graph
        :meth:`compile` captures the update as a CUDA graph (else it runs kernel by kernel).
    """

    def __init__(self, *, tf32: bool = False, cuda_graph: bool = True) -> None:
        self._ones_cache: F32 = cupy.ones(0, dtype=cupy.float32)
        self._blas = Cublas(tf32=tf32)
        self._cuda_graph = cuda_graph

    def _ones(self, n: int) -> F32:
        if self._ones_cache.shape[0] < n:
            self._ones_cache = cupy.ones(n, dtype=cupy.float32)
        return self._ones_cache[:n]

    def matmul(self, a: F32, b: F32, out: F32 | None = None) -> F32:
        if out is None:
            out = cupy.empty((a.shape[0], b.shape[1]), dtype=cupy.float32)
        self._blas.gemm(a, b, out)
        return out

    def bias_relu(self, z: F32, bias: F32) -> None:
        rows, cols = z.shape
        if not rows or not cols:
            return
        if z.strides[1] != z.itemsize:
            raise ValueError(f"bias_relu needs rows of adjacent columns, strides {z.strides}")
        grid = ((rows + _ROWS_PER_BLOCK - 1) // _ROWS_PER_BLOCK,)
        args = (z, bias, np.int64(rows), np.int32(cols), np.int64(z.strides[0] // z.itemsize))
        _bias_relu()(grid, (32, _ROWS_PER_BLOCK), args)

    def relu_grad(self, h: F32, grad: F32) -> None:
        _relu_grad(h, grad)

    def col_sum(self, x: F32, out: F32) -> None:
        # a GEMV by ones through cuBLAS: far faster than a reduction down the strided axis,
        # and as deterministic (fixed blocking for a given shape)
        self._blas.gemm(self._ones(x.shape[0])[None, :], x, out[None, :])

    def sum_squares(self, x: F32, out: F32) -> None:
        _sum_squares(x, out=out)

    def total(self, x: F32, out: F32) -> None:
        _total(x, out=out)

    def q_values(self, head: F32, bias: F32, support: F32) -> F32:
        rows, width = head.shape
        n_atoms = support.shape[0]
        n_actions = width // n_atoms - 1
        q: F32 = cupy.empty((rows, n_actions), dtype=cupy.float32)
        if rows:
            kernel = _dueling_kernel("fx_q_values", n_atoms, n_actions, _row_stride(head))
            kernel(_grid(rows), (32 * _WARPS,), (head, bias, support, np.int64(rows), q))
        return q

    def c51(self, h: C51Inputs, d_head: F32, ce: F32, weighted_ce: F32) -> None:
        batch = h.batch
        rows = int(batch.action.shape[0])
        n_atoms = h.support.shape[0]
        ld = _row_stride(h.head, h.head_target, d_head)
        kernel = _dueling_kernel("fx_c51", n_atoms, h.n_actions, ld)
        args = (
            h.head,
            h.head_target,
            h.bias,
            h.bias_target,
            batch.action,
            batch.reward,
            batch.discount,
            batch.weight,
            h.support,
            np.int64(rows),
            d_head,
            ce,
            weighted_ce,
        )
        kernel(_grid(rows), (32 * _WARPS,), args)

    def step_scalars(
        self, sums: Any, progress: Any, out: F32, *, batch: int, config: AgentConfig
    ) -> None:
        """The update's clip factor, bias corrections, tau and apply flag, on the device."""
        args = (
            sums,
            progress,
            out,
            np.int64(batch),
            np.float64(config.grad_clip),
            np.float64(config.adam_beta1),
            np.float64(config.adam_beta2),
            np.int64(config.target_period),
            np.float64(config.target_tau),
        )
        _step((1,), (1,), args)

    def adam(self, s: AdamInputs) -> None:
        _adam(
            s.grad,
            s.step,
            s.beta1,
            s.one_minus_beta1,
            s.beta2,
            s.one_minus_beta2,
            s.lr,
            s.eps,
            s.keep,
            s.params,
            s.m,
            s.v,
            s.target,
        )

    def compile(self, body: Callable[[], None], state: Sequence[Any]) -> Callable[[], None]:
        """`body` captured once as a CUDA graph; the returned call replays it.

        `body` runs once first (kernels compiled, its temporaries in a private memory pool),
        then `state` (every buffer it changes that outlives it) is put back and `body` is
        captured on a side stream. A replay runs on the current stream, so it stays in order
        with the work around it. Without `cuda_graph`, `body` itself is returned.
        """
        if not self._cuda_graph:
            return body
        saved = [x.copy() for x in state]
        pool = cupy.cuda.MemoryPool()  # the graph's temporaries: nobody else allocates here
        stream = cupy.cuda.Stream(non_blocking=True)
        cupy.cuda.get_current_stream().synchronize()
        with cupy.cuda.using_allocator(pool.malloc), stream:
            body()
            for x, before in zip(state, saved, strict=True):
                x[...] = before
            stream.synchronize()
            stream.begin_capture()
            try:
                body()
            finally:
                graph = stream.end_capture()
        stream.synchronize()
        logger.debug("update captured as a CUDA graph")
        return _Replay(graph, pool, stream)


class _Replay:
    """A captured graph with what must outlive it (its memory pool and capture stream)."""

    def __init__(self, graph: Any, pool: Any, stream: Any) -> None:
        self._graph, self._pool, self._stream = graph, pool, stream

    def __call__(self) -> None:
        self._graph.launch(stream=cupy.cuda.get_current_stream())
