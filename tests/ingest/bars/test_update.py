"""BarBuilder: a day's bars built chunk by chunk equal build_bars of the whole day, bit for bit."""

from __future__ import annotations

import datetime as dt
import math
import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fxstore.config import BarConfig
from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError
from fxstore.ingest.bars.builder import BarBuilder, build_bars
from fxstore.market.calendar import session_bounds_ns
from tests.ingest._books import SECOND, Event, Records, make_records, random_day, trade

DAY = dt.date(2024, 3, 5)
OPEN, CLOSE = session_bounds_ns(DAY)

_CONFIGS = [
    BarConfig("tick", threshold=3, multiplier=50.0),
    BarConfig("volume", threshold=25, multiplier=50.0),
    BarConfig("dollar", threshold=5_000_000, multiplier=50.0),
    BarConfig("time", threshold=1800, multiplier=50.0),
    BarConfig("time", threshold=7, multiplier=50.0),
    *(
        BarConfig(bar_type, target_bars_per_day=200, multiplier=50.0)
        for bar_type in ("tick_imbalance", "volume_imbalance", "dollar_imbalance")
    ),
]


def _builder(config: BarConfig, **kwargs: int) -> BarBuilder:
    return BarBuilder(
        config,
        trading_day=DAY,
        contract="ESH4",
        session_open_ns=OPEN,
        session_close_ns=CLOSE,
        **kwargs,
    )


def _whole(records: Records, config: BarConfig) -> pa.Table:
    return build_bars(
        records,
        config,
        trading_day=DAY,
        contract="ESH4",
        session_open_ns=OPEN,
        session_close_ns=CLOSE,
    )


def _in_chunks(records: Records, config: BarConfig, sizes: list[int]) -> pa.Table:
    """Feed `records` in chunks of `sizes` (cycled), the way a reader does: each chunk is a
    read-only view of a buffer that is overwritten once `update` returns."""
    builder = _builder(config)
    start, i = 0, 0
    while start < records.shape[0]:
        size = sizes[i % len(sizes)]
        buffer = records[start : start + size].copy()
        view = buffer[:]
        view.flags.writeable = False
        builder.update(view)
        buffer.view(np.uint8)[:] = 0xAB  # the reader reuses its memory
        start, i = start + size, i + 1
    return builder.finish()


def _assert_bit_identical(got: pa.Table, expected: pa.Table) -> None:
    assert got.equals(expected)
    for name in expected.column_names:  # equals() holds 0.0 == -0.0: compare the bits too
        column = expected.column(name)
        if pa.types.is_floating(column.type):
            bits = column.to_numpy(zero_copy_only=False).view(np.uint64)
            other = got.column(name).to_numpy(zero_copy_only=False).view(np.uint64)
            np.testing.assert_array_equal(other, bits, err_msg=name)


@st.composite
def _days(draw: st.DrawFn) -> Records:
    """Up to 40 packets of 1-4 records, seconds to minutes apart, some trades damaged."""
    events, ts = [], 0
    for _ in range(draw(st.integers(0, 40))):
        ts += draw(st.sampled_from([1, SECOND, 5 * SECOND, 60 * SECOND, 900 * SECOND]))
        n = draw(st.integers(1, 4))
        for j in range(n):
            damaged = draw(st.integers(0, 30)) == 0
            events.append(
                Event(
                    ts,
                    draw(st.sampled_from("TTAC")),
                    draw(st.sampled_from("BAN")),
                    math.nan if damaged else 5000.0 + 0.25 * draw(st.integers(-4, 4)),
                    draw(st.integers(1, 20)),
                    last=j == n - 1 or draw(st.integers(0, 20)) == 0,  # rarely: no F_LAST
                )
            )
    return make_records(events)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=_days(),
    config=st.sampled_from(_CONFIGS),
    sizes=st.lists(st.sampled_from([1, 1, 2, 3, 5, 8, 50]), min_size=1, max_size=8),
)
def test_bar_builder_any_chunking_gives_the_same_table_as_one_call(
    records: Records, config: BarConfig, sizes: list[int]
) -> None:
    with warnings.catch_warnings():  # damaged trades: tested below
        warnings.simplefilter("ignore", FxStoreWarning)
        expected = _whole(records, config)
        got = _in_chunks(records, config, sizes)

    _assert_bit_identical(got, expected)


@pytest.mark.parametrize("config", _CONFIGS, ids=lambda c: c.bar_type)
@pytest.mark.parametrize("sizes", [[1], [7, 1, 300], [4096]], ids=str)
def test_bar_builder_random_day_in_chunks_is_bit_identical(
    config: BarConfig, sizes: list[int]
) -> None:
    records = random_day(np.random.default_rng(3), 1500, gap_ns=20 * SECOND)

    table = _in_chunks(records, config, sizes)

    assert table.num_rows > 5
    _assert_bit_identical(table, _whole(records, config))


def _interleaved(records: Records, rng: np.random.Generator) -> tuple[Records, np.ndarray]:
    """`records` (instrument 7) with another instrument's records between them, ts order kept;
    and the rows of `records` in the result."""
    others = records[rng.random(records.shape[0]) < 0.6].copy()
    others["instrument_id"] = 8
    others["price"] += 1
    both = np.concatenate([records, others])
    order = np.argsort(both["ts_recv"], kind="stable")
    mixed = both[order]
    return mixed, np.flatnonzero(order < records.shape[0])


@pytest.mark.parametrize("config", _CONFIGS, ids=lambda c: c.bar_type)
def test_bar_builder_rows_of_mixed_chunks_equal_the_instruments_own_records(
    config: BarConfig,
) -> None:
    records = random_day(np.random.default_rng(5), 1500, gap_ns=20 * SECOND)
    mixed, rows = _interleaved(records, np.random.default_rng(6))
    builder = _builder(config)
    for start in range(0, mixed.shape[0], 333):  # chunks of both instruments
        stop = start + 333
        mine = rows[(rows >= start) & (rows < stop)] - start
        builder.update(mixed[start:stop], mine)

    _assert_bit_identical(builder.finish(), _whole(records, config))


def test_bar_builder_rows_must_be_ascending_indices_of_the_instrument() -> None:
    records = make_records([trade(t * SECOND, "B", 5000.0) for t in range(4)])
    records["instrument_id"][3] = 8
    builder = _builder(BarConfig("tick", threshold=2, multiplier=50.0))

    for bad in (np.array([1, 0]), np.array([0, 0]), np.array([0, 4]), np.array([-1])):
        with pytest.raises(InvalidInputError, match="`rows` must be ascending indices"):
            builder.update(records, bad)
    with pytest.raises(InvalidInputError, match="`rows` must be a 1-d integer array"):
        builder.update(records, np.array([0.0]))
    with pytest.raises(InvalidInputError, match=r"2 instruments \(7, 8\)"):
        builder.update(records, np.array([0, 3]))
    builder.update(records, np.array([0, 1, 2]))

    _assert_bit_identical(
        builder.finish(), _whole(records[:3], BarConfig("tick", threshold=2, multiplier=50.0))
    )


def test_bar_builder_chunk_going_back_in_time_is_rejected_whole() -> None:
    records = make_records([trade(t * SECOND, "B", 5000.0) for t in range(6)])
    config = BarConfig("tick", threshold=2, multiplier=50.0)
    builder = _builder(config)
    builder.update(records[:4])

    with pytest.raises(SchemaError, match=r"sorted by ts_recv; record 4 goes back in time"):
        builder.update(records[[2, 5]])  # record 4 of the day repeats an earlier time
    builder.update(records[4:])

    _assert_bit_identical(builder.finish(), _whole(records, config))


def test_bar_builder_chunk_of_another_instrument_is_rejected() -> None:
    records = make_records([trade(t, "B", 5000.0) for t in range(4)])
    other = records[2:].copy()
    other["instrument_id"] = 8
    builder = _builder(BarConfig("tick", threshold=2, multiplier=50.0))
    builder.update(records[:2])

    with pytest.raises(InvalidInputError, match=r"2 instruments \(7, 8\) \(this builder's is 7\)"):
        builder.update(other)


def test_bar_builder_given_instrument_id_rejects_other_records() -> None:
    builder = _builder(BarConfig("tick", threshold=2, multiplier=50.0), instrument_id=9)

    with pytest.raises(InvalidInputError, match=r"this builder's is 9"):
        builder.update(make_records([trade(0, "B", 5000.0)]))


def test_bar_builder_update_after_finish_raises() -> None:
    builder = _builder(BarConfig("tick", threshold=2, multiplier=50.0))
    builder.finish()

    with pytest.raises(InvalidInputError, match="the day is finished"):
        builder.update(make_records([trade(0, "B", 5000.0)]))


def test_bar_builder_wrong_dtype_raises_schema_error() -> None:
    with pytest.raises(SchemaError, match=r"BarBuilder\.update: records must be a 1-d array"):
        _builder(BarConfig(multiplier=50.0)).update(np.zeros(3, dtype=np.int64))


def test_bar_builder_damaged_trades_warn_once_with_the_day_total() -> None:
    events = [trade(0, "B", math.nan), trade(1, "B", 5000.0), trade(2, "A", math.nan)]
    records = make_records(events)
    builder = _builder(BarConfig("tick", threshold=10, multiplier=50.0))
    builder.update(records[:2])
    builder.update(records[2:])

    with pytest.warns(FxStoreWarning, match="skipped 2 trade records") as caught:
        builder.finish()

    assert len(caught) == 1


def test_bar_builder_strided_records_equal_contiguous_ones() -> None:
    records = random_day(np.random.default_rng(4), 200)
    config = BarConfig("volume", threshold=100, multiplier=50.0)
    builder = _builder(config)
    builder.update(records[::2])

    _assert_bit_identical(builder.finish(), _whole(records[::2].copy(), config))


def test_bar_builder_memory_follows_bars_not_records() -> None:
    records = random_day(np.random.default_rng(5), 4000)
    builder = _builder(BarConfig("tick", threshold=10**6, multiplier=50.0))  # one bar all day
    for start in range(0, records.shape[0], 100):
        builder.update(records[start : start + 100])

    engine = builder._engine
    assert engine is not None
    assert engine._bars[0].shape[0] <= 64 + 101  # initial room, or one chunk's worth
