"""Expression features: their definition, and the checks and warm-up of a set of them.

An :class:`ExprDef` names an expression (:mod:`fxstore.features.expressions`) over bar
columns and other features of its set, with a reset rule. A feature set with expressions is
a DAG: :func:`check_expressions` resolves every name (a bar column, or a feature of the set;
never a target, which looks ahead), refuses unknown names and cycles, and
:func:`first_defined_bars` gives the first bar at which each feature is defined.

Warm-up (with ``reset = "none"``, the default, as the built-in kinds): a stateful function
is defined once its input is, plus its span: ``ema(x, n)`` and ``rolling_*(x, n)`` from the
n-th bar of a defined x (NaN before), ``lag(x, k)`` and ``diff(x, k)`` from the (k+1)-th.
With ``reset = "session"`` every stateful function restarts at each trading day's first
bar and is defined from there on: windows cover the bars since the restart while fewer than
their span, ``ema`` starts from the restart bar's value, ``lag`` and ``diff`` read the
restart bar's value while fewer than k bars lie behind (``diff`` is 0 on the restart bar).
A contract roll is no restart, as for the built-ins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Protocol

from fxstore.errors import InvalidInputError
from fxstore.features.expressions import (
    COLUMNS,
    FUNCTIONS,
    Const,
    Name,
    Node,
    Reset,
    node_json,
    parse_expression,
    unparse,
    walk_names,
)
from fxstore.features.registry import Kind, Params, ParamValue, check_name

__all__ = [
    "EXPRESSION_VERSION",
    "ExprDef",
    "FeatureLike",
    "check_expressions",
    "first_defined_bars",
]

#: Version of the algebra's formulas (warm-up, resets, std, z-score): part of every
#: expression feature's hash. Bump it when any changes.
EXPRESSION_VERSION: Final = 1
_RESETS: Final = ("none", "session")
_COLUMN_HINT: Final = (
    "close, vwap, volume, buy_volume, sell_volume, n_trades, bid_px_00, ask_px_00, "
    "bid_sz_NN, ask_sz_NN, ofi_NN with NN = 00..09"
)


def _no_warmup(_params: Params, _vol_window: int) -> int:
    return 0  # an expression's warm-up depends on its set: see first_defined_bars


@dataclass(frozen=True, slots=True)
class ExprDef:
    """A feature defined by an expression, e.g. ``ExprDef("flow_ema32", "ema(trade_imb, 32)")``.

    `expr` may be given as text; it is stored as its tree. The column is ``f_<name>``.
    """

    name: str
    expr: Node | str
    reset: Reset = "none"

    def __post_init__(self) -> None:
        check_name(self.name)
        where = f"feature {self.name!r}"
        if self.reset not in _RESETS:
            raise InvalidInputError(
                f"{where}: `reset` must be 'none' or 'session', was {self.reset!r}."
            )
        if isinstance(self.expr, str):
            try:
                object.__setattr__(self, "expr", parse_expression(self.expr))
            except InvalidInputError as err:
                raise InvalidInputError(f"{where}: {err}") from err

    @property
    def tree(self) -> Node:
        """The expression's tree."""
        if isinstance(self.expr, str):  # pragma: no cover -- parsed in __post_init__
            raise TypeError(self.expr)
        return self.expr

    @property
    def text(self) -> str:
        """The expression's canonical text."""
        return unparse(self.tree)

    @property
    def kind(self) -> str:
        """'expression' (a built-in feature's kind names its formula)."""
        return "expression"

    @property
    def params(self) -> Mapping[str, ParamValue]:
        """The expression's canonical text and its reset rule."""
        return MappingProxyType({"expr": self.text, "reset": self.reset})

    @property
    def spec(self) -> Kind:
        """A kind describing this expression (its formula is the expression's text)."""
        reset = ", restarted each trading day" if self.reset == "session" else ""
        return Kind(
            "expression",
            EXPRESSION_VERSION,
            {},
            self.text + reset,
            "as its inputs (an expression of bar columns and features)",
            _no_warmup,
        )

    def to_json(self) -> dict[str, object]:
        """Name, the expression's tree, the reset rule and the algebra's version."""
        return {
            "name": self.name,
            "expr": node_json(self.tree),
            "reset": self.reset,
            "expression_version": EXPRESSION_VERSION,
        }


class FeatureLike(Protocol):
    """A feature of a set: a built-in kind's instance (FeatureDef) or an ExprDef."""

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> Mapping[str, ParamValue]: ...

    @property
    def spec(self) -> Kind: ...


def _resolve(item: ExprDef, features: Mapping[str, FeatureLike], targets: set[str]) -> list[str]:
    """The features `item` reads (names of the set), checking every name it uses."""
    where = f"feature {item.name!r}"
    read = []
    for name in dict.fromkeys(walk_names(item.tree)):
        if name in features and name in COLUMNS:
            raise InvalidInputError(
                f"{where}: {name!r} is both a bar column and a feature of the set; rename "
                "the feature."
            )
        if name in features:
            read.append(name)
        elif name in targets:
            raise InvalidInputError(
                f"{where}: {name!r} is a target (it looks ahead); a feature may not read it."
            )
        elif name not in COLUMNS:
            raise InvalidInputError(
                f"{where}: unknown name {name!r} in {item.text!r}; use a bar column "
                f"({_COLUMN_HINT}) or a feature of the set."
            )
    return read


def check_expressions(features: Sequence[FeatureLike], targets: Sequence[FeatureLike]) -> None:
    """Check the expressions of a feature set: names resolved, no cycle.

    Raises
    ------
    InvalidInputError
        A name that is no bar column and no feature of the set, a target read by a
        feature, a name both a column and a feature, or a cycle (the message names the
        feature and the path).
    """
    by_name = {d.name: d for d in features}
    target_names = {d.name for d in targets}
    reads = {d.name: _resolve(d, by_name, target_names) for d in features if isinstance(d, ExprDef)}
    done: set[str] = set()
    for start in reads:
        _check_acyclic(start, reads, [], done)


def _check_acyclic(
    name: str, reads: Mapping[str, list[str]], path: list[str], done: set[str]
) -> None:
    if name in done or name not in reads:
        return
    if name in path:
        cycle = " -> ".join([*path[path.index(name) :], name])
        raise InvalidInputError(
            f"feature {path[path.index(name)]!r}: its expr depends on itself ({cycle})."
        )
    for other in reads[name]:
        _check_acyclic(other, reads, [*path, name], done)
    done.add(name)


def node_start(node: Node, reset: Reset, starts: Mapping[str, int]) -> int:
    """First bar at which `node` is defined, given the first bars of the names it reads."""
    if isinstance(node, Name):
        return starts.get(node.name, 0)  # bar columns: from bar 0
    if isinstance(node, Const):
        return 0
    begin = max(node_start(a, reset, starts) for a in node.args)
    if node.op not in FUNCTIONS or not FUNCTIONS[node.op].is_stateful or reset == "session":
        return begin
    count = int(node.params[0])
    return begin + count if node.op in ("lag", "diff") else begin + count - 1


def first_defined_bars(features: Sequence[FeatureLike], vol_window: int) -> dict[str, int]:
    """First bar (0-based) at which each feature of a checked set is defined, by name."""
    starts: dict[str, int] = {}
    pending: list[ExprDef] = []
    for d in features:
        if isinstance(d, ExprDef):
            pending.append(d)
        else:
            starts[d.name] = int(d.spec.warmup(d.params, vol_window))
    while pending:  # acyclic (checked): each round settles at least one
        ready = [d for d in pending if all(n in starts or n in COLUMNS for n in walk_names(d.tree))]
        if not ready:  # an unchecked set: say which names are missing
            check_expressions(features, [])
            raise InvalidInputError(f"feature {pending[0].name!r}: its inputs are not defined.")
        for d in ready:
            starts[d.name] = node_start(d.tree, d.reset, starts)
        pending = [d for d in pending if d.name not in starts]
    return starts
