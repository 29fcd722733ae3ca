"""Expression features: parsing, canonical form, checks of a set, warm-up, the hash."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fxstore.errors import InvalidInputError
from fxstore.features.algebra import ExprDef
from fxstore.features.definitions import (
    FeatureDef,
    FeatureSet,
    Settings,
    classic_featureset,
    featureset_from_definition,
    parse_featureset,
)
from fxstore.features.expressions import (
    COLUMNS,
    Call,
    Const,
    Name,
    Node,
    node_from_json,
    node_json,
    parse_expression,
    unparse,
    walk_names,
)
from fxstore.features.inputs import REQUIRED_COLUMNS

SOURCE = {"instrument_key": "mbp10_front_month", "bar_key": "b", "bars_sha256": "0" * 64}
BASE = [{"name": "trade_imb"}, {"name": "ofi_all"}, {"name": "ret_1"}]


def _set(*entries: dict[str, object], where: str = "f.toml") -> FeatureSet:
    return parse_featureset({"features": [*BASE, *entries]}, where)


def _hash(featureset: FeatureSet) -> str:
    return featureset.with_tick_size(0.25).hash(**SOURCE)


def test_columns_are_bar_columns_precompute_reads() -> None:
    assert set(COLUMNS) <= set(REQUIRED_COLUMNS)


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("close", Name("close")),
        ("ema(trade_imb, 32)", Call("ema", (Name("trade_imb"),), (32,))),
        ("a / b * 2", Call("mul", (Call("div", (Name("a"), Name("b"))), Const(2.0)))),
        ("-x", Call("neg", (Name("x"),))),
        ("x - -3", Call("sub", (Name("x"), Const(-3.0)))),
        ("clip(x, -3, 3)", Call("clip", (Name("x"),), (-3.0, 3.0))),
        ("diff(lag(x, 2), 1)", Call("diff", (Call("lag", (Name("x"),), (2,)),), (1,))),
    ],
)
def test_parse_expression_builds_the_tree(text: str, tree: Node) -> None:
    assert parse_expression(text) == tree


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ema(x)", "ema takes 2 arguments (x, span), got 1."),
        ("ema(x, 3, 4)", "ema takes 2 arguments (x, span), got 3."),
        ("ema(x, 0)", "ema's `span` must be >= 1, was 0."),
        ("rolling_std(x, -4)", "rolling_std's `window` must be >= 1, was -4."),
        ("lag(x, -1)", "lag's `k` must be >= 1, was -1 (it would read the future)."),
        ("diff(x, 1.5)", "diff's `k` must be a whole number >= 1, was 1.5."),
        ("lag(x, k)", "lag's `k` must be a whole number >= 1, was k."),
        ("ema(x, 2000000)", "ema's `span` must be <= 1,000,000 bars, was 2000000."),
        ("clip(x, 3, 1)", "clip's `lo` must be <= `hi`, was 3.0 > 1.0."),
        ("clip(x, lo, 1)", "clip's `lo` must be a number literal."),
        ("foo(x)", "unknown function 'foo'; known: ema, rolling_mean"),
        ("x ** 2", "'x ** 2' is not allowed: expressions use names"),
        ("x.y", "'x.y' is not allowed"),
        ("x[1]", "'x[1]' is not allowed"),
        ("ema(x, span=3)", "is not allowed"),
        ("'close'", "is not allowed"),
        ("3 + 4", "reads no column or feature."),
        ("ema(x, 3", "is not an expression"),
        ("", "`expr` must be a non-empty string"),
    ],
)
def test_parse_expression_refuses_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        parse_expression(text)


_names = st.sampled_from(["close", "trade_imb", "x_1"]).map(Name)
_consts = st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: Const(float(v)))


def _calls(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    counts = st.integers(1, 500)
    return st.one_of(
        st.tuples(st.sampled_from(["add", "sub", "mul", "div"]), children, children).map(
            lambda t: Call(t[0], (t[1], t[2]))
        ),
        children.map(lambda c: Call("neg", (c,))),
        st.tuples(st.sampled_from(["ema", "rolling_zscore", "lag", "diff"]), children, counts).map(
            lambda t: Call(t[0], (t[1],), (t[2],))
        ),
        st.tuples(children, st.floats(-10, 0), st.floats(0, 10)).map(
            lambda t: Call("clip", (t[0],), (float(t[1]), float(t[2])))
        ),
    )


@given(
    st.recursive(st.one_of(_names, _consts), _calls, max_leaves=8).filter(
        lambda tree: any(True for _ in walk_names(tree))  # a constant alone is no expression
    )
)
def test_unparse_parses_back_to_the_same_tree(tree: Node) -> None:
    assert parse_expression(unparse(tree)) == _folded(tree)
    assert node_from_json(node_json(tree)) == _folded(tree)


def _folded(node: Node) -> Node:
    """`node` as the parser gives it: minus a number is a negative number."""
    if isinstance(node, Call):
        args = tuple(_folded(a) for a in node.args)
        if node.op == "neg" and isinstance(args[0], Const):
            return Const(-args[0].value)
        return Call(node.op, args, node.params)
    return node


def test_expression_entry_makes_an_exprdef_with_its_canonical_text() -> None:
    featureset = _set({"name": "e", "expr": "ema( trade_imb,32 )", "reset": "session"})

    e = featureset.features[-1]
    assert isinstance(e, ExprDef)
    assert (e.text, e.reset, e.kind) == ("ema(trade_imb, 32)", "session", "expression")


def test_hash_ignores_layout_but_not_definitions() -> None:
    base = _hash(_set({"name": "e", "expr": "ema(trade_imb, 32) * 2"}))
    same = [
        _set({"expr": "(ema( trade_imb , 32 ))*2.0", "name": "e", "reset": "none"}),
    ]
    changed = [
        _set({"name": "e", "expr": "ema(trade_imb, 33) * 2"}),
        _set({"name": "e", "expr": "ema(ofi_all, 32) * 2"}),
        _set({"name": "e", "expr": "ema(trade_imb, 32) * 3"}),
        _set({"name": "e", "expr": "ema(trade_imb, 32) * 2", "reset": "session"}),
        _set({"name": "e2", "expr": "ema(trade_imb, 32) * 2"}),
        _set({"name": "e", "expr": "rolling_mean(trade_imb, 32) * 2"}),
    ]

    assert [_hash(s) for s in same] == [base]
    assert len({base, *(_hash(s) for s in changed)}) == len(changed) + 1


def test_hash_of_a_toml_file_ignores_comments_order_and_spacing(tmp_path: Path) -> None:
    from fxstore.features.definitions import load_featureset

    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(
        '[[features]]\nname = "trade_imb"\n[[features]]\nname = "e"\nexpr = "ema(trade_imb, 8)"\n'
        'reset = "session"\n'
    )
    b.write_text(
        '# slow flow\n[[features]]\nname="trade_imb"\n\n[[features]]\nreset = "session"  # daily\n'
        'expr = "ema(trade_imb,8)"\nname = "e"\n'
    )

    assert _hash(load_featureset(a)) == _hash(load_featureset(b))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"name": "x", "expr": "ema(tradeimb, 3)"},
            "f.toml: feature 'x': unknown name 'tradeimb' in 'ema(tradeimb, 3)'; use a bar "
            "column (close, vwap, volume, buy_volume, sell_volume, n_trades, bid_px_00, "
            "ask_px_00, bid_sz_NN, ask_sz_NN, ofi_NN with NN = 00..09) or a feature of the set.",
        ),
        (
            {"name": "x", "expr": "fwd_1 + 1"},
            "f.toml: feature 'x': 'fwd_1' is a target (it looks ahead); a feature may not read it.",
        ),
        (
            {"name": "x", "expr": "x + 1"},
            "f.toml: feature 'x': its expr depends on itself (x -> x).",
        ),
        (
            {"name": "x", "expr": "ema(close, 3)", "reset": "day"},
            "f.toml: feature 'x': `reset` must be 'none' or 'session', was 'day'.",
        ),
        (
            {"name": "x", "expr": "close", "window": 3},
            "f.toml: feature 'x': an `expr` feature takes only `name`, `expr` and `reset`, not "
            "'window'.",
        ),
        (
            {"name": "x", "expr": "lag(close, 0)"},
            "f.toml: feature 'x': lag's `k` must be >= 1, was 0.",
        ),
        (
            {"name": "close", "expr": "trade_imb"},
            None,  # a feature may be named like a column, as long as nothing reads it
        ),
    ],
)
def test_invalid_expression_entry_raises_one_line_naming_the_feature(
    entry: dict[str, object], message: str | None
) -> None:
    if message is None:
        _set(entry)
        return
    with pytest.raises(InvalidInputError) as info:
        _set(entry)
    assert str(info.value) == message


def test_a_cycle_through_several_features_is_named_with_its_path() -> None:
    with pytest.raises(InvalidInputError) as info:
        _set({"name": "a", "expr": "b + 1"}, {"name": "b", "expr": "ema(a, 3)"})

    assert str(info.value) == "f.toml: feature 'a': its expr depends on itself (a -> b -> a)."


def test_a_name_both_column_and_feature_is_refused_where_read() -> None:
    with pytest.raises(InvalidInputError, match="'close' is both a bar column and a feature"):
        _set({"name": "close", "expr": "trade_imb"}, {"name": "y", "expr": "ema(close, 3)"})


def test_targets_take_no_expression() -> None:
    with pytest.raises(InvalidInputError, match=r"\[\[targets\]\] 't': targets are built-in"):
        parse_featureset({"targets": [{"name": "t", "expr": "close"}]}, "f.toml")


@pytest.mark.parametrize(
    ("expr", "reset", "first"),
    [
        ("trade_imb * 2", "none", 0),
        ("ema(trade_imb, 8)", "none", 7),
        ("rolling_mean(close, 5)", "none", 4),
        ("lag(close, 3)", "none", 3),
        ("diff(close, 2)", "none", 2),
        ("ema(ofi_all, 8)", "none", 99 + 7),  # ofi_all (window 100) is defined from bar 99
        ("rolling_std(ema(close, 4), 5)", "none", 3 + 4),
        ("ema(ofi_all, 8) + lag(close, 200)", "none", 200),
        ("rolling_max(ofi_all, 50)", "session", 99),  # a restart defines it at once
        ("ret_1 * 2", "none", 200),  # log_return: from bar vol_window
    ],
)
def test_first_defined_bar_follows_inputs_and_spans(expr: str, reset: str, first: int) -> None:
    from fxstore.features.algebra import first_defined_bars

    featureset = _set({"name": "x", "expr": expr, "reset": reset})

    assert first_defined_bars(featureset.features, 200)["x"] == first


def test_featureset_from_definition_gives_the_same_hash() -> None:
    featureset = _set(
        {"name": "e", "expr": "ema(trade_imb, 32)"},
        {"name": "z", "expr": "clip(rolling_zscore(e, 16), -3, 3)", "reset": "session"},
    ).with_tick_size(0.25)
    definition = featureset.definition(instrument_key="i", bar_key="b", bars_sha256="0" * 64)

    again = featureset_from_definition(definition, "manifest.json")

    assert again == featureset
    assert _hash(again) == _hash(featureset)


def test_a_set_of_expressions_only_needs_no_builtin() -> None:
    featureset = FeatureSet(
        (ExprDef("imb", "(buy_volume - sell_volume) / volume"), ExprDef("m", "ema(imb, 4)")),
        (FeatureDef("fwd_1", "forward_return", {"horizon": 1}),),
        Settings(tick_size=0.25, vol_window=10),
    )

    assert featureset.warmup_rows == 10


def test_toml_form_of_a_set_with_expressions_loads_back_to_it(tmp_path: Path) -> None:
    from fxstore.features.definitions import load_featureset
    from fxstore.features.describe import featureset_toml

    featureset = _set(
        {"name": "e", "expr": "ema(trade_imb,32)*-2"},
        {"name": "d", "expr": "diff(e, 3)", "reset": "session"},
    )
    path = tmp_path / "set.toml"
    path.write_text(featureset_toml(featureset, title="a set"))

    assert 'expr = "ema(trade_imb, 32) * (-2)"\n' in path.read_text()
    assert load_featureset(path) == featureset


def test_examples_slow_set_is_the_defaults_plus_fourteen_expressions() -> None:
    from fxstore.features.definitions import load_featureset

    example = load_featureset(Path(__file__).parents[2] / "examples" / "features_slow.toml")

    assert example.features[:30] == classic_featureset().features
    assert sum(isinstance(d, ExprDef) for d in example.features) == 14
    assert example.warmup_rows == 200 + 127


def test_examples_flow_set_is_the_default_sets_flow_views_alone() -> None:
    from fxstore.features.definitions import default_featureset, load_featureset

    example = load_featureset(Path(__file__).parents[2] / "examples" / "features_flow.toml")
    default = default_featureset()
    views = tuple(d for d in default.features if isinstance(d, ExprDef))

    assert len(views) == 21 and len(example.features) == 22
    assert example.features[1:] == views
    assert example.features[0] == next(d for d in default.features if d.name == "trade_imb")
    assert example.targets == default.targets
    assert example.settings == default.settings


def test_first_defined_bars_of_an_unchecked_set_raises_instead_of_looping() -> None:
    from fxstore.features.algebra import first_defined_bars

    with pytest.raises(InvalidInputError, match="feature 'x': unknown name 'nowhere'"):
        first_defined_bars([ExprDef("x", "ema(nowhere, 3)")], 200)
