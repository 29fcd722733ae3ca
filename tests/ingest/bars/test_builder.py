from __future__ import annotations

import datetime as dt
import itertools
import math
import re
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fxstore.config import BarConfig
from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError
from fxstore.ingest.bars import kernels
from fxstore.ingest.bars.builder import BAR_SCHEMA, build_bars, find_bar_ranges
from fxstore.ingest.dbn.format import (
    F_BAD_TS_RECV,
    F_LAST,
    F_MAYBE_BAD_BOOK,
    MBP10_DTYPE,
    N_LEVELS,
    UNDEF_PRICE,
)
from fxstore.market.calendar import session_bounds_ns
from tests.ingest._books import (
    SECOND,
    T0,
    Event,
    Records,
    make_records,
    quote,
    random_day,
    set_level,
    to_fixed,
    trade,
    trade_records,
)

DAY = dt.date(2024, 3, 5)
OPEN, CLOSE = session_bounds_ns(DAY)
assert OPEN == T0  # the helper's records start at this day's open

Ranges = list[tuple[int, int]]


def _build(records: Records, config: BarConfig, *, close_ns: int = CLOSE) -> pa.Table:
    return build_bars(
        records,
        config,
        trading_day=DAY,
        contract="ESH4",
        session_open_ns=OPEN,
        session_close_ns=close_ns,
    )


def _ranges(records: Records, config: BarConfig, *, close_ns: int = CLOSE) -> Ranges:
    found = find_bar_ranges(records, config, session_open_ns=OPEN, session_close_ns=close_ns)
    return list(zip(found.start.tolist(), found.end.tolist(), strict=True))


def _column(table: pa.Table, name: str) -> list[object]:
    return list(table.column(name).to_pylist())


# --- hand-computed cases: which record closes each bar ---------------------------------------


def test_build_bars_tick_threshold_crossed_mid_packet_closes_at_f_last() -> None:
    records = make_records(
        [
            quote(0),
            trade(1, "B", 5000.0),
            trade(2, "A", 4999.75, last=False),  # 2nd trade: threshold reached mid-packet
            quote(2),  # the packet's F_LAST closes bar 0
            trade(3, "B", 5000.0),
            quote(4),
            trade(5, "B", 5000.25, 2),  # 2nd trade of bar 1, F_LAST: closes it
            trade(6, "A", 5000.0),
            quote(7),
        ]
    )
    config = BarConfig("tick", threshold=2, multiplier=50.0)

    table = _build(records, config)

    assert _ranges(records, config) == [(0, 3), (4, 6), (7, 8)]
    assert _column(table, "n_events") == [4, 3, 2]
    assert _column(table, "ts_close") == [T0 + 2, T0 + 5, T0 + 7]
    assert _column(table, "is_partial") == [False, False, True]
    assert _column(table, "threshold") == [2.0, 2.0, 2.0]


def test_build_bars_volume_bar_keeps_whole_packet_and_does_not_carry_over() -> None:
    records = make_records(
        [
            trade(0, "B", 5000.0, 4),
            trade(1, "B", 5000.0, 5),
            trade(2, "A", 5000.0, 3, last=False),  # 12 >= 10: armed mid-packet
            trade(2, "B", 5000.0, 7),  # same packet: belongs to bar 0
            trade(3, "A", 5000.0, 10),  # exactly 10 from zero: closes bar 1
            quote(4),  # trade-less tail: in no bar
        ]
    )
    config = BarConfig("volume", threshold=10, multiplier=50.0)

    table = _build(records, config)

    assert _ranges(records, config) == [(0, 3), (4, 4)]
    assert _column(table, "volume") == [19, 10]
    assert _column(table, "buy_volume") == [16, 0]
    assert _column(table, "sell_volume") == [3, 10]
    assert _column(table, "is_partial") == [False, False]


def test_build_bars_dollar_bars_weigh_price_times_size_times_multiplier() -> None:
    records = make_records(
        [
            trade(0, "B", 5000.0),  # $250,000 at 50 $/point
            trade(1, "B", 6000.0),  # $300,000 → 550,000
            trade(2, "A", 1000.0),  # $50,000 → 600,000: reaches the threshold exactly
            trade(3, "B", 5000.0, 2),  # $500,000
            trade(4, "B", 5000.0),  # → 750,000
        ]
    )
    config = BarConfig("dollar", threshold=600_000, multiplier=50)

    table = _build(records, config)

    assert _ranges(records, config) == [(0, 2), (3, 4)]
    assert _column(table, "dollar_volume") == [600_000.0, 750_000.0]
    assert _column(table, "vwap") == [4000.0, 5000.0]
    assert _column(table, "open") == [5000.0, 5000.0]
    assert _column(table, "high") == [6000.0, 5000.0]
    assert _column(table, "low") == [1000.0, 5000.0]
    assert _column(table, "close") == [1000.0, 5000.0]


def test_build_bars_time_bars_skip_empty_intervals_and_move_open_packets() -> None:
    s = SECOND
    records = make_records(
        [
            quote(5 * s),
            trade(10 * s, "B", 5000.0),
            trade(50 * s, "A", 5000.0),  # last F_LAST of [0, 60 s): closes bar 0
            quote(59 * s, last=False),  # packet still open at 60 s: moves to the next bar
            quote(61 * s),
            trade(70 * s, "B", 5000.25),  # closes bar 1 ([60, 120 s))
            quote(130 * s),  # [120, 180 s) has no trade: no bar, records in none
            quote(150 * s),
            trade(200 * s, "A", 5000.0),
            quote(210 * s),
        ]
    )
    config = BarConfig("time", threshold=60, multiplier=50.0)

    table = _build(records, config)

    assert _ranges(records, config) == [(0, 2), (3, 5), (8, 9)]
    assert _column(table, "ts_open") == [T0 + 5 * s, T0 + 59 * s, T0 + 200 * s]
    assert _column(table, "is_partial") == [False, False, False]
    assert _column(table, "threshold") == [60.0, 60.0, 60.0]


def test_build_bars_time_bars_are_aligned_to_the_session_open() -> None:
    records = make_records(
        [
            trade(0, "B", 5000.0),
            trade(60 * SECOND - 1, "B", 5000.0),
            trade(60 * SECOND, "A", 5000.0),
        ]
    )

    ranges = _ranges(records, BarConfig("time", threshold=60, multiplier=50.0))

    assert ranges == [(0, 1), (2, 2)]  # a record at open + 60 s opens the second interval


def test_build_bars_time_bar_cut_by_session_close_is_partial() -> None:
    hour = 3600 * SECOND
    records = make_records([trade(hour, "B", 5000.0), trade(22 * hour, "A", 5000.0)])
    # a 23 h session: the 4th bar ends at 28 h
    config = BarConfig("time", threshold=7 * 3600, multiplier=50.0)

    table = _build(records, config)

    assert _ranges(records, config) == [(0, 0), (1, 1)]
    assert _column(table, "is_partial") == [False, True]


def test_sign_trades_uses_tick_rule_only_where_side_is_unknown() -> None:
    trades = [
        ("N", 5000.0),  # no earlier trade today: 0
        ("B", 5000.0),  # aggressor: +1
        ("N", 5000.25),  # uptick: +1
        ("A", 5000.25),  # aggressor: -1
        ("N", 5000.25),  # no change: carries -1
        ("N", 5000.0),  # downtick: -1
        ("N", 5000.25),  # uptick: +1
        ("B", 4999.75),  # aggressor wins over the downtick: +1
    ]
    records = make_records([trade(i, side, px, i + 1) for i, (side, px) in enumerate(trades)])
    config = BarConfig("tick", threshold=100, multiplier=50.0)

    table = _build(records, config)

    assert _column(table, "buy_volume") == [2 + 3 + 7 + 8]
    assert _column(table, "sell_volume") == [4 + 5 + 6]
    assert _column(table, "volume") == [36]
    assert _column(table, "n_tick_rule") == [5]
    assert _column(table, "imbalance") == [1.0]  # tick bars: θ = Σ b


def test_sign_trades_kernel_on_hand_sequence() -> None:
    is_trade = np.array([True, False, True, True, True, True])
    aggressor = np.array([0, 1, 0, -1, 0, 0], dtype=np.int8)
    price = np.array([10, 99, 11, 11, 11, 11], dtype=np.int64)

    sign = kernels.sign_trades(is_trade, aggressor, price)

    # the quote at index 1 is ignored; index 2 upticks from the trade at index 0
    assert sign.tolist() == [0, 0, 1, -1, -1, -1]


# --- imbalance bars: hand-computed with spans of 1 (the EWMAs hold the last value) ---------

_SESSION_1000S = OPEN + 1000 * SECOND  # 10 target bars: a 100 s warm-up


def _imbalance_config(bar_type: str) -> BarConfig:
    return BarConfig(
        bar_type,  # type: ignore[arg-type]
        target_bars_per_day=10,
        band=3,
        ewma_span_bars=1,
        ewma_span_trades=1,
        multiplier=50.0,
    )


def _recent(n_trades: int) -> float:
    """Trades every 10 s, weighted by exp(-age / 100 s), seen from the last one."""
    return sum(math.exp(-m / 10) for m in range(n_trades))


def test_imbalance_bars_warm_up_threshold_and_max_trades_close_as_computed() -> None:
    s = SECOND
    signs = [1] * 11 + [1] * 11 + [-1, 1] * 16 + [1, 1]
    events = [trade(10 * s * j, "B" if b > 0 else "A", 5000.0) for j, b in enumerate(signs)]
    # the warm-up is due at the trade at 100 s, mid-packet: the bar closes at its F_LAST
    events[10] = trade(100 * s, "B", 5000.0, last=False)
    events.insert(11, quote(100 * s))
    records = make_records(events)
    config = _imbalance_config("tick_imbalance")

    found = find_bar_ranges(records, config, session_open_ns=OPEN, session_close_ns=_SESSION_1000S)

    # warm-up: 11 trades in 100 s → T* = 11, E0[T] = 11, E0[b·v] = +1, no variance → h = 11,
    # bar length in [ceil(11/3), ceil(33)] = [4, 33].
    # bar 1: 11 buys reach |θ| = 11. Then T* = 22·100/210 = 10.48 → E0[T] = 11, h = 11,
    # max trades ceil(31.4) = 32; bar 2 alternates -1, +1: |θ| <= 1, so it closes at 32 trades.
    assert list(zip(found.start.tolist(), found.end.tolist(), strict=True)) == [
        (0, 11),
        (12, 22),
        (23, 54),
        (55, 56),
    ]
    t_star = max(54 * 100 / 530, _recent(54))
    # E0[T] = 32 clipped to 3·T*; θ - 32·E0[b·v] = -32 → variance 32 → floor sqrt(32·T*)
    expected_h = max(3 * t_star * 1.0, math.sqrt(t_star * 32.0))
    assert found.threshold[:3].tolist() == pytest.approx([math.nan, 11.0, 11.0], nan_ok=True)
    assert found.threshold[3] == pytest.approx(expected_h)
    assert found.is_partial.tolist() == [False, False, False, True]


def test_imbalance_bars_big_trade_waits_for_min_trades() -> None:
    s = SECOND
    events = [trade(10 * s * j, "B", 5000.0) for j in range(11)]  # warm-up: h = 11, min 4
    events += [
        trade(110 * s, "B", 5000.0, 100),  # |θ| = 100 >= 11 but 1 trade < 4
        trade(120 * s, "B", 5000.0),
        trade(130 * s, "A", 5000.0),
        trade(140 * s, "A", 5000.0),  # 4th trade: closes
        trade(150 * s, "B", 5000.0),
    ]
    records = make_records(events)

    ranges = _ranges(records, _imbalance_config("volume_imbalance"), close_ns=_SESSION_1000S)

    assert ranges == [(0, 10), (11, 14), (15, 15)]


def test_build_bars_imbalance_threshold_column_is_null_for_warm_up_bar() -> None:
    s = SECOND
    records = make_records([trade(10 * s * j, "B", 5000.0) for j in range(30)])

    table = _build(records, _imbalance_config("dollar_imbalance"), close_ns=_SESSION_1000S)

    assert table.column("threshold").null_count == 1
    assert table.column("threshold")[0].as_py() is None
    assert table.column("threshold")[1].as_py() == pytest.approx(11 * 5000.0 * 50)


# --- book at close, OFI and data quality ----------------------------------------------------


def test_build_bars_ofi_per_level_from_consistent_states_only() -> None:
    records = make_records([trade(0, "B", 5000.0), quote(1), quote(2, last=False), quote(3)])
    # state 1 (record 1, kept by records 2 and 3) vs state 0, the static book:
    # bid 4999.75 - k/4 with size 10 + k, ask 5000 + k/4 with size 20 + k
    changes = [
        ("bid", 0, 4999.75, 15),  # same price, 10 → 15: +5
        ("ask", 0, 5000.0, 18),  # same price, 20 → 18: +2
        ("bid", 1, 4999.25, 30),  # bid down: -11
        ("ask", 1, 5000.5, 40),  # ask up: +21
        ("bid", 2, math.nan, 0),  # bid emptied: -12
        ("ask", 2, math.nan, 0),  # ask emptied: +22
        ("bid", 3, 4999.25, 50),  # bid up: +50
        ("ask", 3, 5000.5, 60),  # ask down: -60
    ]
    for i in (1, 2, 3):
        for side, level, price, size in changes:
            set_level(records, i, side, level, price, size)
    set_level(records, 2, "bid", 0, 1.0, 99_999)  # mid-packet (no F_LAST): ignored
    set_level(records, 3, "bid", 2, 4998.75, 5)  # reappears above -inf: +5; ask stays empty
    records["ask_sz_02"][1:] = [7, 8, 9]  # an empty level's size is ignored, even if not 0

    table = _build(records, BarConfig("tick", threshold=10, multiplier=50.0))

    ofi = [_column(table, f"ofi_{k:02d}")[0] for k in range(N_LEVELS)]
    assert ofi == [7.0, 10.0, 10.0 + 5.0, -10.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_build_bars_empty_levels_at_close_are_null_and_quality_is_counted() -> None:
    records = make_records(
        [
            quote(0, flags=F_MAYBE_BAD_BOOK),
            trade(1, "B", 5000.0),  # closes bar 0, which spans a maybe-bad book
            Event(2, "T", "A", 5000.0, 1, True, F_BAD_TS_RECV),  # closes bar 1
            quote(3),  # locked: bid 5000 = ask 5000
            trade(4, "B", 5000.0),  # crossed: bid 5000.25 > ask 5000; closes bar 2
        ]
    )
    set_level(records, 2, "bid", 5, math.nan, 0)
    set_level(records, 2, "ask", 9, math.nan, 0)
    records["ask_ct_09"][2] = 4  # a count at an empty level is not reported
    set_level(records, 3, "bid", 0, 5000.0, 3)
    set_level(records, 4, "bid", 0, 5000.25, 3)

    table = _build(records, BarConfig("tick", threshold=1, multiplier=50.0))

    assert _column(table, "has_maybe_bad_book") == [True, False, False]
    assert _column(table, "n_maybe_bad_book") == [1, 0, 0]
    assert _column(table, "n_bad_ts_recv") == [0, 1, 0]
    assert _column(table, "n_crossed") == [0, 0, 2]
    assert _column(table, "bid_px_05") == [4998.5, None, 4998.5]
    assert _column(table, "ask_px_09") == [5002.25, None, 5002.25]
    assert _column(table, "bid_sz_05") == [15, 0, 15]
    assert _column(table, "ask_ct_09") == [11, 0, 11]
    assert _column(table, "bid_px_00")[2] == 5000.25


def test_build_bars_last_bar_ending_mid_packet_uses_last_consistent_book() -> None:
    records = make_records([trade(0, "B", 5000.0), trade(1, "A", 5000.0, last=False)])
    set_level(records, 1, "bid", 0, 1.0, 1)  # mid-packet state: never a snapshot

    table = _build(records, BarConfig("tick", threshold=5, multiplier=50.0))

    assert _column(table, "bid_px_00") == [4999.75]
    assert _column(table, "is_partial") == [True]


# --- edges and errors -------------------------------------------------------------------------


def test_build_bars_no_records_returns_empty_table_with_schema() -> None:
    table = _build(np.zeros(0, dtype=MBP10_DTYPE), BarConfig(multiplier=50.0))

    assert table.num_rows == 0
    assert table.schema == BAR_SCHEMA


def test_build_bars_no_trades_returns_no_rows() -> None:
    records = make_records([quote(0), quote(1), quote(2)])

    assert _build(records, BarConfig("time", threshold=1, multiplier=50.0)).num_rows == 0


def test_build_bars_damaged_trade_warns_and_is_not_counted() -> None:
    records = make_records([trade(0, "B", 5000.0), trade(1, "B", math.nan), trade(2, "A", 5000.0)])

    with pytest.warns(FxStoreWarning, match="skipped 1 trade records"):
        table = _build(records, BarConfig("tick", threshold=10, multiplier=50.0))

    assert _column(table, "n_trades") == [2]
    assert _column(table, "n_events") == [3]


def test_build_bars_unsorted_records_raise_schema_error() -> None:
    records = make_records([trade(5, "B", 5000.0), trade(3, "B", 5000.0)])

    with pytest.raises(SchemaError, match=r"sorted by ts_recv; record 1 goes back in time"):
        _build(records, BarConfig(multiplier=50.0))


def test_build_bars_two_instruments_raise_invalid_input() -> None:
    records = make_records([trade(0, "B", 5000.0), trade(1, "B", 5000.0)])
    records["instrument_id"][1] = 8

    with pytest.raises(InvalidInputError, match=r"records hold 2 instruments \(7, 8\)"):
        _build(records, BarConfig(multiplier=50.0))


def test_build_bars_wrong_dtype_raises_schema_error() -> None:
    with pytest.raises(SchemaError, match="records must be a 1-d array of MBP10_DTYPE"):
        _build(np.zeros(3, dtype=[("ts_recv", "<u8")]), BarConfig(multiplier=50.0))


def test_build_bars_reversed_session_raises_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="`session_close_ns` must be after"):
        _build(make_records([trade(0, "B", 5000.0)]), BarConfig(multiplier=50.0), close_ns=OPEN)


def test_build_bars_columns_match_schema_and_row_context() -> None:
    table = _build(
        make_records([trade(0, "B", 5000.0)]), BarConfig("tick", threshold=1, multiplier=50.0)
    )

    assert table.schema == BAR_SCHEMA
    assert _column(table, "trading_day") == [DAY]
    assert _column(table, "contract") == ["ESH4"]
    assert _column(table, "instrument_id") == [7]


# --- a slow, obvious recomputation on random days ---------------------------------------------


def _ref_signs(records: Records) -> list[int]:
    signs, prev_price, prev_sign = [], None, 0
    for action, side, price in zip(
        records["action"].tolist(), records["side"].tolist(), records["price"].tolist(), strict=True
    ):
        if action != b"T":
            signs.append(0)
            continue
        if side in (b"B", b"A"):
            sign = 1 if side == b"B" else -1
        elif prev_price is None:
            sign = 0
        else:
            sign = 1 if price > prev_price else -1 if price < prev_price else prev_sign
        signs.append(sign)
        prev_price, prev_sign = price, sign
    return signs


def _ref_weights(records: Records, config: BarConfig) -> list[float]:
    """v of every record: 0 for non-trades; 1, size, or price·size·multiplier for trades."""
    out = []
    for action, price, size in zip(
        records["action"].tolist(), records["price"].tolist(), records["size"].tolist(), strict=True
    ):
        if action != b"T":
            out.append(0.0)
        elif config.bar_type in ("tick", "tick_imbalance"):
            out.append(1.0)
        elif config.bar_type in ("dollar", "dollar_imbalance"):
            out.append(price / 1e9 * size * config.multiplier)
        else:
            out.append(float(size))
    return out


def _ref_plain_ranges(records: Records, config: BarConfig) -> Ranges:
    is_last = ((records["flags"] & F_LAST) != 0).tolist()
    is_trade = (records["action"] == b"T").tolist()
    ranges, first, total, has_trade = [], 0, 0.0, False
    for i, weight in enumerate(_ref_weights(records, config)):
        total += weight
        has_trade = has_trade or is_trade[i]
        if total >= float(config.threshold or 0) and is_last[i]:
            ranges.append((first, i))
            first, total, has_trade = i + 1, 0.0, False
    return ranges + ([(first, len(records) - 1)] if has_trade else [])


def _ref_time_ranges(records: Records, seconds: float) -> Ranges:
    """A bar ends at the last F_LAST record of its interval once a later interval has begun."""
    interval = [max(0, (t - OPEN) // round(seconds * 1e9)) for t in records["ts_recv"].tolist()]
    lasts = np.flatnonzero(records["flags"] & F_LAST).tolist()
    ends = [
        j
        for j, nxt in zip(lasts, [*lasts[1:], None], strict=True)
        if (nxt is None or interval[nxt] > interval[j]) and interval[-1] > interval[j]
    ]
    is_trade = records["action"] == b"T"
    bounds = [-1, *ends, len(records) - 1]
    pairs = [(a + 1, b) for a, b in itertools.pairwise(bounds) if b > a]
    return [(a, b) for a, b in pairs if is_trade[a : b + 1].any()]


def _ref_ofi(records: Records, ranges: Ranges) -> np.ndarray:
    bar_of = {i: j for j, (a, b) in enumerate(ranges) for i in range(a, b + 1)}
    ofi, prev = np.zeros((len(ranges), N_LEVELS)), None
    for i in np.flatnonzero(records["flags"] & F_LAST).tolist():
        state = []
        for k in range(N_LEVELS):
            bid, ask = int(records[f"bid_px_{k:02d}"][i]), int(records[f"ask_px_{k:02d}"][i])
            bid_q = 0 if bid == UNDEF_PRICE else int(records[f"bid_sz_{k:02d}"][i])
            ask_q = 0 if ask == UNDEF_PRICE else int(records[f"ask_sz_{k:02d}"][i])
            bid_f = -math.inf if bid == UNDEF_PRICE else bid / 1e9
            ask_f = math.inf if ask == UNDEF_PRICE else ask / 1e9
            state.append((bid_f, bid_q, ask_f, ask_q))
        if prev is not None and i in bar_of:
            for k, ((pb, qb, pa_, qa), (pb0, qb0, pa0, qa0)) in enumerate(
                zip(state, prev, strict=True)
            ):
                ofi[bar_of[i], k] += (
                    (qb if pb >= pb0 else 0)
                    - (qb0 if pb <= pb0 else 0)
                    - (qa if pa_ <= pa0 else 0)
                    + (qa0 if pa_ >= pa0 else 0)
                )
        prev = state
    return ofi


def _ref_trade_columns(
    records: Records, ranges: Ranges, config: BarConfig
) -> dict[str, list[float]]:
    signs, weights = _ref_signs(records), _ref_weights(records, config)
    out: dict[str, list[float]] = {}
    for a, b in ranges:
        trades = [i for i in range(a, b + 1) if records["action"][i] == b"T"]
        prices = [records["price"][i] / 1e9 for i in trades]
        sizes = [int(records["size"][i]) for i in trades]
        row = {
            "open": prices[0],
            "high": max(prices),
            "low": min(prices),
            "close": prices[-1],
            "volume": sum(sizes),
            "buy_volume": sum(q for i, q in zip(trades, sizes, strict=True) if signs[i] > 0),
            "sell_volume": sum(q for i, q in zip(trades, sizes, strict=True) if signs[i] < 0),
            "n_trades": len(trades),
            "n_events": b - a + 1,
            "vwap": sum(p * q for p, q in zip(prices, sizes, strict=True)) / sum(sizes),
            "dollar_volume": sum(p * q for p, q in zip(prices, sizes, strict=True))
            * config.multiplier,
            "imbalance": sum(signs[i] * weights[i] for i in trades),
            "n_tick_rule": sum(records["side"][i] not in (b"B", b"A") for i in trades),
        }
        for name, value in row.items():
            out.setdefault(name, []).append(value)
    return out


def _ref_book_columns(records: Records, ranges: Ranges) -> dict[str, list[object]]:
    lasts = np.flatnonzero(records["flags"] & F_LAST)
    out: dict[str, list[object]] = {}
    for a, b in ranges:
        snap = lasts[lasts <= b][-1]
        for side in ("bid", "ask"):
            for k in range(N_LEVELS):
                px = int(records[f"{side}_px_{k:02d}"][snap])
                out.setdefault(f"{side}_px_{k:02d}", []).append(
                    None if px == UNDEF_PRICE else px / 1e9
                )
                for kind in ("sz", "ct"):
                    name = f"{side}_{kind}_{k:02d}"
                    qty = 0 if px == UNDEF_PRICE else int(records[name][snap])
                    out.setdefault(name, []).append(qty)
        states = [i for i in lasts if a <= i <= b]
        bids, asks = records["bid_px_00"][states], records["ask_px_00"][states]
        defined = (bids != UNDEF_PRICE) & (asks != UNDEF_PRICE)
        out.setdefault("n_crossed", []).append(int(np.sum(defined & (bids >= asks))))
        flags = records["flags"][a : b + 1]
        out.setdefault("n_bad_ts_recv", []).append(int(np.sum(flags & F_BAD_TS_RECV > 0)))
        out.setdefault("n_maybe_bad_book", []).append(int(np.sum(flags & F_MAYBE_BAD_BOOK > 0)))
    return out


_PLAIN_CONFIGS = [
    BarConfig("tick", threshold=40, multiplier=50.0),
    BarConfig("volume", threshold=300, multiplier=50.0),
    BarConfig("dollar", threshold=30_000_000, multiplier=50.0),
    BarConfig("time", threshold=120, multiplier=50.0),
]
_IMBALANCE_CONFIGS = [
    BarConfig(bar_type, target_bars_per_day=2000, multiplier=50.0)
    for bar_type in ("tick_imbalance", "volume_imbalance", "dollar_imbalance")
]


def _ref_ranges(records: Records, config: BarConfig) -> Ranges:
    if config.bar_type == "time":
        return _ref_time_ranges(records, float(config.threshold or 0))
    return _ref_plain_ranges(records, config)


@pytest.mark.parametrize("config", _PLAIN_CONFIGS, ids=lambda c: c.bar_type)
@pytest.mark.parametrize("seed", [1, 2])
def test_find_bar_ranges_plain_bars_match_reference(config: BarConfig, seed: int) -> None:
    records = random_day(np.random.default_rng(seed), 1500)

    assert _ranges(records, config) == _ref_ranges(records, config)


@pytest.mark.parametrize("config", _PLAIN_CONFIGS + _IMBALANCE_CONFIGS, ids=lambda c: c.bar_type)
def test_build_bars_columns_match_reference_recomputation(config: BarConfig) -> None:
    records = random_day(np.random.default_rng(3), 1500)
    ranges = _ranges(records, config)

    table = _build(records, config)

    assert len(ranges) > 5
    for name, values in _ref_trade_columns(records, ranges, config).items():
        assert _column(table, name) == pytest.approx(values, rel=1e-12), name
    for name, expected in _ref_book_columns(records, ranges).items():
        assert _column(table, name) == expected, name
    ofi = np.column_stack([table.column(f"ofi_{k:02d}").to_numpy() for k in range(N_LEVELS)])
    np.testing.assert_array_equal(ofi, _ref_ofi(records, ranges))


# --- properties ------------------------------------------------------------------------------


@st.composite
def _days(draw: st.DrawFn) -> Records:
    """Up to 30 packets of 1-3 records, minutes apart, over a small price range."""
    events, ts = [], 0
    for _ in range(draw(st.integers(0, 30))):
        ts += draw(st.integers(1, 900 * SECOND))
        n = draw(st.integers(1, 3))
        for j in range(n):
            events.append(
                Event(
                    ts,
                    draw(st.sampled_from("TTAC")),
                    draw(st.sampled_from("BAN")),
                    5000.0 + 0.25 * draw(st.integers(-4, 4)),
                    draw(st.integers(1, 20)),
                    last=j == n - 1,
                )
            )
    return make_records(events)


_PROPERTY_CONFIGS = [
    BarConfig("tick", threshold=3, multiplier=50.0),
    BarConfig("volume", threshold=25, multiplier=50.0),
    BarConfig("dollar", threshold=5_000_000, multiplier=50.0),
    BarConfig("time", threshold=1800, multiplier=50.0),
    *(
        BarConfig(bar_type, target_bars_per_day=200, multiplier=50.0)
        for bar_type in ("tick_imbalance", "volume_imbalance", "dollar_imbalance")
    ),
]
_property_settings = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@_property_settings
@given(records=_days(), config=st.sampled_from(_PROPERTY_CONFIGS))
def test_build_bars_volume_and_trades_are_conserved(records: Records, config: BarConfig) -> None:
    is_trade = records["action"] == b"T"

    table = _build(records, config)

    assert sum(_column(table, "volume")) == int(records["size"][is_trade].sum())  # type: ignore[arg-type]
    assert sum(_column(table, "n_trades")) == int(is_trade.sum())  # type: ignore[arg-type]


@_property_settings
@given(records=_days(), config=st.sampled_from(_PROPERTY_CONFIGS))
def test_build_bars_bars_are_ordered_and_do_not_overlap(
    records: Records, config: BarConfig
) -> None:
    table = _build(records, config)

    ts_open = np.asarray(_column(table, "ts_open"), dtype=np.int64)
    ts_close = np.asarray(_column(table, "ts_close"), dtype=np.int64)
    assert (ts_open <= ts_close).all()
    assert (ts_close[:-1] < ts_open[1:]).all()  # packets here have distinct ts_recv


@_property_settings
@given(records=_days(), config=st.sampled_from(_PROPERTY_CONFIGS))
def test_find_bar_ranges_puts_every_trade_in_exactly_one_bar(
    records: Records, config: BarConfig
) -> None:
    found = find_bar_ranges(records, config, session_open_ns=OPEN, session_close_ns=CLOSE)

    coverage = np.zeros(records.shape[0], dtype=np.int64)
    for a, b in zip(found.start.tolist(), found.end.tolist(), strict=True):
        coverage[a : b + 1] += 1
        assert (records["action"][a : b + 1] == b"T").any()
    assert coverage.max(initial=0) <= 1
    assert (coverage[records["action"] == b"T"] == 1).all()
    assert (records["flags"][found.end[:-1]] & F_LAST).all()


# --- threshold robustness: quiet and busy regimes over many days ------------------------------

_HOUR = 3600 * SECOND
#: ES-like intraday activity: (start hour after the open, hours, relative trade rate).
_ES_PROFILE = ((0.0, 15.5, 1.0), (15.5, 6.75, 10.0), (22.25, 0.75, 2.0))
_QUIET_THEN_BUSY = ((0.0, 11.5, 1.0), (11.5, 11.5, 20.0))
_BUSY_THEN_QUIET = ((0.0, 11.5, 20.0), (11.5, 11.5, 1.0))
_FLAT = ((0.0, 23.0, 1.0),)

#: regime name → (trades per day, rate profile, P[buy], sign persistence, Pareto size tail).
_REGIMES: dict[str, tuple[int, tuple[tuple[float, float, float], ...], float, float, float]] = {
    "quiet balanced": (4_000, _FLAT, 0.5, 0.0, 0.0),
    "busy balanced": (200_000, _FLAT, 0.5, 0.0, 0.0),
    "busy one-sided": (200_000, _FLAT, 0.75, 0.0, 0.0),
    "ES intraday profile": (200_000, _ES_PROFILE, 0.5, 0.0, 0.0),
    "ES profile, buyers ahead": (200_000, _ES_PROFILE, 0.6, 0.0, 0.0),
    "quiet then busy": (100_000, _QUIET_THEN_BUSY, 0.5, 0.0, 0.0),
    "busy then quiet": (100_000, _BUSY_THEN_QUIET, 0.5, 0.0, 0.0),
    "sweeps (persistent signs)": (100_000, _FLAT, 0.5, 0.95, 0.0),
    "heavy-tailed sizes": (100_000, _FLAT, 0.5, 0.0, 1.5),
}


def _random_trades(rng: np.random.Generator, regime: str) -> Records:
    """One day of trades of `regime`, with timestamps drawn from its rate profile."""
    n, profile, p_buy, persistence, tail = _REGIMES[regime]
    weights = np.array([hours * rate for _, hours, rate in profile])
    segment = rng.choice(len(profile), size=n, p=weights / weights.sum())
    begin = np.array([b for b, _, _ in profile])[segment]
    length = np.array([h for _, h, _ in profile])[segment]
    ts = np.sort(((begin + rng.random(n) * length) * _HOUR).astype(np.int64))
    renew = rng.random(n) >= persistence  # a new sign, else the previous trade's
    renew[0] = True
    fresh = np.where(rng.random(int(renew.sum())) < p_buy, 1, -1).astype(np.int8)
    sign = fresh[np.cumsum(renew) - 1]
    size = (rng.pareto(tail, n) + 1 if tail else rng.geometric(0.3, n)).astype(np.int64)
    price = 5000.0 + 0.25 * np.cumsum(rng.integers(-1, 2, n)).astype(np.float64)
    return trade_records(ts, sign, np.minimum(size, 10_000), price)


@pytest.mark.parametrize("regime", list(_REGIMES))
@pytest.mark.parametrize("bar_type", ["tick_imbalance", "volume_imbalance", "dollar_imbalance"])
def test_imbalance_bars_per_day_stay_in_band_across_regimes(regime: str, bar_type: str) -> None:
    config = BarConfig(bar_type, multiplier=50.0)  # type: ignore[arg-type]  # defaults: 100 bars/day, band 3
    rng = np.random.default_rng(zlib.crc32(f"{regime}/{bar_type}".encode()))
    low, high = config.target_bars_per_day / config.band, config.target_bars_per_day * config.band

    bars_per_day = []
    for _ in range(4):
        found = find_bar_ranges(
            _random_trades(rng, regime), config, session_open_ns=OPEN, session_close_ns=CLOSE
        )

        n_bars = found.start.shape[0]
        lengths = found.end - found.start + 1  # trades, since every record is a trade
        assert low <= n_bars <= high, f"{regime}: {n_bars} bars"
        assert (lengths[:-1] >= 2).all(), f"{regime}: a 1-trade bar"
        assert lengths.max() < lengths.sum() / 3, f"{regime}: one bar holds a third of the day"
        bars_per_day.append(n_bars)
    # the band is a backstop: the threshold itself keeps a typical day within a factor ~2
    median = float(np.median(bars_per_day))
    assert 0.4 * config.target_bars_per_day <= median <= 2 * config.target_bars_per_day


# --- BarConfig ------------------------------------------------------------------------------

_VALID_CONFIGS = [
    (BarConfig(multiplier=50.0), "dib-b100-"),
    (BarConfig("tick_imbalance", target_bars_per_day=50, band=2, multiplier=50.0), "tib-b50-"),
    (
        BarConfig("volume_imbalance", ewma_span_bars=5, ewma_span_trades=1000, multiplier=50.0),
        "vib-b100-",
    ),
    (BarConfig("tick", threshold=5000, multiplier=50.0), "tick-t5000-"),
    (BarConfig("volume", threshold=1000.0, multiplier=50.0), "volume-v1000-"),
    (BarConfig("dollar", threshold=2.5e7, multiplier=5), "dollar-d25000000-"),
    (BarConfig("time", threshold=60, multiplier=50.0), "time-s60-"),
    (BarConfig("time", threshold=0.5, multiplier=50.0), "time-s0.5-"),
    (BarConfig("dollar_imbalance", target_bars_per_day=12.5, multiplier=50.0), "dib-b12.5-"),
]


@pytest.mark.parametrize(("config", "prefix"), _VALID_CONFIGS, ids=lambda v: str(v))
def test_bar_config_valid_key_names_type_and_size(config: BarConfig, prefix: str) -> None:
    assert config.key.startswith(prefix)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", config.key)
    assert re.fullmatch(r"[0-9a-f]{8}", config.key.removeprefix(prefix))


def test_bar_config_key_is_stable_across_versions() -> None:
    # store paths depend on it: change this value only together with a store migration
    assert BarConfig(multiplier=50.0).key == "dib-b100-946dfb62"
    assert BarConfig("tick", threshold=5000, multiplier=50.0).key == "tick-t5000-4e77773d"
    assert BarConfig().key == "dib-b100-a4cd8250"  # each contract's multiplier, from the master


def test_bar_config_key_differs_for_every_parameter() -> None:
    configs = [
        BarConfig(),
        BarConfig(multiplier=50.0),
        BarConfig(target_bars_per_day=101, multiplier=50.0),
        BarConfig(band=2.5, multiplier=50.0),
        BarConfig(ewma_span_bars=21, multiplier=50.0),
        BarConfig(ewma_span_trades=50_001, multiplier=50.0),
        BarConfig(multiplier=5),
        BarConfig("volume_imbalance", multiplier=50.0),
        BarConfig("tick", threshold=100, multiplier=50.0),
        BarConfig("tick", threshold=100, multiplier=5),  # changes dollar_volume
        BarConfig("volume", threshold=100, multiplier=50.0),
        BarConfig("time", threshold=100, multiplier=50.0),
    ]

    assert len({config.key for config in configs}) == len(configs)


def test_bar_config_key_ignores_int_versus_float_spelling() -> None:
    assert (
        BarConfig("tick", threshold=5000, multiplier=50.0).key
        == BarConfig("tick", threshold=5000.0, multiplier=50.0).key
    )


_INVALID_CONFIGS = [
    (
        {"bar_type": "range"},
        "`bar_type` must be one of 'tick_imbalance', 'volume_imbalance', 'dollar_imbalance', "
        "'tick', 'volume', 'dollar', 'time', was 'range'.",
    ),
    ({"bar_type": "tick", "threshold": -5}, "`threshold` must be > 0, was -5."),
    ({"bar_type": "time", "threshold": 0}, "`threshold` must be > 0, was 0."),
    ({"bar_type": "tick"}, "`threshold` is required for 'tick' bars."),
    (
        {"threshold": 100},
        "`threshold` applies to plain bars only, was 100 for 'dollar_imbalance': "
        "imbalance bars are sized by `target_bars_per_day`.",
    ),
    (
        {"bar_type": "tick", "threshold": 2.5},
        "`threshold` must be a whole number of trades, was 2.5.",
    ),
    (
        {"bar_type": "time", "threshold": 1e-10},
        "`threshold` must be at least 1 ns for time bars, was 1e-10.",
    ),
    (
        {"bar_type": "dollar", "threshold": math.inf},
        "`threshold` must be a finite number, was inf.",
    ),
    ({"target_bars_per_day": 0}, "`target_bars_per_day` must be > 0, was 0."),
    ({"band": 1.0}, "`band` must be > 1, was 1.0."),
    ({"ewma_span_bars": 2.5}, "`ewma_span_bars` must be a whole number, was 2.5."),
    ({"ewma_span_trades": 0}, "`ewma_span_trades` must be > 0, was 0."),
    ({"ewma_span_trades": True}, "`ewma_span_trades` must be a finite number, was True."),
    ({"multiplier": math.nan}, "`multiplier` must be a finite number, was nan."),
    ({"multiplier": "50"}, "`multiplier` must be a finite number, was '50'."),
]


@pytest.mark.parametrize(("kwargs", "message"), _INVALID_CONFIGS, ids=lambda v: str(v))
def test_bar_config_invalid_raises_one_line_message(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        BarConfig(**kwargs)  # type: ignore[arg-type]

    assert str(caught.value) == message


# --- close_reason and the trade limits: every boundary can be re-derived from the table ------


def test_close_reason_of_hand_computed_imbalance_day() -> None:
    """The day of test_imbalance_bars_warm_up_threshold_and_max_trades_close_as_computed."""
    s = SECOND
    signs = [1] * 11 + [1] * 11 + [-1, 1] * 16 + [1, 1]
    events = [trade(10 * s * j, "B" if b > 0 else "A", 5000.0) for j, b in enumerate(signs)]
    records = make_records(events)

    table = _build(records, _imbalance_config("tick_imbalance"), close_ns=_SESSION_1000S)

    assert _column(table, "close_reason") == ["warmup", "threshold", "max_trades", "partial"]
    assert _column(table, "min_trades")[:3] == [None, 4, 4]
    assert _column(table, "max_trades")[:3] == [None, 33, 32]


def test_close_reason_big_trade_waiting_for_min_trades_says_so() -> None:
    s = SECOND
    events = [trade(10 * s * j, "B", 5000.0) for j in range(11)]
    events += [trade(110 * s, "B", 5000.0, 100)]  # |θ| = 100 >= 11 at the bar's 1st trade
    events += [trade((120 + 10 * j) * s, "A", 5000.0) for j in range(3)]  # 4th trade closes
    events += [trade(150 * s, "B", 5000.0)]

    table = _build(
        make_records(events), _imbalance_config("volume_imbalance"), close_ns=_SESSION_1000S
    )

    assert _column(table, "close_reason") == ["warmup", "min_trades", "partial"]
    assert _column(table, "n_trades")[1] == _column(table, "min_trades")[1] == 4


@pytest.mark.parametrize(
    ("config", "reasons"),
    [
        (BarConfig("tick", threshold=3, multiplier=50.0), ["threshold", "threshold", "partial"]),
        (BarConfig("time", threshold=60, multiplier=50.0), ["interval", "interval", "interval"]),
    ],
)
def test_close_reason_of_plain_and_time_bars(config: BarConfig, reasons: list[str]) -> None:
    records = make_records([trade(25 * SECOND * j, "B", 5000.0) for j in range(7)])

    table = _build(records, config)

    assert _column(table, "close_reason") == reasons
    assert _column(table, "min_trades") == _column(table, "max_trades") == [None] * 3


def _first_arming(path: list[float], threshold: float, lo: int, hi: int) -> tuple[int, bool]:
    """(trade index at which a bar with trade limits [lo, hi] arms, whether |θ| had reached
    the threshold before the bar had `lo` trades); -1 if it never arms."""
    hit_early = False
    for k, theta in enumerate(path):
        hit, enough = abs(theta) >= threshold, k + 1 >= lo
        if hit and enough:
            return k, hit_early
        if k + 1 >= hi:
            return k, False
        hit_early |= hit
    return -1, False


@given(
    seed=st.integers(0, 2**31 - 1),
    bar_type=st.sampled_from(["tick_imbalance", "volume_imbalance"]),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_close_reason_is_re_derived_from_the_table_and_the_raw_trades(
    seed: int, bar_type: str
) -> None:
    """θ over each bar's trades, recomputed from the records, arms the bar exactly as its
    close_reason, threshold and trade limits say (integer flows: no rounding)."""
    records = random_day(np.random.default_rng(seed), 3000, gap_ns=20 * SECOND)
    config = BarConfig(bar_type, target_bars_per_day=60, multiplier=50.0)  # type: ignore[arg-type]
    signed = np.array(_ref_signs(records)) * np.array(_ref_weights(records, config))
    is_trade = records["action"] == b"T"

    bars = _build(records, config).to_pylist()
    found = find_bar_ranges(records, config, session_open_ns=OPEN, session_close_ns=CLOSE)

    for i, (bar, lo, hi) in enumerate(zip(bars, found.start, found.end, strict=True)):
        path = np.cumsum(signed[lo : hi + 1][is_trade[lo : hi + 1]]).tolist()
        reason = bar["close_reason"]
        if reason == "warmup":
            assert i == 0 and bar["threshold"] is None and bar["min_trades"] is None
            continue
        if reason == "partial":
            assert i == len(bars) - 1 and bar["is_partial"]
            continue
        at, hit_early = _first_arming(path, bar["threshold"], bar["min_trades"], bar["max_trades"])
        assert at >= 0, (i, reason)
        armed_by_theta = abs(path[at]) >= bar["threshold"] and at + 1 >= bar["min_trades"]
        expected = ("min_trades" if hit_early else "threshold") if armed_by_theta else "max_trades"
        assert reason == expected, (i, reason, expected)


def test_build_bars_without_a_multiplier_raises_naming_the_master() -> None:
    records = make_records([trade(0, "B", 5000.0)])

    with pytest.raises(InvalidInputError, match=r"`multiplier` is unset.*InstrumentMaster"):
        _build(records, BarConfig())


# --- sessions: records outside [open, close) are in no bar -------------------------------------


def _shifted(records: Records, ns: int) -> Records:
    out = records.copy()
    out["ts_recv"] = out["ts_recv"].astype(np.int64) + ns
    out["ts_event"] = out["ts_recv"]
    return out


@pytest.mark.parametrize(
    "config",
    [BarConfig("tick", threshold=40, multiplier=50.0), _imbalance_config("tick_imbalance")],
)
def test_build_bars_pre_open_records_are_in_no_bar_but_set_the_first_ofi(
    config: BarConfig,
) -> None:
    session = _shifted(random_day(np.random.default_rng(3), 2000, p_flag=0.0), 0)
    pre_open = random_day(np.random.default_rng(4), 200, p_flag=0.0)
    # the maintenance window: an hour before the open, a book of another price, a stray print
    pre_open = _shifted(pre_open[:50], -3600 * SECOND)
    pre_open["bid_px_00"] -= to_fixed(11.0)
    pre_open["ask_px_00"] -= to_fixed(11.0)
    both = np.concatenate([pre_open, session])

    with_pre = _build(both, config)
    alone = _build(session, config)

    assert min(_column(with_pre, "ts_open")) >= OPEN
    assert _column(with_pre, "volume") == _column(alone, "volume")
    assert _column(with_pre, "n_events") == _column(alone, "n_events")
    # the first OFI is measured against the pre-open book, not against nothing
    assert _column(with_pre, "ofi_00")[1:] == _column(alone, "ofi_00")[1:]
    assert _column(with_pre, "ofi_00")[0] != _column(alone, "ofi_00")[0]
    unchanged = [c for c in BAR_SCHEMA.names if not c.startswith("ofi_")]
    assert with_pre.select(unchanged).equals(alone.select(unchanged))


def test_build_bars_records_after_the_close_change_no_bar() -> None:
    config = BarConfig("tick", threshold=40, multiplier=50.0)
    session = random_day(np.random.default_rng(5), 2000, p_flag=0.0)
    close_ns = int(session["ts_recv"][-1]) + 1
    after = _shifted(random_day(np.random.default_rng(6), 300, p_flag=0.0), 0)
    after["ts_recv"] = close_ns + np.arange(len(after), dtype=np.int64) * SECOND
    after["bid_px_00"] -= to_fixed(11.0)  # the next session's pre-open book

    with_after = _build(np.concatenate([session, after]), config, close_ns=close_ns)
    alone = _build(session, config, close_ns=close_ns)

    assert with_after.equals(alone)
    assert max(_column(with_after, "ts_close")) < close_ns


def test_build_bars_counts_book_states_and_trades_outside_the_plausible_range() -> None:
    config = BarConfig("tick", threshold=3, multiplier=50.0)
    first = [quote(0), trade(1, "B", 5000.0), trade(2, "A", 4999.75), trade(3, "B", 5000.0)]
    second = [quote(4), trade(5, "B", 5.58e9), trade(6, "A", 4999.75), trade(7, "B", 5000.0)]
    records = make_records([*first, *second])
    records["ask_px_00"][4] = to_fixed(-8.57e9)  # an absurd book, as seen on real data

    plain = _build(records, config)
    flagged = build_bars(
        records,
        config,
        trading_day=DAY,
        contract="ESH4",
        session_open_ns=OPEN,
        session_close_ns=CLOSE,
        price_range=(100.0, 100_000.0),
    )

    assert _column(plain, "n_implausible_px") == [0, 0]
    # bar 1: the book at record 4 and the trade at 5.58e9
    assert _column(flagged, "n_implausible_px") == [0, 2]
    assert flagged.drop(["n_implausible_px"]).equals(plain.drop(["n_implausible_px"]))


def test_build_bars_counts_trades_off_the_tick_grid() -> None:
    config = BarConfig("tick", threshold=3, multiplier=50.0)
    first = [quote(0), trade(1, "B", 5000.0), trade(2, "A", 4999.75), trade(3, "B", 5000.0)]
    second = [quote(4), trade(5, "B", 5000.1), trade(6, "A", 4999.75), trade(7, "B", 5000.0)]
    records = make_records([*first, *second])
    kwargs = {"trading_day": DAY, "contract": "ESH4", "session_open_ns": OPEN}

    on_grid = build_bars(
        records, config, **kwargs, session_close_ns=CLOSE, price_range=(100.0, 100_000.0)
    )
    checked = build_bars(
        records,
        config,
        **kwargs,
        session_close_ns=CLOSE,
        price_range=(100.0, 100_000.0),
        tick_size=0.25,
    )

    assert _column(on_grid, "n_implausible_px") == [0, 0]  # no tick: no grid
    assert _column(checked, "n_implausible_px") == [0, 1]


def test_build_bars_counts_trades_far_from_the_book_or_of_an_absurd_size() -> None:
    config = BarConfig("tick", threshold=3, multiplier=50.0)
    first = [quote(0), trade(1, "B", 5000.0), trade(2, "A", 4999.75), trade(3, "B", 5000.0)]
    second = [
        quote(4),
        trade(5, "B", 48_100.0),  # ten times ES, inside the root's wide plausible range
        trade(6, "A", 4999.75, size=4_000_000_000),
        trade(7, "B", 5000.25),  # at the book: a trade
    ]
    records = make_records([*first, *second])

    flagged = build_bars(
        records,
        config,
        trading_day=DAY,
        contract="ESH4",
        session_open_ns=OPEN,
        session_close_ns=CLOSE,
        price_range=(100.0, 100_000.0),
    )

    assert _column(flagged, "n_implausible_px") == [0, 2]
