"""compute_features: fast kernels vs the slow reference, point in time, rolls, warm-up, errors."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.features.compute import compute_column, compute_columns, compute_features
from fxstore.features.definitions import (
    FeatureDef,
    FeatureSet,
    Settings,
    classic_featureset,
)
from fxstore.features.inputs import BarInputs
from fxstore.features.synthetic import synthetic_bars
from tests.features._reference import reference_column

SETTINGS = Settings(tick_size=0.25, vol_window=30)
#: Every kind, with parameters other than the defaults' too; small windows for short tables.
ALL = FeatureSet(
    features=(
        *classic_featureset().features,
        FeatureDef("ret_3", "log_return", {"horizon": 3}),
        FeatureDef("rv_5", "realised_vol", {"window": 5}),
        FeatureDef("ofi_7_w9", "ofi_level", {"level": 7, "window": 9}),
        FeatureDef("ofi_3lv", "ofi_multi", {"levels": 3, "window": 7}),
        FeatureDef("depth_1", "depth", {"levels": 1, "window": 7}),
        FeatureDef("intensity_9", "trade_intensity", {"window": 9}),
        FeatureDef("duration_9", "bar_duration", {"window": 9}),
    ),
    targets=(
        FeatureDef("fwd_1", "forward_return", {"horizon": 1}),
        FeatureDef("fwd_5", "forward_return", {"horizon": 5}),
    ),
    settings=SETTINGS,
)
DEFINITIONS = [*ALL.features, *ALL.targets]


@pytest.fixture(scope="module")
def bars() -> pa.Table:
    """420 bars over 6 days with a roll to a contract 20 points higher on day 3."""
    return synthetic_bars(420, n_days=6, roll_days=(3,), seed=3)


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    """Every column of ALL over `table`, computed as compute_features does."""
    return compute_columns(BarInputs(table, SETTINGS), DEFINITIONS, SETTINGS)


@pytest.fixture(scope="module")
def full(bars: pa.Table) -> dict[str, np.ndarray]:
    return _columns(bars)


@pytest.fixture(scope="module", params=[35, 181, 250, 419])
def truncated(request: pytest.FixtureRequest, bars: pa.Table) -> tuple[int, dict[str, np.ndarray]]:
    """The columns computed from the first `cut` bars only."""
    return request.param, _columns(bars.slice(0, request.param))


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.name)
def test_kernel_matches_slow_reference(
    bars: pa.Table, full: dict[str, np.ndarray], definition: FeatureDef
) -> None:
    expected = reference_column(bars, definition, SETTINGS)

    got = full[definition.name]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("definition", ALL.features, ids=lambda d: d.name)
def test_feature_is_point_in_time(
    truncated: tuple[int, dict[str, np.ndarray]],
    full: dict[str, np.ndarray],
    definition: FeatureDef,
) -> None:
    cut, columns = truncated

    # From bars 0..cut-1 only: every value up to bar cut-1 equals the full history's, bit for bit.
    np.testing.assert_array_equal(columns[definition.name], full[definition.name][:cut])


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda d: d.name)
def test_warmup_is_exactly_the_undefined_prefix(
    full: dict[str, np.ndarray], definition: FeatureDef
) -> None:
    values = full[definition.name]
    first = definition.spec.warmup(definition.params, SETTINGS.vol_window)
    tail = definition.spec.lookahead(definition.params)

    assert np.isnan(values[:first]).all()
    assert np.isfinite(values[first : len(values) - tail]).all()
    assert np.isnan(values[len(values) - tail :]).all()


def test_compute_features_drops_and_counts_warmup_and_tail(bars: pa.Table) -> None:
    frame = compute_features(bars, ALL)

    assert frame.warmup_rows_dropped == 99  # ofi_* windows of 100 bars
    assert frame.tail_rows_dropped == 5
    assert frame.n_rows == 420 - 99 - 5
    assert frame.ts_close[0] == bars.column("ts_close")[99].as_py()
    assert list(frame.features) == [f"f_{d.name}" for d in ALL.features]
    assert list(frame.targets) == ["target_fwd_1", "target_fwd_5"]
    assert all(np.isfinite(v).all() and v.dtype == np.float32 for v in frame.features.values())


SHARED = FeatureSet(
    features=(
        FeatureDef("ofi_all", "ofi_multi", {"levels": 10, "window": 40}),
        FeatureDef("ofi_2", "ofi_level", {"level": 2, "window": 40}),
        FeatureDef("ofi_2_again", "ofi_level", {"level": 2, "window": 40}),
        FeatureDef("ofi_2lv_w1", "ofi_multi", {"levels": 2, "window": 1}),
        FeatureDef("imb_4", "book_imbalance", {"levels": 4}),
        FeatureDef("imb_1", "book_imbalance", {"levels": 1}),
        FeatureDef("depth_10", "depth", {"levels": 10, "window": 40}),
        FeatureDef("depth_2", "depth", {"levels": 2, "window": 3}),
        FeatureDef("intensity", "trade_intensity", {"window": 40}),
    ),
    settings=SETTINGS,
)


@pytest.mark.parametrize("featureset", [ALL, SHARED], ids=["all", "shared_book_sums"])
@pytest.mark.parametrize("rows", [(0, 420), (1, 300), (150, 2200)])
def test_compute_features_equals_full_columns_bit_for_bit(
    featureset: FeatureSet, rows: tuple[int, int]
) -> None:
    table = synthetic_bars(rows[1], n_days=6, roll_days=(3,), seed=5).slice(rows[0])
    defs = (*featureset.features, *featureset.targets)
    full = compute_columns(BarInputs(table, SETTINGS), defs, SETTINGS)

    frame = compute_features(table, featureset)

    lo, hi = frame.warmup_rows_dropped, frame.n_bars - frame.tail_rows_dropped
    got = {**frame.features, **frame.targets}
    for d in featureset.features:
        np.testing.assert_array_equal(
            got[f"f_{d.name}"].view(np.uint32), full[d.name][lo:hi].view(np.uint32)
        )
    for d in featureset.targets:
        expected = full[d.name][lo:hi].view(np.uint32)
        np.testing.assert_array_equal(got[f"target_{d.name}"].view(np.uint32), expected)


def test_compute_features_table_has_contract_column_order_and_no_nulls(bars: pa.Table) -> None:
    table = compute_features(bars, ALL).to_table()

    assert table.column_names[:6] == [
        "ts_close",
        "trading_day",
        "is_roll",
        "session_start",
        "mkt_close",
        "mkt_half_spread",
    ]
    types = [str(t) for t in table.schema.types[:6]]
    assert types == ["int64", "int32", "uint8", "uint8", "double", "double"]
    assert {str(t) for t in table.schema.types[6:]} == {"float"}
    assert table.num_columns == 6 + len(DEFINITIONS)
    assert all(c.null_count == 0 and c.num_chunks == 1 for c in table.columns)


def test_roll_jump_never_enters_returns_or_targets() -> None:
    # A 500-point roll gap: any return across it would be ~10% against ~1e-4 per bar.
    bars = synthetic_bars(300, n_days=4, roll_days=(2,), roll_gap=500.0, seed=4)
    frame = compute_features(bars, ALL)
    roll = int(np.flatnonzero(frame.flags["is_roll"])[0])

    assert frame.flags["is_roll"].sum() == 1
    assert frame.market["mkt_close"][roll] - frame.market["mkt_close"][roll - 1] > 400
    assert frame.features["f_ret_1"][roll] == 0.0
    assert frame.targets["target_fwd_1"][roll - 1] == 0.0
    for name in ("f_ret_1", "f_ret_4", "f_ret_16", "f_ret_64", "f_rv_16", "target_fwd_5"):
        values = frame.features.get(name, frame.targets.get(name))
        assert values is not None and np.abs(values).max() < 8.0, name


def test_roll_return_is_sum_of_within_contract_returns() -> None:
    bars = synthetic_bars(300, n_days=4, roll_days=(2,), roll_gap=500.0, seed=4)
    inputs = BarInputs(bars, SETTINGS)
    ret4 = compute_column(inputs, FeatureDef("r", "log_return", {"horizon": 4}), SETTINGS)
    close = bars.column("close").to_numpy()
    roll = int(np.flatnonzero(inputs.is_roll)[0])
    t = roll + 1

    within = math.log(close[roll - 1] / close[t - 4]) + math.log(close[t] / close[roll])
    assert ret4[t] == pytest.approx(within / (inputs.sigma[t] * 2.0), rel=1e-6)


def test_flat_market_uses_vol_floor_and_stays_finite() -> None:
    bars = synthetic_bars(200, n_days=2, seed=5)
    flat = bars.set_column(
        bars.schema.get_field_index("close"), "close", pa.array(np.full(200, 4700.0))
    )

    frame = compute_features(flat, ALL)

    assert (frame.sigma == SETTINGS.vol_floor).all()
    assert (frame.features["f_ret_1"] == 0.0).all()


def _with(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def test_nonfinite_feature_raises_naming_feature_and_bar(bars: pa.Table) -> None:
    sizes = {name: bars.column(name).to_numpy().copy() for name in ("bid_sz_00", "ask_sz_00")}
    for values in sizes.values():
        values[300] = 0  # an empty top of book: no level-0 imbalance at bar 300
    broken = _with(
        _with(bars, "bid_sz_00", pa.array(sizes["bid_sz_00"])),
        "ask_sz_00",
        pa.array(sizes["ask_sz_00"]),
    )
    ts = bars.column("ts_close")[300].as_py()

    with pytest.raises(
        InvalidInputError,
        match=rf"feature 'book_imb_1' is not finite \(nan\) at bar 300 \(ts_close {ts}, ",
    ):
        compute_features(broken, ALL)


def test_null_top_of_book_price_raises_naming_spread(bars: pa.Table) -> None:
    mask = np.zeros(420, dtype=bool)
    mask[333] = True
    ask = pa.array(bars.column("ask_px_00").to_numpy(), mask=mask)

    with pytest.raises(
        InvalidInputError, match=r"feature 'spread' is not finite \(nan\) at bar 333"
    ):
        compute_features(_with(bars, "ask_px_00", ask), ALL)


def test_nonfinite_in_warmup_rows_is_dropped_not_an_error(bars: pa.Table) -> None:
    mask = np.zeros(420, dtype=bool)
    mask[10] = True  # inside the 99-bar warm-up
    ask = pa.array(bars.column("ask_px_00").to_numpy(), mask=mask)

    frame = compute_features(_with(bars, "ask_px_00", ask), ALL)

    assert frame.warmup_rows_dropped == 99


def test_too_few_bars_raises_with_counts(bars: pa.Table) -> None:
    with pytest.raises(
        InvalidInputError, match="only 104 bars: the feature set needs 99 warm-up bars plus 5"
    ):
        compute_features(bars.slice(0, 104), ALL)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.drop_columns(["ofi_03"]), "missing column"),
        (lambda t: t.take(pa.array([1, 0, *range(2, 420)])), "ts_close must increase strictly"),
        (
            lambda t: _with(t, "close", pc.multiply(t.column("close"), -1.0)),
            "close must be a positive",
        ),
        (
            lambda t: _with(
                t, "instrument_id", pa.array(np.where(np.arange(420) % 2, 1, 2).astype(np.uint32))
            ),
            "returns to a contract it had left",
        ),
        (lambda t: t.slice(0, 0), "no rows"),
    ],
    ids=["missing-column", "unsorted", "negative-close", "interleaved", "empty"],
)
def test_invalid_bar_table_raises_schema_error(
    bars: pa.Table, mutate: object, message: str
) -> None:
    with pytest.raises(SchemaError, match=message):
        compute_features(mutate(bars), ALL)  # type: ignore[operator]
