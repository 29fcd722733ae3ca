"""Contracts live on a day: symbols, ids, shares around rolls, expiry-day stops, carry."""

from __future__ import annotations

import datetime as dt

import pytest

from fxstore.synth.contracts import (
    instruments_on,
    next_share,
    outright_id,
    outright_symbol,
    spread_id,
    trading_days_from,
)

pytestmark = pytest.mark.quick


@pytest.mark.parametrize(
    ("root", "year", "month", "symbol"),
    [("ES", 2024, 3, "ESH4"), ("ES", 2029, 12, "ESZ9"), ("NQ", 2030, 6, "NQM0")],
)
def test_outright_symbol_uses_month_code_and_last_year_digit(
    root: str, year: int, month: int, symbol: str
) -> None:
    assert outright_symbol(root, year, month) == symbol


def test_outright_id_formula_readable_and_distinct() -> None:
    assert outright_id("ES", 2024, 3) == 432403
    assert spread_id("ES", 2024, 3) == 1_432_403
    ids = {outright_id("ES", y, m) for y in range(2000, 2100) for m in (3, 6, 9, 12)}
    assert len(ids) == 400 and all(100_000 <= i < 1_000_000 for i in ids)
    assert outright_id("NQ", 2024, 3) != outright_id("ES", 2024, 3)


def test_trading_days_from_counts_sessions_signed() -> None:
    monday = dt.date(2024, 3, 11)
    assert trading_days_from(monday, monday) == 0
    assert trading_days_from(monday, dt.date(2024, 3, 8)) == -1  # the Friday before
    assert trading_days_from(monday, dt.date(2024, 3, 15)) == 4


def test_next_share_crosses_half_on_roll_date() -> None:
    expiry = dt.date(2024, 3, 15)
    assert next_share(dt.date(2024, 3, 8), expiry) < 0.5 < next_share(dt.date(2024, 3, 11), expiry)
    assert next_share(dt.date(2024, 2, 1), expiry) < 0.02
    assert next_share(expiry, expiry) > 0.9


def test_instruments_on_normal_day_front_next_deferred_spread() -> None:
    insts = instruments_on("ES", dt.date(2024, 3, 1), 20.0, 1.0)
    assert [i.raw_symbol for i in insts] == ["ESH4", "ESM4", "ESU4", "ESH4-ESM4"]
    assert [i.role for i in insts] == ["front", "next", "deferred", "spread"]
    assert sum(i.share for i in insts) == pytest.approx(1.0)
    assert insts[2].share == pytest.approx(0.01)
    assert insts[0].carry < insts[1].carry < insts[2].carry
    assert insts[3].carry == pytest.approx(insts[0].carry - insts[1].carry)
    assert not any(i.stops_at_open for i in insts)


def test_instruments_on_expiry_day_front_and_spread_stop_at_open() -> None:
    insts = instruments_on("ES", dt.date(2024, 3, 15), 20.0, 1.0)
    assert [(i.raw_symbol, i.stops_at_open) for i in insts] == [
        ("ESH4", True),
        ("ESM4", False),
        ("ESU4", False),
        ("ESH4-ESM4", True),
    ]
    assert insts[0].carry == 0.0  # the expiring contract converges to the index


def test_instruments_on_day_after_expiry_rolls_curve() -> None:
    insts = instruments_on("ES", dt.date(2024, 3, 18), 20.0, 1.0)
    assert [i.raw_symbol for i in insts] == ["ESM4", "ESU4", "ESZ4", "ESM4-ESU4"]


def test_instruments_on_december_expiry_wraps_year() -> None:
    insts = instruments_on("ES", dt.date(2024, 12, 23), 20.0, 1.0)
    assert [i.raw_symbol for i in insts] == ["ESH5", "ESM5", "ESU5", "ESH5-ESM5"]


def test_instruments_on_weekend_raises() -> None:
    with pytest.raises(ValueError, match="not a CME trading day"):
        instruments_on("ES", dt.date(2024, 3, 16), 20.0, 1.0)
