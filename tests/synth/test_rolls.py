"""The March 2024 roll of the synthetic ES market, from the records themselves."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from fxstore.market.calendar import CHICAGO, roll_date
from fxstore.synth import outright_id, spread_id
from tests.synth.conftest import Market
from tests.synth.dbn_io import file_day

pytestmark = pytest.mark.quick

ESH4, ESM4, ESU4 = (
    outright_id("ES", 2024, 3),
    outright_id("ES", 2024, 6),
    outright_id("ES", 2024, 9),
)
ESZ4 = outright_id("ES", 2024, 12)
SPREAD_H4M4, SPREAD_M4U4 = spread_id("ES", 2024, 3), spread_id("ES", 2024, 6)
EXPIRY = dt.date(2024, 3, 15)


def _daily_volume(market: Market) -> dict[dt.date, dict[int, int]]:
    out: dict[dt.date, dict[int, int]] = {}
    for path, _, recs in market.files:
        trades = recs[recs["action"] == b"T"]
        ids = trades["instrument_id"]
        out[file_day(path)] = {int(i): int(trades["size"][ids == i].sum()) for i in np.unique(ids)}
    return out


def test_roll_volume_crossover_on_roll_date(roll_market: Market) -> None:
    volume = _daily_volume(roll_market)
    days = sorted(volume)
    first_next = next(d for d in days if volume[d].get(ESM4, 0) > volume[d].get(ESH4, 0))
    roll = roll_date(EXPIRY)
    assert roll == dt.date(2024, 3, 11)
    assert abs(days.index(first_next) - days.index(roll)) <= 1
    assert all(volume[d].get(ESM4, 0) > volume[d].get(ESH4, 0) for d in days if d > roll)
    assert all(
        volume[d][ESH4] > 5 * volume[d].get(ESM4, 0) for d in days if d <= dt.date(2024, 3, 4)
    )


def test_roll_summary_volumes_match_records(roll_market: Market) -> None:
    volume = _daily_volume(roll_market)
    for row in roll_market.summary.day_volumes:
        assert volume[row.trading_day].get(row.instrument_id, 0) == row.volume, row


def test_roll_expired_contract_stops_at_expiry_open(roll_market: Market) -> None:
    cutoff = int(dt.datetime(2024, 3, 15, 8, 30, tzinfo=CHICAGO).timestamp()) * 10**9
    for path, meta, recs in roll_market.files:
        mine = recs["ts_recv"][np.isin(recs["instrument_id"], [ESH4, SPREAD_H4M4])]
        day = file_day(path)
        if day < EXPIRY:
            assert len(mine) > 0
        elif day == EXPIRY:
            assert len(mine) > 0 and mine.astype(np.int64).max() < cutoff
        else:
            assert len(mine) == 0, path.name
            assert "ESH4" not in {m.raw_symbol for m in meta.mappings}


def test_roll_after_expiry_curve_moves_out(roll_market: Market) -> None:
    for path, meta, recs in roll_market.files:
        if file_day(path) > EXPIRY:
            ids = set(np.unique(recs["instrument_id"]).tolist())
            assert ids == {ESM4, ESU4, ESZ4, SPREAD_M4U4}
            assert {m.raw_symbol for m in meta.mappings} == {"ESM4", "ESU4", "ESZ4", "ESM4-ESU4"}


def test_roll_spread_trades_negative_on_grid(roll_market: Market) -> None:
    recs = roll_market.records
    spread = recs[recs["instrument_id"] == SPREAD_H4M4]
    assert 0.005 < len(spread) / len(recs) < 0.1
    assert np.count_nonzero(spread["action"] == b"T") > 0
    assert np.all(spread["price"] < 0) and np.all(spread["price"] % 50_000_000 == 0)


def test_roll_deferred_gets_about_one_percent(roll_market: Market) -> None:
    recs = roll_market.records
    march = recs[recs["ts_recv"].astype(np.int64) < int(dt.datetime(2024, 3, 15).timestamp() * 1e9)]
    share = np.count_nonzero(march["instrument_id"] == ESU4) / len(march)
    assert 0.004 < share < 0.025


def test_roll_next_trades_at_carry_premium_matching_spread(roll_market: Market) -> None:
    _, _, recs = next(f for f in roll_market.files if file_day(f[0]) == dt.date(2024, 3, 11))
    last = recs[(recs["flags"] & 0x80) != 0]

    def mid(iid: int) -> float:
        r = last[last["instrument_id"] == iid][-1]
        return (float(r["bid_px_00"]) + float(r["ask_px_00"])) / 2e9

    premium = mid(ESM4) - mid(ESH4)
    assert 5.0 < premium < 40.0  # about a quarter's carry (20 points by default)
    assert abs(mid(SPREAD_H4M4) + premium) < 1.5  # spread = front - next
    assert mid(ESU4) - mid(ESM4) > 5.0


def test_roll_instrument_ids_stable_across_files(roll_market: Market) -> None:
    seen: dict[str, set[str]] = {}
    for _, meta, _ in roll_market.files:
        for m in meta.mappings:
            seen.setdefault(m.raw_symbol, set()).add(m.symbol)
    assert all(len(ids) == 1 for ids in seen.values())
    assert seen["ESH4"] == {str(ESH4)} and seen["ESH4-ESM4"] == {str(SPREAD_H4M4)}


def test_roll_deferred_volume_about_one_percent(roll_market: Market) -> None:
    totals = roll_market.summary.volume_by_symbol()
    outrights = sum(v for k, v in totals.items() if "-" not in k)
    deferred = sum(
        row.volume
        for row in roll_market.summary.day_volumes
        if row.raw_symbol == ("ESU4" if row.trading_day <= EXPIRY else "ESZ4")
    )
    assert 0.003 < deferred / outrights < 0.03
    assert roll_market.summary.volumes_on(dt.date(2024, 3, 18)).keys() == {
        "ESM4",
        "ESU4",
        "ESZ4",
        "ESM4-ESU4",
    }
