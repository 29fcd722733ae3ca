"""Feature expressions: the small algebra of a feature set's ``expr`` entries.

An expression reads names (bar columns or other features of the set) and combines them::

    ema(x, span)              exponential moving average, alpha = 2 / (span + 1)
    rolling_mean(x, window)   also rolling_std, rolling_sum, rolling_min, rolling_max,
                              rolling_zscore: over bars t-window+1 .. t
    lag(x, k)                 x k bars back (k >= 1: never the future)
    diff(x, k)                x - lag(x, k)
    clip(x, lo, hi)           x bounded to [lo, hi]
    a + b, a - b, a * b, a / b, -a, numbers

Spans, windows and lags are whole-number literals >= 1; clip's bounds are number literals.
The text is parsed with Python's :mod:`ast` (mode 'eval') into a tree of :class:`Name`,
:class:`Const` and :class:`Call` nodes, and only those forms are accepted: nothing is ever
evaluated. :func:`node_json` is the tree's canonical JSON (what a feature-set hash covers,
so spacing or redundant parentheses never change a hash) and :func:`unparse` writes a
canonical text that parses back to the same tree.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from fxstore.errors import InvalidInputError

__all__ = [
    "COLUMNS",
    "FUNCTIONS",
    "MAX_COUNT",
    "Call",
    "Const",
    "Name",
    "Node",
    "Reset",
    "node_from_json",
    "node_json",
    "parse_expression",
    "unparse",
    "walk_names",
]

#: How a feature's windows treat trading days: "none" carries state across them (as the
#: built-in kinds do), "session" restarts it at each trading day's first bar.
Reset = Literal["none", "session"]

_LV: Final = tuple(f"{level:02d}" for level in range(10))
#: Bar columns an expression may read (as float64): prices, volumes, counts, book sizes, OFI.
COLUMNS: Final = (
    "close",
    "vwap",
    "volume",
    "buy_volume",
    "sell_volume",
    "n_trades",
    "bid_px_00",
    "ask_px_00",
    *(f"{side}_sz_{lv}" for side in ("bid", "ask") for lv in _LV),
    *(f"ofi_{lv}" for lv in _LV),
)


@dataclass(frozen=True, slots=True)
class _Function:
    """A function of the algebra: its expression arguments, then its literal parameters."""

    n_args: int
    params: tuple[str, ...]
    #: "count": a whole number >= 1 (span, window, lag); "number": any finite number.
    param_type: Literal["count", "number"]
    is_stateful: bool
    doc: str


#: Largest span, window or lag (bars).
MAX_COUNT: Final = 1_000_000
_WINDOW: Final = ("window",)
#: Every function by name.
FUNCTIONS: Final[Mapping[str, _Function]] = {
    "ema": _Function(1, ("span",), "count", True, "exponential moving average, 2/(span+1)"),
    **{
        f"rolling_{stat}": _Function(1, _WINDOW, "count", True, f"rolling {stat} over `window`")
        for stat in ("mean", "std", "sum", "min", "max", "zscore")
    },
    "lag": _Function(1, ("k",), "count", True, "the value k bars back"),
    "diff": _Function(1, ("k",), "count", True, "x minus its value k bars back"),
    "clip": _Function(1, ("lo", "hi"), "number", False, "x bounded to [lo, hi]"),
}
#: Arithmetic, as Call ops.
_BINARY: Final[Mapping[type[ast.operator], str]] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
}
_SYMBOL: Final = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_FORMS: Final = (
    "expressions use names, numbers, + - * /, unary minus and the functions " + ", ".join(FUNCTIONS)
)


@dataclass(frozen=True, slots=True)
class Name:
    """A bar column or another feature of the set."""

    name: str


@dataclass(frozen=True, slots=True)
class Const:
    """A number (float64)."""

    value: float


@dataclass(frozen=True, slots=True)
class Call:
    """A function (:data:`FUNCTIONS`), arithmetic ('add', 'sub', 'mul', 'div') or 'neg'."""

    op: str
    args: tuple[Node, ...]
    #: Literal parameters: whole numbers for spans, windows and lags; floats for clip.
    params: tuple[int | float, ...] = ()


Node = Name | Const | Call


def _number(node: ast.expr) -> int | float | None:
    """The value of a number literal, or of minus one; None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    value = node.value if isinstance(node, ast.Constant) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _param(func: str, spec: _Function, name: str, node: ast.expr) -> int | float:
    value = _number(node)
    if spec.param_type == "number":
        if value is None or not math.isfinite(value):
            raise InvalidInputError(f"{func}'s `{name}` must be a number literal.")
        return float(value)
    if not isinstance(value, int):
        shown = ast.unparse(node)
        raise InvalidInputError(f"{func}'s `{name}` must be a whole number >= 1, was {shown}.")
    if value < 1:
        future = " (it would read the future)" if func in ("lag", "diff") and value < 0 else ""
        raise InvalidInputError(f"{func}'s `{name}` must be >= 1, was {value}{future}.")
    if value > MAX_COUNT:
        raise InvalidInputError(f"{func}'s `{name}` must be <= {MAX_COUNT:,} bars, was {value}.")
    return value


def _call(node: ast.Call) -> Call:
    if not isinstance(node.func, ast.Name) or node.keywords:
        raise InvalidInputError(f"'{ast.unparse(node)}' is not allowed: {_FORMS}.")
    func = node.func.id
    spec = FUNCTIONS.get(func)
    if spec is None:
        raise InvalidInputError(f"unknown function {func!r}; known: {', '.join(FUNCTIONS)}.")
    if len(node.args) != spec.n_args + len(spec.params):
        wanted = ", ".join(("x", *spec.params))
        raise InvalidInputError(
            f"{func} takes {spec.n_args + len(spec.params)} arguments ({wanted}), "
            f"got {len(node.args)}."
        )
    args = tuple(_node(a) for a in node.args[: spec.n_args])
    params = tuple(
        _param(func, spec, name, a)
        for name, a in zip(spec.params, node.args[spec.n_args :], strict=True)
    )
    if func == "clip" and params[0] > params[1]:
        raise InvalidInputError(f"clip's `lo` must be <= `hi`, was {params[0]} > {params[1]}.")
    return Call(func, args, params)


def _node(node: ast.expr) -> Node:
    number = _number(node)
    if number is not None:
        if not math.isfinite(number):
            raise InvalidInputError(f"{number} is not a finite number.")
        return Const(float(number))
    if isinstance(node, ast.Name):
        return Name(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return Call(_BINARY[type(node.op)], (_node(node.left), _node(node.right)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _node(node.operand)
        return operand if isinstance(node.op, ast.UAdd) else Call("neg", (operand,))
    if isinstance(node, ast.Call):
        return _call(node)
    raise InvalidInputError(f"'{ast.unparse(node)}' is not allowed: {_FORMS}.")


def parse_expression(text: str) -> Node:
    """Parse an expression (see the module docstring) into its tree, checking its form.

    Names are not resolved here (the feature set does that).

    Raises
    ------
    InvalidInputError
        Not an expression of the algebra: a syntax error, an unknown function, a wrong
        number of arguments, a span, window or lag that is not a whole number >= 1, clip
        bounds that are not numbers, or no name at all.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError(f"`expr` must be a non-empty string, was {text!r}.")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise InvalidInputError(f"`expr` {text!r} is not an expression ({err.msg}).") from err
    node = _node(tree.body)
    if not any(True for _ in walk_names(node)):
        raise InvalidInputError(f"`expr` {text!r} reads no column or feature.")
    return node


def walk_names(node: Node) -> Iterator[str]:
    """Every name `node` reads, in order (with repeats)."""
    if isinstance(node, Name):
        yield node.name
    elif isinstance(node, Call):
        for arg in node.args:
            yield from walk_names(arg)


def node_json(node: Node) -> object:
    """The canonical JSON data of a tree: ``{"name"}``, ``{"const"}`` or ``{"op", "args",
    "params"}``."""
    if isinstance(node, Name):
        return {"name": node.name}
    if isinstance(node, Const):
        return {"const": node.value}
    return {"op": node.op, "args": [node_json(a) for a in node.args], "params": list(node.params)}


def node_from_json(data: object) -> Node:
    """The tree :func:`node_json` wrote (its form checked again by re-parsing).

    Raises
    ------
    InvalidInputError
        `data` is not a tree :func:`node_json` writes.
    """
    return parse_expression(unparse(_from_json(data)))


def _from_json(data: object) -> Node:
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        return Name(data["name"])
    if isinstance(data, dict) and isinstance(data.get("const"), int | float):
        return Const(float(data["const"]))
    if (
        isinstance(data, dict)
        and isinstance(data.get("op"), str)
        and isinstance(data.get("args"), list)
        and isinstance(data.get("params"), list)
    ):
        args = tuple(_from_json(a) for a in data["args"])
        return Call(data["op"], args, tuple(data["params"]))
    raise InvalidInputError(f"not an expression tree: {data!r}.")


def _const_text(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def unparse(node: Node, *, top: bool = True) -> str:
    """Canonical text of a tree: parses back to the same tree (binary operations in
    parentheses but at the top, whole-valued constants without '.0')."""
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Const):
        text = _const_text(node.value)
        return text if top or node.value >= 0 else f"({text})"
    if node.op in _SYMBOL:
        left, right = (unparse(a, top=False) for a in node.args)
        text = f"{left} {_SYMBOL[node.op]} {right}"
        return text if top else f"({text})"
    if node.op == "neg":
        return "-" + unparse(node.args[0], top=False)
    spec = FUNCTIONS[node.op]
    params = (str(p) if spec.param_type == "count" else _const_text(float(p)) for p in node.params)
    return f"{node.op}({', '.join([*(unparse(a) for a in node.args), *params])})"
