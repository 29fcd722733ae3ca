"""CuPy: the ε-greedy choice of :meth:`fxstore.train.agent.dqn.Agent.act` in one launch.

Only :meth:`Agent.act` imports this module, and only for CuPy Q-values and a counter-based
generator (the training loop's): it imports CuPy at import time. The generic path takes
about 36 CuPy calls a step, counted from the code (an argmax; two counter draws of
:func:`fxstore.train.gpu.rng.uniform`, 14 calls each; a compare; a scale, cast, clamp and shift;
a select and a cast): on the H200 the host spent ~1.1 ms a step issuing an action at 4,096
environments (``bench/diag_loop_phases.py --sync``). One thread per environment does it here
with the same draws, bit for bit: the greedy action is the first largest Q (a NaN counting as
largest, as numpy's argmax), and with probability ε (draw i of ``counter`` < ε) the action is
draw i of ``counter + 1`` scaled to the actions and clamped, as ``integers(0, n_actions, n)``.
"""

from __future__ import annotations

import functools
from typing import Any

import cupy
import numpy as np

from fxstore.train.gpu.rng import CUDA_SOURCE

__all__ = ["epsilon_greedy"]

_THREADS = 256

_SOURCE = (
    CUDA_SOURCE
    + r"""
extern "C" __global__ void fx_epsilon_greedy(const float* q, i64 n, i64 n_actions, i64 ld,
                                             double epsilon, u64 base_explore,
                                             u64 base_random, i64* action) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* row = q + i * ld;
    i64 best = 0;
    float top = row[0];
    for (i64 a = 1; a < n_actions; ++a) {
        const float v = row[a];
        if (!isnan(top) && (v > top || isnan(v))) {
            best = a;
            top = v;
        }
    }
    if (fx_uniform(base_explore, (u64)i) < epsilon) {
        const i64 draw = (i64)(fx_uniform(base_random, (u64)i) * (double)n_actions);
        best = draw < n_actions - 1 ? draw : n_actions - 1;
    }
    action[i] = best;
}
"""
)


@functools.cache
def _kernel() -> Any:
    module = cupy.RawModule(code=_SOURCE, options=("--fmad=false", "--std=c++11"))
    return module.get_function("fx_epsilon_greedy")


def epsilon_greedy(q: Any, epsilon: float, base_explore: int, base_random: int) -> Any:
    """(n,) int64 actions from float32 CuPy Q-values (n, n_actions) whose rows are
    contiguous: greedy, or with probability `epsilon` uniform, from the draws of the counter
    bases `base_explore` and `base_random` (:func:`fxstore.train.gpu.rng.counter_base`)."""
    n, n_actions = q.shape
    out = cupy.empty(n, dtype=cupy.int64)
    if n:
        _kernel()(
            (-(-n // _THREADS),),
            (_THREADS,),
            (
                q, np.int64(n), np.int64(n_actions), np.int64(q.strides[0] // 4),
                np.float64(epsilon), np.uint64(base_explore), np.uint64(base_random), out,
            ),
        )  # fmt: skip
    return out
