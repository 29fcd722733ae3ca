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

from fxstore._jit import njit_fma, njit_numpy_errors

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
            "ema_group",  # EMAs of one operand, one loop: RING, CAP: offset and size in groups
            "ema_member",  # an EMA computed by its group's first member
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
_EMA_GROUP, _EMA_MEMBER = 19, 20
#: A window whose variance is below this fraction of its mean square is constant (std 0):
#: running sums leave rounding residue where the values are all equal.
_CONSTANT_VARIANCE = 1e-12


# Each stateful loop computes rows ``first .. m - 1`` of a block (earlier ones are NaN: the
# node has not begun) in segments: ``cuts[:n_cuts]`` are the rows where its state restarts
# (where it begins, and each trading day's first bar for a reset node). Within a segment a
# warm-up phase (fewer values than the span: partial windows, or NaN without reset) runs
# before the steady loop, which carries no counts and no restart checks.


@njit_fma
def _ema(
    src: F64, dst: F64, first: int, cuts: I64, n_cuts: int, node: I64, a: float, f: F64, s: I64
) -> None:
    span, reset = node[3], node[4]
    b = 1.0 - a
    e, c = f[0], s[0]
    m = dst.shape[0]
    i, k = first, 0
    while i < m:
        if k < n_cuts and cuts[k] == i:
            e, c = src[i], 1
            dst[i] = e if reset or span == 1 else np.nan
            i, k = i + 1, k + 1
        end = cuts[k] if k < n_cuts else m
        while i < end and c < span:
            e = b * e + a * src[i]
            c += 1
            dst[i] = e if reset or c >= span else np.nan
            i += 1
        for j in range(i, end):
            e = b * e + a * src[j]
            dst[j] = e
        i = max(i, end)
    f[0], s[0] = e, c


@njit_fma
def _moments(op: int, d: float, total: float, squares: float, c: int, shift: float) -> float:
    """A window's sum, mean, std or z-score of its last value `d` (values shifted by
    `shift`), from its running sums over `c` values."""
    mean = total / c
    if op == _RSUM:
        return total + c * shift
    if op == _RMEAN:
        return mean + shift
    mean_square = squares / c
    var = mean_square - mean * mean
    std = math.sqrt(var) if var > _CONSTANT_VARIANCE * mean_square else 0.0
    if op == _RSTD:
        return std
    return (d - mean) / std if std > 0.0 else 0.0


@njit_fma
def _full_windows(
    op: int,
    src: F64,
    dst: F64,
    ring: F64,
    w: int,
    pos: int,
    total: float,
    squares: float,
    shift: float,
    scratch: F64,
) -> tuple[float, float, int]:
    """Rows of full windows (the oldest value leaves as each enters); returns the running
    sums and the ring position. The running sums are one serial loop; a std or z-score
    then takes its square roots and divisions in a second loop with no dependence from
    row to row (vectorised)."""
    inv_w = 1.0 / w
    m = src.shape[0]
    for j in range(m):
        d = src[j] - shift
        old = ring[pos]
        ring[pos] = d
        pos = pos + 1 if pos + 1 < w else 0
        total += d - old
        if op == _RSUM:
            dst[j] = total + w * shift
            continue
        mean = total * inv_w
        if op == _RMEAN:
            dst[j] = mean + shift
            continue
        squares += d * d - old * old
        mean_square = squares * inv_w
        var = mean_square - mean * mean
        dst[j] = var if var > _CONSTANT_VARIANCE * mean_square else 0.0
        scratch[j] = d - mean
    if op == _RSTD:
        for j in range(m):
            dst[j] = math.sqrt(dst[j])
    elif op == _RZSCORE:
        for j in range(m):
            std = math.sqrt(dst[j])
            dst[j] = scratch[j] / std if std > 0.0 else 0.0
    return total, squares, pos


@njit_fma
def _window(
    src: F64,
    dst: F64,
    first: int,
    cuts: I64,
    n_cuts: int,
    node: I64,
    ring: F64,
    f: F64,
    s: I64,
    scratch: F64,
) -> None:
    """Rolling sum, mean, std or z-score over the window (values shifted by the restart's
    first one, so the running sums of squares keep their precision on prices)."""
    op, w, reset = node[0], node[3], node[4]
    total, squares, shift = f[0], f[1], f[2]
    c, pos = s[0], s[1]
    m = dst.shape[0]
    i, k = first, 0
    while i < m:
        if k < n_cuts and cuts[k] == i:
            c, pos, total, squares, shift = 0, 0, 0.0, 0.0, src[i]
            k += 1
        end = cuts[k] if k < n_cuts else m
        while i < end and c < w:  # filling the window
            d = src[i] - shift
            ring[c] = d
            c += 1
            total += d
            squares += d * d
            dst[i] = _moments(op, d, total, squares, c, shift) if reset or c == w else np.nan
            i += 1
        if i < end:
            total, squares, pos = _full_windows(
                op, src[i:end], dst[i:end], ring, w, pos, total, squares, shift, scratch
            )
        i = max(i, end)
    f[0], f[1], f[2] = total, squares, shift
    s[0], s[1] = c, pos


@njit_fma
def _max(a: float, b: float) -> float:
    """The greater of `a` and `b`, NaN if either is (`a` on a tie)."""
    return a if a >= b or a != a else b


@njit_fma
def _suffix_maxima(raw: F64, suffix: F64) -> None:
    """``suffix[j] = max(raw[j:])`` for a completed chunk; ``suffix[w]`` is the identity."""
    w = raw.shape[0]
    acc = -np.inf
    suffix[w] = acc
    for j in range(w - 1, -1, -1):
        acc = _max(raw[j], acc)
        suffix[j] = acc


@njit_fma
def _extreme(
    src: F64, dst: F64, first: int, cuts: I64, n_cuts: int, node: I64, ring: F64, f: F64, s: I64
) -> None:
    """Rolling min or max by van Herk and Gil-Werman: the bars since the restart are cut in
    chunks of w; the window ending at position j of a chunk is the greater of that chunk's
    running maximum through j and the previous chunk's maximum from j + 1 to its end
    (computed once, backwards, as the chunk completes). Two passes per value and no branch
    on the data, where a monotone queue mispredicts on every value it pops. A window that
    holds a NaN is NaN. A minimum is the maximum of the negated values, negated (exact)."""
    w, reset = node[3], node[4]
    sign = 1.0 if node[0] == _RMAX else -1.0
    raw, suffix = ring[:w], ring[w : 2 * w + 1]
    prefix = f[0]
    pos, have_prev = s[0], s[1]
    m = dst.shape[0]
    i, k = first, 0
    while i < m:
        if k < n_cuts and cuts[k] == i:
            pos, have_prev, prefix = 0, 0, -np.inf
            k += 1
        end = cuts[k] if k < n_cuts else m
        while i < end:
            run = min(end - i, w - pos)
            if have_prev:
                for j in range(run):
                    x = sign * src[i + j]
                    raw[pos + j] = x
                    prefix = _max(prefix, x)
                    dst[i + j] = sign * _max(suffix[pos + j + 1], prefix)
            else:  # the restart's first chunk: partial windows (NaN before w without reset)
                for j in range(run):
                    x = sign * src[i + j]
                    raw[pos + j] = x
                    prefix = _max(prefix, x)
                    dst[i + j] = sign * prefix if reset or pos + j + 1 == w else np.nan
            pos, i = pos + run, i + run
            if pos == w:
                _suffix_maxima(raw, suffix)
                pos, have_prev, prefix = 0, 1, -np.inf
    f[0] = prefix
    s[0], s[1] = pos, have_prev


@njit_fma
def _lag(
    src: F64, dst: F64, first: int, cuts: I64, n_cuts: int, node: I64, ring: F64, f: F64, s: I64
) -> None:
    is_diff, lag, reset = node[0] == _DIFF, node[3], node[4]
    start = f[0]
    c, pos = s[0], s[1]
    m = dst.shape[0]
    i, k = first, 0
    while i < m:
        if k < n_cuts and cuts[k] == i:
            c, pos, start = 0, 0, src[i]
            k += 1
        end = cuts[k] if k < n_cuts else m
        while i < end and c < lag:  # fewer than k bars behind: the restart's value, or NaN
            x = src[i]
            past = start if reset else np.nan
            ring[c] = x
            c += 1
            dst[i] = x - past if is_diff else past
            i += 1
        for j in range(i, end):
            x = src[j]
            past = ring[pos]
            ring[pos] = x
            pos = pos + 1 if pos + 1 < lag else 0
            dst[j] = x - past if is_diff else past
        i = max(i, end)
    f[0] = start
    s[0], s[1] = c, pos


@njit_fma
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


@njit_fma
def _ema4(
    src: F64,
    dst: tuple[F64, F64, F64, F64],
    first: int,
    cuts: I64,
    n_cuts: int,
    span: I64,
    a: F64,
    e: F64,
    c: int,
    reset: int,
) -> int:
    """Four EMAs of `src` side by side (independent recursions, in registers); `e` holds
    their states in and out. Returns the shared count of values since the restart."""
    d0, d1, d2, d3 = dst
    a0, a1, a2, a3 = a[0], a[1], a[2], a[3]
    b0, b1, b2, b3 = 1.0 - a0, 1.0 - a1, 1.0 - a2, 1.0 - a3
    e0, e1, e2, e3 = e[0], e[1], e[2], e[3]
    longest = span.max()
    m = src.shape[0]
    i, k = first, 0
    while i < m:
        if k < n_cuts and cuts[k] == i:  # a restart: each EMA starts at x
            c = 1
            e0 = e1 = e2 = e3 = src[i]
            for lane, row in enumerate(dst):
                row[i] = src[i] if reset or span[lane] == 1 else np.nan
            i, k = i + 1, k + 1
        end = cuts[k] if k < n_cuts else m
        while i < end and c < longest:
            x = src[i]
            e0, e1, e2, e3 = b0 * e0 + a0 * x, b1 * e1 + a1 * x, b2 * e2 + a2 * x, b3 * e3 + a3 * x
            c += 1
            d0[i] = e0 if reset or c >= span[0] else np.nan
            d1[i] = e1 if reset or c >= span[1] else np.nan
            d2[i] = e2 if reset or c >= span[2] else np.nan
            d3[i] = e3 if reset or c >= span[3] else np.nan
            i += 1
        for j in range(i, end):
            x = src[j]
            e0 = b0 * e0 + a0 * x
            e1 = b1 * e1 + a1 * x
            e2 = b2 * e2 + a2 * x
            e3 = b3 * e3 + a3 * x
            d0[j] = e0
            d1[j] = e1
            d2[j] = e2
            d3[j] = e3
        i = max(i, end)
    e[0], e[1], e[2], e[3] = e0, e1, e2, e3
    return c


@njit_fma
def _ema_group(
    src: F64,
    slots: F64,
    first: int,
    cuts: I64,
    n_cuts: int,
    members: I64,
    nodes: I64,
    params: F64,
    state: tuple[F64, I64],
) -> None:
    """Several EMAs of one operand (same begin and restarts), four at a time: their
    recursions are independent, so they run side by side instead of each waiting on its
    own chain."""
    n = members.shape[0]
    reset = nodes[members[0], 4]
    c = state[1][members[0], 0]
    span, a, e = np.empty(4, dtype=np.int64), np.empty(4), np.empty(4)
    c_out = c
    for g0 in range(0, n, 4):
        lanes = [members[min(g0 + lane, n - 1)] for lane in range(4)]  # the last repeats
        for lane in range(4):
            span[lane] = nodes[lanes[lane], 3]
            a[lane] = params[lanes[lane], 0]
            e[lane] = state[0][lanes[lane], 0]
            slots[lanes[lane], :first] = np.nan
        rows = (slots[lanes[0]], slots[lanes[1]], slots[lanes[2]], slots[lanes[3]])
        c_out = _ema4(src, rows, first, cuts, n_cuts, span, a, e, c, reset)
        for lane in range(4):
            state[0][lanes[lane], 0] = e[lane]
    state[1][members[0], 0] = c_out


@njit_fma
def _cuts(node: I64, t0: int, m: int, days: I64, n_days: int, cuts: I64) -> tuple[int, int]:
    """Rows of the block where node's state restarts, into `cuts`; returns the first row
    it computes (before: NaN) and the number of cuts."""
    begin, reset = node[5] - t0, node[4]
    if begin >= m:
        return m, 0
    first = max(begin, 0)
    n = 0
    if begin >= 0:
        cuts[0] = begin
        n = 1
    if reset:
        for k in range(n_days):
            if days[k] > begin:
                cuts[n] = days[k]
                n += 1
    return first, n


@njit_fma
def _step(
    k: int,
    nodes: I64,
    params: F64,
    inputs: F64,
    t0: int,
    m: int,
    days: tuple[I64, int],
    slots: F64,
    state: tuple[F64, I64, F64, I64, I64, F64],
) -> None:
    """Node `k`'s values for bars ``t0 .. t0 + m - 1`` into ``slots[k]``."""
    node, dst = nodes[k], slots[k, :m]
    f, s, ring, cuts = state[0][k], state[1][k], state[2], state[3]
    op, a = node[0], node[1]
    if op == _INPUT:
        dst[:] = inputs[a, t0 : t0 + m]
        return
    if op in (_CONST, _EMA_MEMBER):
        return  # filled once, or by its group
    if op < _EMA:
        _elementwise(op, slots[a], slots[node[2]], params[k], dst, m)
        return
    first, n_cuts = _cuts(node, t0, m, days[0], days[1], cuts)
    dst[:first] = np.nan
    src = slots[a, :m]
    lo, cap = node[7], node[8]
    if op == _EMA_GROUP:
        members = state[4][lo : lo + cap]
        _ema_group(src, slots[:, :m], first, cuts, n_cuts, members, nodes, params, state[:2])
        return
    window_ring = ring[lo : lo + cap]
    if op == _EMA:
        _ema(src, dst, first, cuts, n_cuts, node, params[k, 0], f, s)
    elif op <= _RZSCORE:
        _window(src, dst, first, cuts, n_cuts, node, window_ring, f, s, state[5])
    elif op <= _RMAX:
        _extreme(src, dst, first, cuts, n_cuts, node, window_ring, f, s)
    else:
        _lag(src, dst, first, cuts, n_cuts, node, window_ring, f, s)


@njit_fma
def _has_nonfinite(x: F32) -> bool:
    """Whether float32 `x` holds a NaN or an infinity (a branch-free pass: vectorised)."""
    exponent = np.uint32(0x7F800000)
    found = np.uint32(0)
    bits = x.view(np.uint32)
    for i in range(bits.shape[0]):
        found |= np.uint32((bits[i] & exponent) == exponent)
    return bool(found != 0)


@njit_numpy_errors
def run_program(
    nodes: I64,
    params: F64,
    inputs: F64,
    restart: U8,
    ring_size: int,
    lo: int,
    hi: int,
    out: F32,
    is_bad: npt.NDArray[np.bool_],
    groups: I64,
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
    is_bad
        bool (rows,), False on entry: set where a row's kept values hold a NaN or an
        infinity (checked block by block while in cache).
    groups
        int64: the members of each EMA group (node indices), each group's run at its
        first member's ``ring`` offset, ``cap`` long.
    """
    n_nodes = nodes.shape[0]
    slots = np.empty((n_nodes, BLOCK))
    state = (
        np.zeros((n_nodes, 3)),
        np.zeros((n_nodes, 3), dtype=np.int64),
        np.zeros(max(ring_size, 1)),
        np.empty(BLOCK + 1, dtype=np.int64),  # a node's restart rows in a block
        groups,
        np.empty(BLOCK),  # a window's deviations from its mean, for its z-scores
    )
    days = np.empty(BLOCK, dtype=np.int64)  # the block's trading days' first rows
    for k in range(n_nodes):
        if nodes[k, 0] == _CONST:
            slots[k, :] = params[k, 0]
    for t0 in range(0, hi, BLOCK):
        m = min(BLOCK, hi - t0)
        n_days = 0
        for i in range(m):
            if restart[t0 + i]:
                days[n_days] = i
                n_days += 1
        start = max(t0, lo) - t0
        for k in range(n_nodes):
            _step(k, nodes, params, inputs, t0, m, (days, n_days), slots, state)
            row = nodes[k, 6]
            if row >= 0 and start < m:
                kept = out[row, t0 + start - lo : t0 + m - lo]
                values = slots[k, start:m]
                for i in range(m - start):
                    kept[i] = values[i]
                if not is_bad[row]:
                    is_bad[row] = _has_nonfinite(kept)
