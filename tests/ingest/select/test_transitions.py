from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pyarrow as pa
import pytest

from fxstore.config import RollConfig
from fxstore.errors import FxStoreWarning, InvalidInputError
from fxstore.ingest.select.front_month import RollEntry
from fxstore.ingest.select.transitions import (
    Transition,
    adjust_prices,
    build_transitions,
    transitions_from_manifest,
    with_adjusted_prices,
)
from fxstore.market.calendar import sessions

pytestmark = pytest.mark.quick

D1, D2, D3, D4 = (dt.date(2024, 3, d) for d in (11, 12, 13, 14))
TABLE = sessions()


def _entry(day: dt.date, contract: str, instrument_id: int, reason: str) -> RollEntry:
    return RollEntry(day, contract, instrument_id, None, 1.0, reason)


SCHEDULE = [
    _entry(D1, "ESH4", 1, "first-day"),
    _entry(D2, "ESM4", 2, "calendar"),
    _entry(D3, "ESM4", 2, "held"),
    _entry(D4, "ESU4", 3, "calendar"),
]


def _transition(day: dt.date, from_px: float, to_px: float) -> Transition:
    return Transition(day, 0, "A", 1, "B", 2, "volume", "volume", day, from_px, to_px)


def test_build_transitions_prices_each_roll_from_the_day_before() -> None:
    last = {D1: {1: 100.0, 2: 104.0}, D2: {2: 105.0, 3: 110.0}, D3: {2: 106.0, 3: 111.5}}

    found = build_transitions(SCHEDULE, RollConfig(rule="calendar", offset=1), TABLE, last)

    assert [(t.trading_day, t.from_contract, t.to_contract) for t in found] == [
        (D2, "ESH4", "ESM4"),
        (D4, "ESM4", "ESU4"),
    ]
    assert (found[0].from_px, found[0].to_px, found[0].price_day) == (100.0, 104.0, D1)
    # Tuesday 03-12's session opened at 17:00 CDT on Monday 03-11: 22:00 UTC.
    assert found[0].switch_ns == int(np.datetime64("2024-03-11T22:00", "ns").astype(np.int64))
    assert found[1].gap_add == pytest.approx(5.5)
    assert found[1].gap_mul == pytest.approx(111.5 / 106.0)
    assert found[1].rule == "calendar" and found[1].reason == "calendar"


def test_build_transitions_takes_an_earlier_day_when_a_contract_did_not_trade() -> None:
    last = {D1: {1: 100.0, 2: 104.0}, D2: {2: 105.0, 3: 110.0}, D3: {2: 106.0}}

    found = build_transitions(SCHEDULE, RollConfig(), TABLE, last)

    assert (found[1].from_px, found[1].to_px, found[1].price_day) == (106.0, 110.0, D2)


def test_build_transitions_warns_when_a_roll_cannot_be_priced() -> None:
    with pytest.warns(FxStoreWarning, match="ESM4 has no trade before the switch"):
        found = build_transitions(SCHEDULE[:2], RollConfig(), TABLE, {D1: {1: 100.0}})

    assert found[0].gap_add is None and found[0].price_day is None


@pytest.mark.parametrize("prices", [(-37.63, 10.01), (0.0, 10.01), (10.01, -1.0)])
def test_build_transitions_ratio_adjustment_of_a_non_positive_price_is_one_error(
    prices: tuple[float, float],
) -> None:
    last = {D1: {1: prices[0], 2: prices[1]}}
    message = (
        f"`--adjust ratio` needs positive prices at each roll: the roll on {D2} (ESH4 -> ESM4) "
        f"is priced {prices[0]} -> {prices[1]}, and a ratio there would flip or break the "
        "adjusted series; ingest with `--adjust difference` (or `--adjust none`) instead."
    )
    with pytest.raises(InvalidInputError, match=f"^{re.escape(message)}$"):
        build_transitions(SCHEDULE[:2], RollConfig(adjust="ratio"), TABLE, last)
    found = build_transitions(SCHEDULE[:2], RollConfig(adjust="difference"), TABLE, last)
    assert found[0].gap_add == pytest.approx(prices[1] - prices[0])


def test_with_adjusted_prices_ratio_of_a_negative_roll_price_is_refused() -> None:
    bars = pa.table({"trading_day": pa.array([D1, D2], pa.date32()), "close": [-37.0, 10.0]})
    with pytest.raises(InvalidInputError, match="needs positive prices at each roll"):
        with_adjusted_prices(bars, [_transition(D2, -37.0, 10.0)], "ratio", "backward")
    out = with_adjusted_prices(bars, [_transition(D2, -37.0, 10.0)], "difference", "backward")
    assert out["adj_close"].to_pylist() == pytest.approx([10.0, 10.0])


# Bars: contract A on segment 0, B on 1, C on 2; gaps +10 (A 100 -> B 110) and -20 (B 200 ->
# C 180).
PX = np.array([95.0, 100.0, 190.0, 200.0, 185.0, 180.0])
SEGMENT = np.array([0, 0, 1, 1, 2, 2])
ADD = np.array([10.0, -20.0])
MUL = np.array([1.1, 0.9])


@pytest.mark.parametrize(
    ("method", "direction", "expected"),
    [
        ("difference", "backward", [85.0, 90.0, 170.0, 180.0, 185.0, 180.0]),
        ("difference", "forward", [95.0, 100.0, 180.0, 190.0, 195.0, 190.0]),
        ("ratio", "backward", [95 * 0.99, 100 * 0.99, 190 * 0.9, 180.0, 185.0, 180.0]),
        ("ratio", "forward", [95.0, 100.0, 190 / 1.1, 200 / 1.1, 185 / 0.99, 180 / 0.99]),
    ],
)
def test_adjust_prices_hand_computed(method: str, direction: str, expected: list[float]) -> None:
    out = adjust_prices(PX, SEGMENT, ADD, MUL, method, direction)

    np.testing.assert_allclose(out, expected)


@pytest.mark.parametrize("direction", ["backward", "forward"])
def test_difference_adjusted_prices_have_no_gap_at_the_switch(direction: str) -> None:
    transitions = [_transition(D2, 100.0, 110.0), _transition(D4, 200.0, 180.0)]
    bars = pa.table(
        {
            "trading_day": pa.array([D1, D2, D3, D4], pa.date32()),
            "close": [100.0, 110.0, 200.0, 180.0],  # each roll's two prices
        }
    )

    adj = with_adjusted_prices(bars, transitions, "difference", direction)["adj_close"]

    assert adj[0].as_py() == pytest.approx(adj[1].as_py())
    assert adj[2].as_py() == pytest.approx(adj[3].as_py())


@pytest.mark.parametrize("direction", ["backward", "forward"])
def test_ratio_adjusted_returns_equal_raw_returns_within_a_contract(direction: str) -> None:
    out = adjust_prices(PX, SEGMENT, ADD, MUL, "ratio", direction)
    same = SEGMENT[1:] == SEGMENT[:-1]

    np.testing.assert_allclose((out[1:] / out[:-1])[same], (PX[1:] / PX[:-1])[same])


def test_a_new_roll_re_adjusts_backward_history_by_its_gap_only() -> None:
    one = adjust_prices(PX[:4], SEGMENT[:4], ADD[:1], MUL[:1], "difference", "backward")
    two = adjust_prices(PX, SEGMENT, ADD, MUL, "difference", "backward")

    np.testing.assert_allclose(two[:4], one + ADD[1])


def test_forward_adjusted_history_does_not_change_with_a_new_roll() -> None:
    one = adjust_prices(PX[:4], SEGMENT[:4], ADD[:1], MUL[:1], "ratio", "forward")
    two = adjust_prices(PX, SEGMENT, ADD, MUL, "ratio", "forward")

    np.testing.assert_array_equal(two[:4], one)


def test_with_adjusted_prices_adds_every_adjusted_column_and_keeps_raw() -> None:
    bars = pa.table(
        {
            "trading_day": pa.array([D1, D2], pa.date32()),
            **{c: [100.0, 110.0] for c in ("open", "high", "low", "close", "vwap")},
        }
    )

    out = with_adjusted_prices(bars, [_transition(D2, 100.0, 110.0)], "ratio", "backward")

    assert out.column_names[6:] == ["adj_open", "adj_high", "adj_low", "adj_close", "adj_vwap"]
    assert out["close"].to_pylist() == [100.0, 110.0]
    assert out["adj_close"].to_pylist() == pytest.approx([110.0, 110.0])


def test_transitions_from_manifest_round_trips_and_falls_back_to_the_schedule() -> None:
    last = {D1: {1: 1.0, 2: 2.0}, D3: {2: 3.0, 3: 4.0}}
    found = build_transitions(SCHEDULE, RollConfig(), TABLE, last)
    manifest = {"transitions": [t.to_json() for t in found]}

    assert transitions_from_manifest(manifest) == found
    unpriced = transitions_from_manifest(
        {"roll_schedule": [e.to_json() for e in SCHEDULE], "config": {}}
    )
    assert [t.to_contract for t in unpriced] == ["ESM4", "ESU4"]
    assert all(t.from_px is None for t in unpriced)
