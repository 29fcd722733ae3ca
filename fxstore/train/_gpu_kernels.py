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

_THREADS: Final = 128

_bias_relu = cupy.ElementwiseKernel(
    "float32 b", "float32 z", "float y = z + b; z = y < 0.0f ? 0.0f : y", "fx_bias_relu"
)
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

# The host's agent._step_scalars on the device, one thread: reads (sum w·ce, |grad|²), keeps
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

# One thread per row; N atoms and A actions are compile-time constants (FX_N, FX_A), so the
# per-row arrays live in registers / local memory. Head rows hold V (N) then A (A x N), no bias.
# Clamps are written with comparisons so that NaN passes through (fminf/fmaxf would drop it).
_DUELING_SRC: Final = r"""
#define N FX_N
#define A FX_A
#define W (N * (A + 1))
#define NEG_INF __int_as_float(0xff800000)  // NVRTC has no <math.h> INFINITY

__device__ __forceinline__ float clampf(float x, float lo, float hi) {
    return x < lo ? lo : (x > hi ? hi : x);
}

__device__ void mean_adv(const float* h, const float* bias, float* out) {
    for (int k = 0; k < N; ++k) {
        float s = 0.0f;
        for (int a = 0; a < A; ++a) s += h[N + a * N + k] + bias[N + a * N + k];
        out[k] = s / (float)A;
    }
}

__device__ __forceinline__ float logit(const float* h, const float* bias, const float* mean,
                                       int a, int k) {
    return ((h[k] + bias[k]) + (h[N + a * N + k] + bias[N + a * N + k])) - mean[k];
}

// log-softmax over atoms of action a into out[N]
__device__ void log_probs(const float* h, const float* bias, const float* mean, int a,
                          float* out) {
    float mx = NEG_INF;
    for (int k = 0; k < N; ++k) {
        out[k] = logit(h, bias, mean, a, k);
        mx = out[k] > mx ? out[k] : mx;
    }
    float s = 0.0f;
    for (int k = 0; k < N; ++k) { out[k] -= mx; s += expf(out[k]); }
    const float ls = logf(s);
    for (int k = 0; k < N; ++k) out[k] -= ls;
}

__device__ float expected(const float* h, const float* bias, const float* mean, int a,
                          const float* support, float* scratch) {
    log_probs(h, bias, mean, a, scratch);
    float q = 0.0f;
    for (int k = 0; k < N; ++k) q += expf(scratch[k]) * support[k];
    return q;
}

extern "C" __global__ void fx_q_values(const float* __restrict__ head,
                                       const float* __restrict__ bias,
                                       const float* __restrict__ support,
                                       long long rows, float* __restrict__ q) {
    const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float mean[N], scratch[N];
    const float* h = head + r * W;
    mean_adv(h, bias, mean);
    for (int a = 0; a < A; ++a) q[r * A + a] = expected(h, bias, mean, a, support, scratch);
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
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= batch) return;
    float mean[N], p[N], m[N];

    // double DQN: the online net's argmax at s' (first of equal values, like numpy)
    const float* hn = head + (batch + i) * W;
    mean_adv(hn, bias, mean);
    int best = 0;
    float best_q = NEG_INF;
    for (int a = 0; a < A; ++a) {
        const float q = expected(hn, bias, mean, a, support, p);
        if (q > best_q) { best_q = q; best = a; }
    }

    // the target net's distribution of that action at s'
    const float* ht = head_t + i * W;
    mean_adv(ht, bias_t, mean);
    log_probs(ht, bias_t, mean, best, p);
    for (int k = 0; k < N; ++k) p[k] = expf(p[k]);

    // projection of r + d z onto the support: the dense weights clip(1 - |b_j - k|, 0, 1)
    // are non-zero only at k = floor(b_j) and floor(b_j) + 1, summed in the same j order
    const float v_min = support[0], v_max = support[N - 1];
    const float dz = (v_max - v_min) / (float)(N - 1);
    const float r = reward[i], d = discount[i];
    for (int k = 0; k < N; ++k) m[k] = 0.0f;
    for (int j = 0; j < N; ++j) {
        const float tz = clampf(r + d * support[j], v_min, v_max);
        const float b = clampf((tz - v_min) / dz, 0.0f, (float)(N - 1));
        const int l = b >= 0.0f ? (int)floorf(b) : 0;  // NaN b: l = 0, its weight stays NaN
        const float wl = 1.0f - fabsf(b - (float)l);
        m[l] += p[j] * (wl < 0.0f ? 0.0f : wl);
        if (l + 1 < N) {
            const float wu = 1.0f - fabsf(b - (float)(l + 1));
            m[l + 1] += p[j] * (wu < 0.0f ? 0.0f : wu);
        }
    }

    // cross-entropy to the online distribution of the taken action at s, and its gradient
    const float* hs = head + i * W;
    const int act = (int)action[i];
    mean_adv(hs, bias, mean);
    log_probs(hs, bias, mean, act, p);
    float loss = 0.0f, msum = 0.0f;
    for (int k = 0; k < N; ++k) { loss += m[k] * p[k]; msum += m[k]; }
    loss = -loss;
    const float scale = weight[i] / (float)batch;
    float* dh = d_head + i * W;
    for (int k = 0; k < N; ++k) {
        const float g = scale * (expf(p[k]) * msum - m[k]);
        const float share = -g / (float)A;
        dh[k] = g;
        for (int a = 0; a < A; ++a) dh[N + a * N + k] = a == act ? share + g : share;
    }
    ce[i] = loss;
    wce[i] = weight[i] * loss;
}
"""


@functools.lru_cache(maxsize=16)
def _dueling_module(n_atoms: int, n_actions: int) -> cupy.RawModule:
    """The C51 kernels compiled for `n_atoms` atoms and `n_actions` actions."""
    logger.debug("compiling C51 kernels for %d atoms, %d actions", n_atoms, n_actions)
    options = (f"-DFX_N={n_atoms}", f"-DFX_A={n_actions}", "--std=c++11")
    return cupy.RawModule(code=_DUELING_SRC, options=options)


def _grid(rows: int) -> tuple[int]:
    return ((rows + _THREADS - 1) // _THREADS,)


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
        _bias_relu(bias, z)

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
            kernel = _dueling_module(n_atoms, n_actions).get_function("fx_q_values")
            kernel(_grid(rows), (_THREADS,), (head, bias, support, np.int64(rows), q))
        return q

    def c51(self, h: C51Inputs, d_head: F32, ce: F32, weighted_ce: F32) -> None:
        batch = h.batch
        rows = int(batch.action.shape[0])
        n_atoms = h.support.shape[0]
        kernel = _dueling_module(n_atoms, h.n_actions).get_function("fx_c51")
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
        kernel(_grid(rows), (_THREADS,), args)

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
