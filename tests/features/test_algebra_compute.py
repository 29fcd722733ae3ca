"""Expression features computed: every function against a slow reference, point in time,
session restarts, warm-up, and through compute_features."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fxstore.errors import InvalidInputError
from fxstore.features.algebra import ExprDef, first_defined_bars
from fxstore.features.compute import compute_columns, compute_features
from fxstore.features.definitions import FeatureDef, FeatureSet, Settings
from fxstore.features.expressions import Call, Const, Name, Node, parse_expression
from fxstore.features.inputs import BarInputs
from fxstore.features.synthetic import synthetic_bars

F64 = npt.NDArray[np.float64]
SETTINGS = Settings(tick_size=0.25, vol_window=30)
#: One expression per function (windows short enough to restart inside a trading day).
EXPRESSIONS = [
    "ema(close, 6)",
    "rolling_mean(ofi_03, 5)",
    "rolling_sum(buy_volume, 7)",
    "rolling_std(close, 9)",
    "rolling_zscore(ofi_03, 8)",
    "rolling_min(close, 6)",
    "rolling_max(ofi_03, 11)",
    "lag(close, 3)",
    "diff(ofi_03, 4)",
    "clip(ofi_03 / 10, -0.5, 0.25)",
    "(buy_volume - sell_volume) / volume * -2 + 1",
    "ema(rolling_std(diff(close, 1), 5), 4)",
    "rolling_zscore(bid_sz_00, 3) * ask_sz_02 - -1.5",
]
CASES = [(e, r) for e in EXPRESSIONS for r in ("none", "session")]


@pytest.fixture(scope="module")
def bars() -> pa.Table:
    """600 bars over 8 trading days (75 a day) with a roll on day 3."""
    return synthetic_bars(600, n_days=8, roll_days=(3,), seed=5)


def _restarts(table: pa.Table) -> npt.NDArray[np.bool_]:
    day = table.column("trading_day").to_numpy()
    return np.concatenate(([True], day[1:] != day[:-1]))


def _stateful(op: str, x: F64, count: int, reset: bool, restart: npt.NDArray[np.bool_]) -> F64:
    """One stateful function the obvious way: a loop over bars, each window sliced anew."""
    out = np.full(x.size, np.nan)
    finite = np.flatnonzero(np.isfinite(x))
    begin = int(finite[0]) if finite.size else x.size
    seg = begin
    e = 0.0
    for t in range(begin, x.size):
        if reset and restart[t]:
            seg = t
        if op == "ema":
            e = x[t] if t == seg else e + 2.0 / (count + 1) * (x[t] - e)
            out[t] = e if reset or t - seg + 1 >= count else np.nan
        elif op in ("lag", "diff"):
            past = x[t - count] if t - count >= seg else (x[seg] if reset else np.nan)
            out[t] = past if op == "lag" else x[t] - past
        else:
            window = x[max(seg, t - count + 1) : t + 1]
            if not reset and window.size < count:
                continue
            std = window.std() if np.ptp(window) > 0 else 0.0
            stats = {
                "rolling_mean": window.mean(),
                "rolling_sum": window.sum(),
                "rolling_std": std,
                "rolling_min": window.min(),
                "rolling_max": window.max(),
                "rolling_zscore": (x[t] - window.mean()) / std if std > 0 else 0.0,
            }
            out[t] = stats[op]
    return out


def reference(node: Node, table: pa.Table, reset: bool) -> F64:
    """An expression over bar columns, evaluated by numpy and :func:`_stateful`."""
    if isinstance(node, Name):
        return table.column(node.name).to_numpy().astype(np.float64)
    if isinstance(node, Const):
        return np.full(table.num_rows, node.value)
    args = [reference(a, table, reset) for a in node.args]
    with np.errstate(divide="ignore", invalid="ignore"):
        arithmetic = {
            "add": np.add,
            "sub": np.subtract,
            "mul": np.multiply,
            "div": np.divide,
        }
        if node.op in arithmetic:
            return np.asarray(arithmetic[node.op](*args), dtype=np.float64)
    if node.op == "neg":
        return -args[0]
    if node.op == "clip":
        return np.clip(args[0], *node.params)
    return _stateful(node.op, args[0], int(node.params[0]), reset, _restarts(table))


def _compute(table: pa.Table, *defs: FeatureDef | ExprDef) -> dict[str, np.ndarray]:
    return compute_columns(BarInputs(table, SETTINGS), list(defs), SETTINGS)


@pytest.mark.parametrize(("text", "reset"), CASES)
def test_expression_matches_slow_reference(bars: pa.Table, text: str, reset: str) -> None:
    expected = reference(parse_expression(text), bars, reset == "session")

    got = _compute(bars, ExprDef("x", text, reset))["x"]  # type: ignore[arg-type]

    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("text", "reset"), CASES)
def test_warmup_is_exactly_the_undefined_prefix(bars: pa.Table, text: str, reset: str) -> None:
    item = ExprDef("x", text, reset)  # type: ignore[arg-type]
    first = first_defined_bars([item], SETTINGS.vol_window)["x"]

    values = _compute(bars, item)["x"]

    assert np.isnan(values[:first]).all()
    assert np.isfinite(values[first:]).all()


@settings(max_examples=15, deadline=None)
@given(cut=st.integers(0, 598), case=st.sampled_from(CASES), seed=st.integers(0, 2**16))
def test_expression_at_bar_i_never_depends_on_later_bars(
    bars: pa.Table, cut: int, case: tuple[str, str], seed: int
) -> None:
    text, reset = case
    item = ExprDef("x", text, reset)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    changed = bars
    for name in ("close", "ofi_03", "buy_volume", "bid_sz_00", "ask_sz_02"):
        values = bars.column(name).to_numpy().copy()
        values[cut + 1 :] = values[cut + 1 :] * rng.uniform(0.5, 2.0) + 1  # bars after the cut
        index = bars.schema.get_field_index(name)
        changed = changed.set_column(
            index, name, pa.array(values, type=bars.schema.field(name).type)
        )

    before, after = _compute(bars, item)["x"], _compute(changed, item)["x"]

    np.testing.assert_array_equal(after[: cut + 1], before[: cut + 1])


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_session_reset_restarts_state_at_each_trading_days_first_bar(
    bars: pa.Table, text: str
) -> None:
    item = ExprDef("x", text, "session")
    starts = np.flatnonzero(_restarts(bars))
    day = int(starts[4])

    full = _compute(bars, item)["x"]
    alone = _compute(bars.slice(day), item)["x"]  # the bars from that day's first on

    np.testing.assert_array_equal(full[day:], alone)


def test_without_reset_state_carries_across_days_and_rolls(bars: pa.Table) -> None:
    day = int(np.flatnonzero(_restarts(bars))[4])

    full = _compute(bars, ExprDef("x", "rolling_mean(close, 20)"))["x"]
    alone = _compute(bars.slice(day), ExprDef("x", "rolling_mean(close, 20)"))["x"]

    assert np.isfinite(full[day : day + 19]).all() and np.isnan(alone[:19]).all()


def test_a_feature_read_by_another_is_read_as_its_float32_column(bars: pa.Table) -> None:
    cols = _compute(
        bars,
        FeatureDef("trade_imb", "trade_imbalance"),
        ExprDef("e", "ema(trade_imb, 8) * 3"),
        ExprDef("twice", "e * 2"),
        ExprDef("again", "ema(trade_imb, 8) * 3"),
    )

    expected = cols["e"].astype(np.float64) * 2
    np.testing.assert_array_equal(cols["twice"], expected.astype(np.float32))
    np.testing.assert_array_equal(cols["again"], cols["e"])


def test_builtin_inputs_are_defined_from_their_warmup(bars: pa.Table) -> None:
    ofi = FeatureDef("ofi_all", "ofi_multi", {"levels": 10, "window": 40})
    cols = _compute(
        bars, ofi, ExprDef("e", "ema(ofi_all, 5)"), ExprDef("s", "lag(ofi_all, 2)", "session")
    )

    assert np.isnan(cols["e"][: 39 + 4]).all() and np.isfinite(cols["e"][39 + 4 :]).all()
    assert np.isnan(cols["s"][:39]).all() and np.isfinite(cols["s"][39:]).all()


def test_compute_features_keeps_expression_columns_as_computed_over_every_bar(
    bars: pa.Table,
) -> None:
    features = (
        FeatureDef("trade_imb", "trade_imbalance"),
        ExprDef("slow", "ema(trade_imb, 64)"),
        ExprDef("z", "clip(rolling_zscore(slow, 32), -3, 3)", "session"),
    )
    featureset = FeatureSet(
        features, (FeatureDef("fwd_1", "forward_return", {"horizon": 1}),), SETTINGS
    )

    frame = compute_features(bars, featureset)
    full = _compute(bars, *features)

    assert frame.warmup_rows_dropped == 63
    for name in ("slow", "z"):
        kept = full[name][63 : 600 - 1]
        np.testing.assert_array_equal(frame.features["f_" + name], kept)


def test_compute_features_names_an_expression_that_is_not_finite(bars: pa.Table) -> None:
    featureset = FeatureSet((ExprDef("bad", "close / (buy_volume - buy_volume)"),), (), SETTINGS)

    with pytest.raises(InvalidInputError, match=r"feature 'bad' is not finite \(inf\) at bar 0 "):
        compute_features(bars, featureset)


def test_program_computes_a_shared_subexpression_once() -> None:
    from fxstore.features.program import compile_program

    defs = [
        ExprDef("a", "ema(close, 8) - rolling_mean(close, 8)"),
        ExprDef("b", "ema(close, 8) * 2"),
    ]

    program = compile_program(defs, 30)

    ops = program.nodes[:, 0].tolist()
    assert program.inputs == ("close",)
    assert len(ops) == 6  # close, ema, mean, a, 2, b


def test_tree_node_types_cover_the_grammar() -> None:
    tree = parse_expression("ema(close, 2) + 1")
    assert isinstance(tree, Call) and isinstance(tree.args[1], Const)


@pytest.mark.parametrize("reset", ["none", "session"])
def test_emas_of_one_input_computed_together_equal_each_alone(bars: pa.Table, reset: str) -> None:
    from fxstore.features.program import compile_program

    spans = (1, 4, 9, 40)
    items = [ExprDef(f"e{n}", f"ema(ofi_03, {n})", reset) for n in spans]  # type: ignore[arg-type]

    together = _compute(bars, *items)
    program = compile_program(items, SETTINGS.vol_window)

    assert sorted(program.groups.tolist()) == [1, 2, 3, 4]  # one group: node 0 is the input
    for item in items:
        np.testing.assert_array_equal(together[item.name], _compute(bars, item)[item.name])
