"""Compile a feature set's expressions into one program, and run it over bars.

:func:`compile_program` turns the expression features of a checked set (a DAG over bar
columns, built-in features and each other) into the node table that
:func:`fxstore.features.algebra_kernels.run_program` interprets: nodes in dependency order,
identical sub-expressions computed once, a reference to another expression feature read as
its float32 column (as a built-in feature is read), and ring buffers laid out for the
windows. :func:`run_expressions` loads the inputs and runs it; nothing is compiled per set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fxstore.features import algebra_kernels, kernels
from fxstore.features.algebra import (
    ExprDef,
    FeatureLike,
    check_expressions,
    first_defined_bars,
    node_start,
)
from fxstore.features.expressions import Call, Const, Name, Node, Reset, walk_names

__all__ = ["Program", "compile_program", "run_expressions"]

F32 = npt.NDArray[np.float32]
_OP = algebra_kernels.OPCODES
_FIELD = algebra_kernels.FIELDS
#: Functions whose operands' history matters (a restart rule applies to them).
_STATEFUL = frozenset(("ema", "lag", "diff")) | {op for op in _OP if op.startswith("rolling_")}


@dataclass(frozen=True, slots=True)
class Program:
    """A feature set's expressions as a node table (see :func:`compile_program`)."""

    #: int64 (n_nodes, len(FIELDS)): opcode, operands, count, reset, begin, out, ring, cap.
    nodes: npt.NDArray[np.int64]
    #: float64 (n_nodes, 2): constants, clip bounds, EMA alpha.
    params: npt.NDArray[np.float64]
    #: Names of the inputs (bar columns or built-in features), in input-row order.
    inputs: tuple[str, ...]
    #: Rows of the definitions the program writes (their index in the definitions given).
    rows: tuple[int, ...]
    ring_size: int
    #: int64: the members of each EMA group, each group's at its first member's ring offset.
    groups: npt.NDArray[np.int64]


class _Builder:
    """Nodes appended in dependency order, each distinct node once."""

    def __init__(self, starts: dict[str, int], expressions: set[str]) -> None:
        self.starts = starts
        self.expressions = expressions
        self.rows: list[list[int]] = []
        self.params: list[tuple[float, float]] = []
        self.keys: dict[tuple[object, ...], int] = {}
        self.inputs: dict[str, int] = {}
        self.tops: dict[str, int] = {}
        self.ring_size = 0

    def add(self, key: tuple[object, ...], op: str, args: Sequence[int] = (), **fields: int) -> int:
        """The node of `key`, appended unless an identical one exists."""
        if key in self.keys:
            return self.keys[key]
        row = [0] * len(_FIELD)
        row[_FIELD["op"]] = _OP[op]
        row[_FIELD["a"]] = args[0] if args else 0
        row[_FIELD["b"]] = args[-1] if args else 0
        row[_FIELD["out"]] = -1
        for name, value in fields.items():
            row[_FIELD[name]] = value
        self.rows.append(row)
        self.params.append((0.0, 0.0))
        self.keys[key] = len(self.rows) - 1
        return len(self.rows) - 1

    def node(self, node: Node, reset: Reset) -> int:
        if isinstance(node, Const):
            k = self.add(("const", node.value), "const")
            self.params[k] = (node.value, 0.0)
            return k
        if isinstance(node, Name):
            if node.name in self.expressions:  # read as its column: float32 values
                return self.add(("ref32", self.tops[node.name]), "ref32", [self.tops[node.name]])
            index = self.inputs.setdefault(node.name, len(self.inputs))
            return self.add(("input", node.name), "input", [index])
        return self.call(node, reset)

    def call(self, node: Call, reset: Reset) -> int:
        args = [self.node(a, reset) for a in node.args]
        if node.op not in _STATEFUL:
            k = self.add((node.op, *args, *node.params), node.op, args)
            if node.op == "clip":
                self.params[k] = (float(node.params[0]), float(node.params[1]))
            return k
        count = int(node.params[0])
        is_reset = reset == "session"
        begin = node_start(node.args[0], reset, self.starts)
        key = (node.op, args[0], count, is_reset)
        if key in self.keys:
            return self.keys[key]
        # min/max keep the current chunk of w values and the previous chunk's suffix maxima
        cap = 2 * count + 1 if node.op in ("rolling_min", "rolling_max") else count
        ring, self.ring_size = self.ring_size, self.ring_size + cap
        fields = {"count": count, "reset": int(is_reset), "begin": begin, "ring": ring}
        k = self.add(key, node.op, args, cap=cap, **fields)
        if node.op == "ema":
            self.params[k] = (2.0 / (count + 1), 0.0)
        return k

    def feature(self, item: ExprDef, row: int) -> None:
        k = self.node(item.tree, item.reset)
        if self.rows[k][_FIELD["out"]] >= 0:  # the same values as another feature's
            k = self.add(("copy", k, row), "copy", [k])
        self.rows[k][_FIELD["out"]] = row
        self.tops[item.name] = k


def compile_program(definitions: Sequence[FeatureLike], vol_window: int) -> Program:
    """The program computing every :class:`ExprDef` of `definitions` (a set's features and
    targets), each to the row of its index there.

    Raises
    ------
    InvalidInputError
        An expression reads an unknown name or a target, or the expressions form a cycle.
    """
    features = [d for d in definitions if not d.spec.is_target]
    check_expressions(features, [d for d in definitions if d.spec.is_target])
    starts = first_defined_bars(features, vol_window)
    expressions = {d.name: (row, d) for row, d in enumerate(definitions) if isinstance(d, ExprDef)}
    builder = _Builder(starts, set(expressions))
    done: set[str] = set()

    def visit(name: str) -> None:  # depth first: a feature after those it reads
        if name in done:
            return
        done.add(name)
        row, item = expressions[name]
        for read in dict.fromkeys(walk_names(item.tree)):
            if read in expressions:
                visit(read)
        builder.feature(item, row)

    for name in expressions:
        visit(name)
    nodes = np.array(builder.rows, dtype=np.int64).reshape(-1, len(_FIELD))
    return Program(
        nodes=nodes,
        params=np.array(builder.params, dtype=np.float64).reshape(-1, 2),
        inputs=tuple(builder.inputs),
        rows=tuple(row for row, _ in expressions.values()),
        ring_size=builder.ring_size,
        groups=_group_emas(nodes),
    )


def _group_emas(nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Make EMAs of one operand with the same begin and restarts one group (in place): its
    first member computes them all. Returns the groups' members, concatenated."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for k in np.flatnonzero(nodes[:, _FIELD["op"]] == _OP["ema"]).tolist():
        key = tuple(int(nodes[k, _FIELD[f]]) for f in ("a", "reset", "begin"))
        groups.setdefault(key, []).append(k)  # type: ignore[arg-type]
    members: list[int] = []
    for group in groups.values():
        if len(group) < 2:
            continue
        nodes[group, _FIELD["op"]] = _OP["ema_member"]
        nodes[group[0], _FIELD["op"]] = _OP["ema_group"]
        nodes[group[0], _FIELD["ring"]] = len(members)
        nodes[group[0], _FIELD["cap"]] = len(group)
        members += group
    return np.array(members, dtype=np.int64)


def run_expressions(
    program: Program,
    load: Callable[[str], npt.NDArray[np.generic]],
    restart: npt.NDArray[np.uint8],
    lo: int,
    hi: int,
    out: F32,
) -> dict[int, int]:
    """Run `program` over bars ``0 .. hi - 1`` into the rows of `out` (float32 (rows,
    hi - lo), bar t at ``t - lo``).

    `load` gives an input by name as an (n,) array (a bar column, or a built-in feature's
    full float32 column); `restart` is 1 on each trading day's first bar. Returns the
    first bar whose value is not finite (or -1) per row written.
    """
    inputs = np.empty((len(program.inputs), hi))
    for k, name in enumerate(program.inputs):
        np.copyto(inputs[k], load(name)[:hi], casting="unsafe")
    is_bad = np.zeros(out.shape[0], dtype=np.bool_)
    if program.rows:
        algebra_kernels.run_program(
            program.nodes,
            program.params,
            inputs,
            restart,
            program.ring_size,
            lo,
            hi,
            out,
            is_bad,
            program.groups,
        )
    return {
        row: int(kernels.first_nonfinite_f32(out[row], lo)) if is_bad[row] else -1
        for row in program.rows
    }
