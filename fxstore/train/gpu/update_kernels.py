"""CuPy fused kernels of the agent's update: the GPU twin of ``_ops.NumpyOps``.

Only :func:`fxstore.train.agent.dqn._ops_for` imports this module, and only for CuPy arrays: it
imports CuPy at import time. Each method computes the same float32 math as the numpy
reference, in one kernel launch; reductions run in float64 with cupy's fixed-order tree
(no atomics), so results repeat bit for bit on one device. GEMMs go through
:class:`fxstore.train.gpu.cublas.Cublas`, so that :meth:`CupyOps.compile` can capture a whole
update as one CUDA graph.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import cupy
import numpy as np

from fxstore.train.gpu.cublas import Cublas
from fxstore.train.gpu.cublaslt import (
    EPILOGUE_DRELU_BGRAD,
    EPILOGUE_RELU_AUX_BIAS,
    EPILOGUE_RELU_BIAS,
    MASK_BITS_ALIGN,
    CublasLt,
)
from fxstore.train.gpu.inputs import AdamArrays, C51Arrays
from fxstore.train.gpu.xp import F32

if TYPE_CHECKING:
    from fxstore.config import AgentConfig

__all__ = ["DEFAULT_EPILOGUES", "CupyOps"]

logger = logging.getLogger(__name__)


#: cuBLASLt epilogues the update uses by default. Bias+ReLU fuses into the forward GEMMs on
#: the H200; keeping the ReLU mask (RELU_AUX_BIAS) and the ReLU and bias gradients
#: (DRELU_BGRAD) ran as separate cuBLASLt kernels there, slower than fxstore's own passes
#: (`bench/diag_update_kernels.py --epilogues ...`, bench/results/update_kernels_*).
DEFAULT_EPILOGUES: Final = frozenset({EPILOGUE_RELU_BIAS})
_relu_grad = cupy.ElementwiseKernel(
    "float32 h", "float32 d", "if (h <= 0.0f) d = 0.0f", "fx_relu_grad"
)
# The float64 sum (or sum of squares) of a float32 vector in two launches of a fixed order:
# pass 1 has each of `blocks` thread blocks sum a grid-strided share and then its threads'
# sums as a tree; pass 2 sums the blocks' in one block, as a tree. No CUB: CuPy's
# ReductionKernel compiled CUB's headers into each pass, 1.4 s a pass on a machine's first
# run (`bench/diag_compile.py`, bench/results/compile_cold_1fold.json).
_SUM64_THREADS: Final = 256
_SUM64_MAX_BLOCKS: Final = 1024
_sum64_module = cupy.RawModule(
    code=r"""
#define THREADS 256

__device__ void fx_tree(double* s) {
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
}

extern "C" __global__ void fx_sum64_pass1(const float* __restrict__ x, long long n, int square,
                                          double* __restrict__ partial) {
    __shared__ double s[THREADS];
    const long long stride = (long long)gridDim.x * THREADS;
    double acc = 0.0;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) {
        const double v = (double)x[i];
        acc += square ? v * v : v;
    }
    s[threadIdx.x] = acc;
    fx_tree(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

extern "C" __global__ void fx_sum64_pass2(const double* __restrict__ partial, int blocks,
                                          double* __restrict__ out) {
    __shared__ double s[THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < blocks; i += THREADS) acc += partial[i];
    s[threadIdx.x] = acc;
    fx_tree(s);
    if (threadIdx.x == 0) *out = s[0];
}
"""
)


@functools.cache
def _sum64(name: str) -> Any:
    return _sum64_module.get_function(name)


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

// The action of the largest expected value (the first of equal ones): `expected` for every
// action, the actions' warp reductions interleaved (independent shuffles overlap) but each
// action's arithmetic in the same order as `expected`, so the values are the same bits.
__device__ int best_action(const float* h, const float* bias, const float* mean,
                           const float* support, int lane) {
    float x[A][KPL], mx[A], sum[A], q[A];
#pragma unroll
    for (int a = 0; a < A; ++a) {
        mx[a] = NEG_INF;
#pragma unroll
        for (int s = 0; s < KPL; ++s) {
            const int k = lane + 32 * s;
            if (k >= N) break;
            x[a][s] = ((h[k] + bias[k]) + (h[N + a * N + k] + bias[N + a * N + k])) - mean[s];
            mx[a] = x[a][s] > mx[a] ? x[a][s] : mx[a];
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int a = 0; a < A; ++a) {
            const float y = __shfl_xor_sync(FULL, mx[a], o);
            mx[a] = y > mx[a] ? y : mx[a];
        }
    }
#pragma unroll
    for (int a = 0; a < A; ++a) {
        sum[a] = 0.0f;
#pragma unroll
        for (int s = 0; s < KPL; ++s) {
            if (lane + 32 * s >= N) break;
            x[a][s] -= mx[a];
            sum[a] += expf(x[a][s]);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int a = 0; a < A; ++a) sum[a] += __shfl_xor_sync(FULL, sum[a], o);
    }
#pragma unroll
    for (int a = 0; a < A; ++a) {
        const float ls = logf(sum[a]);
        q[a] = 0.0f;
#pragma unroll
        for (int s = 0; s < KPL; ++s) {
            const int k = lane + 32 * s;
            if (k >= N) break;
            x[a][s] -= ls;
            q[a] += expf(x[a][s]) * support[k];
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int a = 0; a < A; ++a) q[a] += __shfl_xor_sync(FULL, q[a], o);
    }
    int best = 0;
    float best_q = NEG_INF;
#pragma unroll
    for (int a = 0; a < A; ++a) {
        if (q[a] > best_q) { best_q = q[a]; best = a; }
    }
    return best;
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
    const int best = best_action(hn, bias, mean, support, lane);

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

# The backward pass of a torso layer after its GEMM: the ReLU's gradient in place and the
# bias gradient (column sums) in one read of the gradient. fx_relu_grad_partial: a block of
# GRAD_COLS columns and CHUNK rows writes that chunk's column sums (rows in order);
# fx_sum_partials: one warp a column adds the chunks (lane l takes chunks l, l + 32, ...,
# then a butterfly): a fixed order, so the result repeats bit for bit.
_GRAD_CHUNK: Final = 32
_GRAD_COLS: Final = 128
_SUM_COLS: Final = 8  # columns (warps) per block of fx_sum_partials
# fx_relu_grad_partial4, for rows of 16-byte aligned float4s: a block of 64 float4 columns
# and 4 row groups takes CHUNK4 rows (row group y the rows y, y + 4, ...), then adds the
# row groups in order. At 16,384 x 256 the scalar kernel held too few loads in flight (39%
# of DRAM bandwidth; this one 50%: Nsight Compute on the H200, bench/results/ncu_update_*).
_GRAD4_CHUNK: Final = 64
_GRAD4_COLS: Final = 64
_GRAD4_GROUPS: Final = 4
_GRAD_SRC: Final = r"""
#define CHUNK 32
extern "C" __global__ void fx_relu_grad_partial(const float* __restrict__ h, long long ldh,
                                                float* __restrict__ d, long long ldd,
                                                long long rows, int cols,
                                                float* __restrict__ partial) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    const long long r0 = (long long)blockIdx.x * CHUNK;
    const int n = rows - r0 < CHUNK ? (int)(rows - r0) : CHUNK;
    const float* hp = h + r0 * ldh + c;
    float* dp = d + r0 * ldd + c;
    float acc = 0.0f;
#pragma unroll 8
    for (int r = 0; r < n; ++r) {
        float g = dp[r * ldd];
        if (hp[r * ldh] <= 0.0f) g = 0.0f;  // NaN h keeps its gradient, as numpy's h <= 0
        dp[r * ldd] = g;
        acc += g;
    }
    partial[(long long)blockIdx.x * cols + c] = acc;
}

extern "C" __global__ void fx_sum_partials(const float* __restrict__ partial, long long chunks,
                                           int cols, float* __restrict__ out) {
    const int c = blockIdx.x * blockDim.y + threadIdx.y;
    if (c >= cols) return;  // the whole warp
    float acc = 0.0f;
    for (long long i = threadIdx.x; i < chunks; i += 32) acc += partial[i * cols + c];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0) out[c] = acc;
}

#define CHUNK4 64
#define COLS4 64
#define GROUPS4 4
#define BATCH4 8
__device__ __forceinline__ float relu_grad1(float g, float h, float* acc) {
    g = h <= 0.0f ? 0.0f : g;  // NaN h keeps its gradient, as numpy's h <= 0
    *acc += g;
    return g;
}

extern "C" __global__ void fx_relu_grad_partial4(const float4* __restrict__ h, long long ldh,
                                                 float4* __restrict__ d, long long ldd,
                                                 long long rows, int cols4,
                                                 float* __restrict__ partial) {
    __shared__ float4 part[GROUPS4][COLS4];
    const int c = blockIdx.y * COLS4 + threadIdx.x;
    const long long r0 = (long long)blockIdx.x * CHUNK4 + threadIdx.y;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c < cols4) {
        // BATCH4 rows' loads issued before their stores (d is read and written: the
        // compiler would otherwise keep one row's loads in flight at a time)
#pragma unroll
        for (int i0 = 0; i0 < CHUNK4 / GROUPS4; i0 += BATCH4) {
            float4 g[BATCH4], hv[BATCH4];
#pragma unroll
            for (int i = 0; i < BATCH4; ++i) {
                const long long r = r0 + (long long)(i0 + i) * GROUPS4;
                if (r < rows) {
                    g[i] = d[r * ldd + c];
                    hv[i] = h[r * ldh + c];
                }
            }
#pragma unroll
            for (int i = 0; i < BATCH4; ++i) {
                const long long r = r0 + (long long)(i0 + i) * GROUPS4;
                if (r < rows) {
                    g[i].x = relu_grad1(g[i].x, hv[i].x, &acc.x);
                    g[i].y = relu_grad1(g[i].y, hv[i].y, &acc.y);
                    g[i].z = relu_grad1(g[i].z, hv[i].z, &acc.z);
                    g[i].w = relu_grad1(g[i].w, hv[i].w, &acc.w);
                    d[r * ldd + c] = g[i];
                }
            }
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || c >= cols4) return;
    float4 sum = part[0][threadIdx.x];
    for (int y = 1; y < GROUPS4; ++y) {
        const float4 p = part[y][threadIdx.x];
        sum.x += p.x; sum.y += p.y; sum.z += p.z; sum.w += p.w;
    }
    reinterpret_cast<float4*>(partial + (long long)blockIdx.x * cols4 * 4)[c] = sum;
}
"""
_grad_module = cupy.RawModule(code=_GRAD_SRC)

# The split-K weight gradients' partial products added in split order (deterministic): one
# thread an output element, `out` rows `ld` floats apart.
_sum_splits = cupy.RawKernel(
    r"""
extern "C" __global__ void fx_sum_splits(const float* __restrict__ partials, int splits,
                                         long long rows, int cols, float* __restrict__ out,
                                         long long ld) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long size = rows * cols;
    if (e >= size) return;
    float acc = partials[e];
    for (int s = 1; s < splits; ++s) acc += partials[s * size + e];
    out[(e / cols) * ld + e % cols] = acc;
}
""",
    "fx_sum_splits",
)
#: Split-K for fp32 weight gradients of batches of at least _SPLIT_FROM_K rows: an output
#: tile is 128 x 128 (about what cuBLAS takes), the splits double while the tiles fill less
#: than one wave of the GPU's SMs, each chunk of the batch keeps at least _SPLIT_MIN_K rows,
#: and at most _SPLIT_MAX chunks. On the H200 at 16,384 x 256 this took the fp32 weight
#: gradients from about 195 to 150 µs; with TF32, cuBLAS's own choice (its split-K
#: included) was faster, 55 against 66 µs, so TF32 GEMMs are not split here, nor are short
#: batches (`bench/diag_update_kernels.py`, bench/results/update_kernels_16384x256_*).
_SPLIT_FROM_K: Final = 4096
_SPLIT_TILE: Final = 128
_SPLIT_MIN_K: Final = 256
_SPLIT_MAX: Final = 32


def split_k(m: int, n: int, k: int, sms: int, *, tf32: bool) -> int:
    """How many equal chunks of its inner dimension `k` an ``(m, k) @ (k, n)`` weight
    gradient is split into on a GPU of `sms` multiprocessors (1: not split)."""
    tiles = -(-m // _SPLIT_TILE) * -(-n // _SPLIT_TILE)
    splits = 1
    while (
        not tf32
        and k >= _SPLIT_FROM_K
        and splits < _SPLIT_MAX
        and tiles * splits < sms
        and k % (2 * splits) == 0
        and k // (2 * splits) >= _SPLIT_MIN_K
    ):
        splits *= 2
    return splits


@functools.cache
def _relu_grad_partial4() -> Any:
    return _grad_module.get_function("fx_relu_grad_partial4")


def _float4_rows(*arrays: F32) -> bool:
    """Whether each (rows, cols) float32 array's rows are whole, 16-byte aligned float4s."""
    return all(
        x.shape[1] % 4 == 0
        and x.strides[1] == x.itemsize
        and (x.strides[0] // x.itemsize) % 4 == 0
        and x.data.ptr % 16 == 0  # type: ignore[attr-defined]
        for x in arrays
    )


@functools.cache
def _relu_grad_partial() -> Any:
    return _grad_module.get_function("fx_relu_grad_partial")


@functools.cache
def _sum_partials() -> Any:
    return _grad_module.get_function("fx_sum_partials")


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

    def __init__(
        self,
        *,
        tf32: bool = False,
        cuda_graph: bool = True,
        epilogues: Iterable[int] = DEFAULT_EPILOGUES,
    ) -> None:
        self._ones_cache: F32 = cupy.ones(0, dtype=cupy.float32)
        self._partials: F32 = cupy.empty(0, dtype=cupy.float32)
        self._split_scratch: F32 = cupy.empty(0, dtype=cupy.float32)
        self._sum_scratch = cupy.empty(_SUM64_MAX_BLOCKS, dtype=cupy.float64)
        self._sms = int(cupy.cuda.Device().attributes["MultiProcessorCount"])
        self._tf32 = tf32
        self._blas = Cublas(tf32=tf32)
        self._cuda_graph = cuda_graph
        self._lt: CublasLt | None = None
        self.epilogues = set(epilogues)
        """The cuBLASLt epilogues to use (set before the first update: see DEFAULT_EPILOGUES)."""
        self.refused: set[int] = set()
        """The cuBLASLt epilogues that refused a GEMM here (those use the separate kernels)."""
        try:  # fused bias/ReLU epilogues; without them, the separate kernels below
            self._lt = CublasLt(tf32=tf32, workspace=self._blas.workspace)
        except (OSError, RuntimeError) as err:
            logger.warning("cuBLASLt epilogues unavailable (%s): separate bias/ReLU kernels", err)

    def _fused(
        self, a: F32, b: F32, out: F32, epilogue: int, bias: F32, mask: _Mask | None = None
    ) -> bool:
        """``out = epilogue(a @ b)`` by cuBLASLt; False (and that epilogue not tried again)
        where cuBLASLt is missing or refuses it: the caller runs the separate kernels."""
        lt = self._lt
        if lt is None or epilogue not in self.epilogues or epilogue in self.refused:
            return False
        try:
            if mask is None:
                lt.matmul(a, b, out, epilogue=epilogue, bias=bias)
            else:
                lt.matmul(a, b, out, epilogue=epilogue, bias=bias, aux=mask.bits, aux_ld=mask.ld)
        except RuntimeError as err:
            logger.warning("cuBLASLt epilogue %d refused (%s): separate kernels", epilogue, err)
            self.refused.add(epilogue)
            return False
        return True

    def relu_mask(self, rows: int, cols: int) -> _Mask | None:
        if self._lt is None or EPILOGUE_RELU_AUX_BIAS not in self.epilogues:
            return None
        bits = -(-cols // MASK_BITS_ALIGN) * MASK_BITS_ALIGN
        return _Mask(cupy.zeros(bits // 8 * rows, dtype=cupy.uint8), bits)

    def dense_relu(self, x: F32, w: F32, bias: F32, out: F32, mask: _Mask | None) -> None:
        if mask is not None:
            mask.written = self._fused(x, w, out, EPILOGUE_RELU_AUX_BIAS, bias, mask)
            if mask.written:  # the backward pass reads the mask only if this GEMM wrote it
                return
        if not self._fused(x, w, out, EPILOGUE_RELU_BIAS, bias):
            self.matmul(x, w, out)
            self.bias_relu(out, bias)

    def dense_relu_grad(
        self, d: F32, w_t: F32, h: F32, mask: _Mask | None, out: F32, bias_grad: F32
    ) -> None:
        fused = mask is not None and mask.written
        if fused and self._fused(d, w_t, out, EPILOGUE_DRELU_BGRAD, bias_grad, mask):
            return
        self.matmul(d, w_t, out)
        self.relu_grad_col_sum(h, out, bias_grad)

    def relu_grad_col_sum(self, h: F32, grad: F32, out: F32) -> None:
        """``grad *= (h > 0)`` and ``out = grad.sum(axis=0)`` in one pass over `grad`: column
        sums of fixed chunks of rows, then of the chunks in order (deterministic)."""
        rows, cols = grad.shape
        if h.shape != grad.shape:
            raise ValueError(f"relu_grad_col_sum: h {h.shape} and grad {grad.shape} differ")
        if not rows or h.strides[1] != h.itemsize or grad.strides[1] != grad.itemsize:
            self.relu_grad(h, grad)
            self.col_sum(grad, out)
            return
        ldh, ldd = h.strides[0] // h.itemsize, grad.strides[0] // grad.itemsize
        vector = _float4_rows(h, grad)
        chunks = -(-rows // (_GRAD4_CHUNK if vector else _GRAD_CHUNK))
        if self._partials.size < chunks * cols:
            self._partials = cupy.empty(chunks * cols, dtype=cupy.float32)
        partials = self._partials
        if vector:
            _relu_grad_partial4()(
                (chunks, -(-cols // (4 * _GRAD4_COLS))),
                (_GRAD4_COLS, _GRAD4_GROUPS),
                (
                    h, np.int64(ldh // 4), grad, np.int64(ldd // 4), np.int64(rows),
                    np.int32(cols // 4), partials,
                ),
            )  # fmt: skip
        else:
            _relu_grad_partial()(
                (chunks, -(-cols // _GRAD_COLS)),
                (_GRAD_COLS,),
                (h, np.int64(ldh), grad, np.int64(ldd), np.int64(rows), np.int32(cols), partials),
            )
        args = (partials, np.int64(chunks), np.int32(cols), out)
        _sum_partials()((-(-cols // _SUM_COLS),), (32, _SUM_COLS), args)

    def _ones(self, n: int) -> F32:
        if self._ones_cache.shape[0] < n:
            self._ones_cache = cupy.ones(n, dtype=cupy.float32)
        return self._ones_cache[:n]

    def matmul(self, a: F32, b: F32, out: F32 | None = None) -> F32:
        if out is None:
            out = cupy.empty((a.shape[0], b.shape[1]), dtype=cupy.float32)
        self._blas.gemm(a, b, out)
        return out

    def grad_matmul(self, a: F32, b: F32, out: F32) -> None:
        (m, k), n = a.shape, b.shape[1]
        splits = split_k(m, n, k, self._sms, tf32=self._tf32)
        if splits == 1 or out.strides[1] != out.itemsize:
            self.matmul(a, b, out)
            return
        if self._split_scratch.size < splits * m * n:
            self._split_scratch = cupy.empty(splits * m * n, dtype=cupy.float32)
        partials = self._split_scratch[: splits * m * n].reshape(splits, m, n)
        self._blas.gemm_split_k(a, b, partials, splits)
        threads = 256
        _sum_splits(
            (-(-m * n // threads),),
            (threads,),
            (
                partials, np.int32(splits), np.int64(m), np.int32(n), out,
                np.int64(out.strides[0] // out.itemsize),
            ),
        )  # fmt: skip

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
        self._sum64(x, out, square=True)

    def total(self, x: F32, out: F32) -> None:
        self._sum64(x, out, square=False)

    def _sum64(self, x: F32, out: Any, *, square: bool) -> None:
        """``out`` (a float64 0-d array) = the float64 sum of `x`'s values (or of their
        squares), in an order fixed by `x`'s size."""
        x = cupy.ascontiguousarray(x)
        n = x.size
        blocks = max(1, min(_SUM64_MAX_BLOCKS, -(-n // (_SUM64_THREADS * 4))))
        partial = self._sum_scratch
        _sum64("fx_sum64_pass1")(
            (blocks,), (_SUM64_THREADS,), (x, np.int64(n), np.int32(square), partial)
        )
        _sum64("fx_sum64_pass2")((1,), (_SUM64_THREADS,), (partial, np.int32(blocks), out))

    def q_values(self, head: F32, bias: F32, support: F32) -> F32:
        rows, width = head.shape
        n_atoms = support.shape[0]
        n_actions = width // n_atoms - 1
        q: F32 = cupy.empty((rows, n_actions), dtype=cupy.float32)
        if rows:
            kernel = _dueling_kernel("fx_q_values", n_atoms, n_actions, _row_stride(head))
            kernel(_grid(rows), (32 * _WARPS,), (head, bias, support, np.int64(rows), q))
        return q

    def c51(self, h: C51Arrays, d_head: F32, ce: F32, weighted_ce: F32) -> None:
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

    def adam(self, s: AdamArrays) -> None:
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


@dataclass(slots=True)
class _Mask:
    """A torso layer's ReLU bit mask from cuBLASLt (column-major over the layer's output
    transposed: `ld` bits a row of the activation) and whether the last forward wrote it."""

    bits: Any
    ld: int
    written: bool = False


class _Replay:
    """A captured graph with what must outlive it (its memory pool and capture stream)."""

    def __init__(self, graph: Any, pool: Any, stream: Any) -> None:
        self._graph, self._pool, self._stream = graph, pool, stream

    def __call__(self) -> None:
        self._graph.launch(stream=cupy.cuda.get_current_stream())
