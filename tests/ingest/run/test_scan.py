from __future__ import annotations

import datetime as dt
from pathlib import Path

from fxstore.config import InstrumentSelection
from fxstore.ingest.dbn.reader import open_dbn
from fxstore.ingest.run.scan import ScanReport, scan_dbn
from fxstore.ingest.select.front_month import (
    FrontMonthSelector,
    iter_selected,
    symbols_listed,
)
from fxstore.market.contracts import Contract, parse_outright
from fxstore.market.master import contract_expiry
from tests.conftest import SynthMarket


def _crossover_days(market: SynthMarket) -> list[dt.date]:
    """Days on which an outright first out-trades the one before it (the generator's truth)."""
    days = sorted({v.trading_day for v in market.summary.day_volumes})
    crossovers = []
    front: Contract | None = None
    for day in days:
        volumes = {
            contract: v.volume
            for v in market.summary.day_volumes
            if v.trading_day == day
            and (contract := parse_outright(v.raw_symbol, "ES", day)) is not None
        }
        leader = max(volumes, key=lambda c: volumes[c])
        front = front or min(volumes)  # the nearest contract starts
        if leader > front:
            crossovers.append(day)
            front = leader
    return crossovers


def _rolls(report: ScanReport) -> list[tuple[dt.date, str]]:
    return [(e.trading_day, e.contract) for e in report.schedule if e.is_roll]


def test_scan_two_rolls_roll_on_day_after_volume_crossover(two_roll_market: SynthMarket) -> None:
    report = scan_dbn([two_roll_market.folder], symbol="ES.FUT")

    rolls = _rolls(report)
    days = list(report.trading_days)
    expected = [days[days.index(c) + 1] for c in _crossover_days(two_roll_market)]
    assert [c for _, c in rolls] == ["ESM4", "ESU4"]
    assert [d for d, _ in rolls] == expected


def test_scan_two_rolls_never_picks_spread_or_expired_contract(
    two_roll_market: SynthMarket,
) -> None:
    report = scan_dbn([two_roll_market.folder], symbol="ES.FUT")

    assert len(report.schedule) == len(report.trading_days)
    for entry in report.schedule:
        contract = parse_outright(entry.contract, "ES", entry.trading_day)
        assert contract is not None, entry
        assert contract_expiry("ES", contract) >= entry.trading_day


def test_scan_schedule_same_for_one_file_many_files_and_utc_split(
    two_roll_market: SynthMarket, two_roll_market_utc: SynthMarket, two_roll_single_file: Path
) -> None:
    many = scan_dbn([two_roll_market.folder], symbol="ES.FUT")
    one = scan_dbn([two_roll_single_file], symbol="ES.FUT")
    utc = scan_dbn([two_roll_market_utc.folder], symbol="ES.FUT")

    assert one.schedule == many.schedule
    assert utc.schedule == many.schedule
    assert one.activity == many.activity == utc.activity


def test_scan_activity_matches_generator_volumes(two_roll_market: SynthMarket) -> None:
    report = scan_dbn([two_roll_market.folder])

    scanned = {(a.trading_day, a.symbol): (a.n_records, a.volume) for a in report.activity}
    truth = {
        (v.trading_day, v.raw_symbol): (v.n_records, v.volume)
        for v in two_roll_market.summary.day_volumes
    }
    assert scanned == truth
    assert report.root == "ES"  # inferred from the parent symbol in the metadata
    assert report.n_records == two_roll_market.summary.n_records


def test_scan_files_given_in_any_order_give_same_report(two_roll_market: SynthMarket) -> None:
    files = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))

    forward = scan_dbn(files, symbol="ES.FUT")
    backward = scan_dbn(files[::-1], symbol="ES.FUT")

    assert backward.schedule == forward.schedule
    assert backward.activity == forward.activity


def test_scan_to_json_marks_rolls(two_roll_market: SynthMarket) -> None:
    report = scan_dbn([two_roll_market.folder], symbol="ES.FUT")

    data = report.to_json()

    rolls = [e for e in data["front_month"] if e["is_roll"]]  # type: ignore[attr-defined]
    assert [e["contract"] for e in rolls] == ["ESM4", "ESU4"]
    text = report.format_text()
    assert "ESM4" in text and "volume" in text


def test_iter_selected_front_month_streams_same_schedule_as_scan(
    two_roll_market: SynthMarket,
) -> None:
    source = open_dbn([two_roll_market.folder])
    selector = FrontMonthSelector("ES")

    kept = list(
        iter_selected(
            (c.records for c in source.iter_chunks(chunk_records=500)),
            InstrumentSelection("front-month"),
            symbols_on=lambda d: symbols_listed(source.symbology, d),
            selector=selector,
        )
    )

    schedule = scan_dbn([two_roll_market.folder], symbol="ES.FUT").schedule
    assert selector.schedule == list(schedule)
    chosen = {e.trading_day: e.instrument_id for e in schedule}
    assert all((records["instrument_id"] == chosen[day]).all() for day, records in kept)
    n_kept = sum(len(records) for _, records in kept)
    truth = {
        (v.trading_day, v.instrument_id): v.n_records for v in two_roll_market.summary.day_volumes
    }
    assert n_kept == sum(truth[(day, iid)] for day, iid in chosen.items())


def test_iter_selected_id_mode_keeps_only_that_instrument(two_roll_market: SynthMarket) -> None:
    source = open_dbn([two_roll_market.folder])
    esm4 = next(
        v.instrument_id for v in two_roll_market.summary.day_volumes if v.raw_symbol == "ESM4"
    )

    kept = list(
        iter_selected((c.records for c in source.iter_chunks()), InstrumentSelection("id", esm4))
    )

    n_truth = sum(
        v.n_records for v in two_roll_market.summary.day_volumes if v.instrument_id == esm4
    )
    assert sum(len(r) for _, r in kept) == n_truth
    assert all((r["instrument_id"] == esm4).all() for _, r in kept)


def test_scan_reports_contract_facts_and_their_source(two_roll_market: SynthMarket) -> None:
    spreads = Path(__file__).parents[2] / "data" / "peer-dbn"
    spreads = spreads / "GLBX.MDP3.definition-es-futspread.dbn.zst"

    report = scan_dbn([two_roll_market.folder], definitions=[spreads])

    facts = {c.symbol: c for c in report.contracts}
    esh4, spread = facts["ESH4"], facts["ESM4-ESU4"]
    assert (esh4.multiplier, esh4.tick_size, esh4.source) == (50.0, 0.25, "definition")
    assert esh4.expiration == dt.date(2024, 3, 15)
    # --definitions come after the folder's own: the real ES spread's definition wins
    assert (spread.tick_size, spread.source) == (0.05, "definition")
    assert "$/point" in report.format_text()
