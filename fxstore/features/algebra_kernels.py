"""The numba kernel behind expression features: one causal pass over the bars for a whole set.

A feature set's expressions are compiled (:mod:`fxstore.features.program`) into a list of
nodes in dependency order, each an opcode and its operands (earlier nodes, an input column,
literal parameters). :func:`run_program` is one kernel, compiled once per machine (cached on
disk), that interprets that list column-at-a-time over blocks of bars: for each block of
:data:`BLOCK` bars, every node in turn computes its values for the block from its operands'
values (still in cache) and its own state (a running sum, the EMA, a ring buffer of its
window), which it carries to the next block. No Python runs per bar, no per-set code is
compiled, and a node's value at bar t depends on bars ``0 .. t`` alone, bit for bit the same
whatever follows (the blocks start at multiples of BLOCK whatever the length).

State restarts where a node begins (the first bar its operands are defined) and, for nodes
of a ``reset = "session"`` feature, at each trading day's first bar. See
:mod:`fxstore.features.algebra` for the warm-up and reset rules these loops implement.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit_inner, njit_numpy_errors

__all__ = ["BLOCK", "FIELDS", "OPCODES", "run_program"]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

#: Bars per block: a node's block of float64 values is 16 KiB, so a block's operands stay
#: in the core's caches while the next nodes read them.
BLOCK: Final = 2048

#: Opcodes, by name (the compiler's and the kernel's shared vocabulary).
OPCODES: Final = {
    name: code
    for code, name in enumerate(
        (
            "input",  # A: row of the inputs array
            "const",  # P0: the value
            "ref32",  # A: node; its value rounded to float32 (another feature's column)
            "copy",  # A: node
            "add",  # A, B: nodes
            "sub",
            "mul",
            "div",
            "neg",  # A
            "clip",  # A; P0, P1: bounds
            "ema",  # A; COUNT: span; P0: alpha
            "rolling_sum",  # A; COUNT: window
            "rolling_mean",
            "rolling_std",
            "rolling_zscore",
            "rolling_min",
            "rolling_max",
            "lag",  # A; COUNT: k
            "diff",
        )
    )
}
#: Columns of a program's int64 node table.
FIELDS: Final = {
    name: i
    for i, name in enumerate(("op", "a", "b", "count", "reset", "begin", "out", "ring", "cap"))
}
_INPUT, _CONST, _REF32, _COPY = 0, 1, 2, 3
_ADD, _SUB, _MUL, _DIV, _NEG, _CLIP = 4, 5, 6, 7, 8, 9
_EMA, _RSUM, _RMEAN, _RSTD, _RZSCORE, _RMIN, _RMAX, _LAG, _DIFF = range(10, 19)
#: A window whose variance is below this fraction of its mean square is constant (std 0):
#: running sums leave rounding residue where the values are all equal.
_CONSTANT_VARIANCE = 1e-12


@njit_inner
def _ema(
    src: F64, dst: F64, t0: int, m: int, restart: U8, node: I64, alpha: float, f: F64, s: I64
) -> None:
    span, reset, begin = node[3], node[4], node[5]
    e, c = f[0], s[0]
    for i in range(m):
        t = t0 + i
        if t < begin:
            dst[i] = np.nan
            continue
        x = src[i]
        if t == begin or (reset and restart[t]):
            e, c = x, 1
        else:
            e += alpha * (x - e)
            c = min(c + 1, span)
        dst[i] = e if reset or c >= span else np.nan
    f[0], s[0] = e, c


@njit_inner
def _window(
    src: F64, dst: F64, t0: int, m: int, restart: U8, node: I64, ring: F64, f: F64, s: I64
) -> None:
    """Rolling sum, mean, std or z-score over the window (values shifted by the first one,
    so the running sums of squares keep their precision on prices)."""
    op, w, reset, begin = node[0], node[3], node[4], node[5]
    total, squares, shift = f[0], f[1], f[2]
    c, pos = s[0], s[1]
    for i in range(m):
        t = t0 + i
        if t < begin:
            dst[i] = np.nan
            continue
        x = src[i]
        if t == begin or (reset and restart[t]):
            c, pos, total, squares, shift = 0, 0, 0.0, 0.0, x
        d = x - shift
        if c == w:
            old = ring[pos]
            total -= old
            squares -= old * old
        else:
            c += 1
        ring[pos] = d
        pos = pos + 1 if pos + 1 < w else 0
        total += d
        squares += d * d
        if c < w and not reset:
            dst[i] = np.nan
            continue
        mean = total / c
        if op == _RSUM:
            dst[i] = total + c * shift
        elif op == _RMEAN:
            dst[i] = mean + shift
        else:
            mean_square = squares / c
            var = mean_square - mean * mean
            std = math.sqrt(var) if var > _CONSTANT_VARIANCE * mean_square else 0.0
            if op == _RSTD:
                dst[i] = std
            else:
                dst[i] = (d - mean) / std if std > 0.0 else 0.0
    f[0], f[1], f[2] = total, squares, shift
    s[0], s[1] = c, pos


@njit_inner
def _extreme(
    src: F64, dst: F64, t0: int, m: int, restart: U8, node: I64, values: F64, bars: I64, s: I64
) -> None:
    """Rolling min or max: a monotone queue of (bar, value) in a power-of-two ring."""
    is_max, w, reset, begin, mask = node[0] == _RMAX, node[3], node[4], node[5], node[8] - 1
    head, tail, c = s[0], s[1], s[2]
    for i in range(m):
        t = t0 + i
        if t < begin:
            dst[i] = np.nan
            continue
        x = src[i]
        if t == begin or (reset and restart[t]):
            head, tail, c = 0, 0, 0
        c = min(c + 1, w)
        if is_max:
            while tail > head and values[(tail - 1) & mask] <= x:
                tail -= 1
        else:
            while tail > head and values[(tail - 1) & mask] >= x:
                tail -= 1
        values[tail & mask] = x
        bars[tail & mask] = t
        tail += 1
        if bars[head & mask] <= t - w:
            head += 1
        dst[i] = values[head & mask] if reset or c >= w else np.nan
    s[0], s[1], s[2] = head, tail, c


@njit_inner
def _lag(
    src: F64, dst: F64, t0: int, m: int, restart: U8, node: I64, ring: F64, f: F64, s: I64
) -> None:
    is_diff, k, reset, begin = node[0] == _DIFF, node[3], node[4], node[5]
    first = f[0]
    c, pos = s[0], s[1]
    for i in range(m):
        t = t0 + i
        if t < begin:
            dst[i] = np.nan
            continue
        x = src[i]
        if t == begin or (reset and restart[t]):
            c, pos, first = 0, 0, x
        past = ring[pos] if c >= k else (first if reset else np.nan)
        ring[pos] = x
        pos = pos + 1 if pos + 1 < k else 0
        c = min(c + 1, k)
        dst[i] = x - past if is_diff else past
    f[0] = first
    s[0], s[1] = c, pos


@njit_inner
def _elementwise(op: int, a: F64, b: F64, p: F64, dst: F64, m: int) -> None:
    if op == _ADD:
        for i in range(m):
            dst[i] = a[i] + b[i]
    elif op == _SUB:
        for i in range(m):
            dst[i] = a[i] - b[i]
    elif op == _MUL:
        for i in range(m):
            dst[i] = a[i] * b[i]
    elif op == _DIV:
        for i in range(m):
            dst[i] = a[i] / b[i]
    elif op == _NEG:
        for i in range(m):
            dst[i] = -a[i]
    elif op == _CLIP:
        lo, hi = p[0], p[1]
        for i in range(m):
            v = a[i]  # comparisons with NaN are false: NaN stays NaN
            dst[i] = lo if v < lo else (hi if v > hi else v)
    elif op == _REF32:
        for i in range(m):
            dst[i] = np.float64(np.float32(a[i]))
    else:  # copy
        for i in range(m):
            dst[i] = a[i]


@njit_inner
def _step(
    k: int,
    nodes: I64,
    params: F64,
    inputs: F64,
    restart: U8,
    t0: int,
    m: int,
    slots: F64,
    state: tuple[F64, I64, F64, I64],
) -> None:
    """Node `k`'s values for bars ``t0 .. t0 + m - 1`` into ``slots[k]``."""
    node, dst = nodes[k], slots[k]
    f, s, ring, ring_bars = state[0][k], state[1][k], state[2], state[3]
    op, a = node[0], node[1]
    if op == _INPUT:
        dst[:m] = inputs[a, t0 : t0 + m]
    elif op == _CONST:
        pass  # filled once
    elif op < _EMA:
        _elementwise(op, slots[a], slots[node[2]], params[k], dst, m)
    else:
        lo, cap = node[7], node[8]
        window_ring, queue_bars = ring[lo : lo + cap], ring_bars[lo : lo + cap]
        if op == _EMA:
            _ema(slots[a], dst, t0, m, restart, node, params[k, 0], f, s)
        elif op <= _RZSCORE:
            _window(slots[a], dst, t0, m, restart, node, window_ring, f, s)
        elif op <= _RMAX:
            _extreme(slots[a], dst, t0, m, restart, node, window_ring, queue_bars, s)
        else:
            _lag(slots[a], dst, t0, m, restart, node, window_ring, f, s)


@njit_numpy_errors
def run_program(
    nodes: I64, params: F64, inputs: F64, restart: U8, ring_size: int, lo: int, hi: int, out: F32
) -> None:
    """Run a compiled program over bars ``0 .. hi - 1``; write its outputs' kept bars.

    Parameters
    ----------
    nodes
        int64 (n_nodes, len(FIELDS)): the nodes in dependency order (operands first).
    params
        float64 (n_nodes, 2): literal parameters (constants, clip bounds, EMA alpha).
    inputs
        float64 (n_inputs, >= hi): bar columns and built-in features the program reads.
    restart
        uint8 (>= hi,): 1 on each trading day's first bar (restarts of reset nodes).
    ring_size
        Total length of the nodes' rings (their ``cap`` summed).
    lo, hi
        The kept bars: a node with an output row ``r >= 0`` writes bar t's value, rounded
        to float32, to ``out[r, t - lo]`` for ``lo <= t < hi``.
    out
        float32 (rows, hi - lo).
    """
    n_nodes = nodes.shape[0]
    slots = np.empty((n_nodes, BLOCK))
    state = (
        np.zeros((n_nodes, 3)),
        np.zeros((n_nodes, 3), dtype=np.int64),
        np.zeros(max(ring_size, 1)),
        np.zeros(max(ring_size, 1), dtype=np.int64),
    )
    for k in range(n_nodes):
        if nodes[k, 0] == _CONST:
            slots[k, :] = params[k, 0]
    for t0 in range(0, hi, BLOCK):
        m = min(BLOCK, hi - t0)
        for k in range(n_nodes):
            _step(k, nodes, params, inputs, restart, t0, m, slots, state)
            row = nodes[k, 6]
            if row >= 0:
                for t in range(max(t0, lo), t0 + m):
                    out[row, t - lo] = slots[k, t - t0]
