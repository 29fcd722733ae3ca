from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.ingest.select.continuous import compare_with_databento, read_resolve_json
from fxstore.ingest.select.front_month import RollEntry
from fxstore.market.calendar import sessions

pytestmark = pytest.mark.quick

DATA = Path(__file__).parents[2] / "data" / "databento"
TABLE = sessions()


def _schedule(first_m3_day: dt.date) -> list[RollEntry]:
    days = TABLE.between(dt.date(2023, 3, 13), dt.date(2023, 3, 24))
    return [
        RollEntry(
            d, "ESH3" if d < first_m3_day else "ESM3", 1 if d < first_m3_day else 2, None, 1, ""
        )
        for d in days
    ]


def test_read_resolve_json_reads_the_intervals() -> None:
    mapping = read_resolve_json(DATA / "ES.c.0.resolve.json")

    assert mapping.symbol == "ES.c.0"
    assert mapping.on(dt.date(2023, 3, 18)) == "ESH3"
    assert mapping.on(dt.date(2023, 3, 19)) == "ESM3"
    assert mapping.on(dt.date(2023, 4, 1)) is None


def test_compare_agrees_when_fxstore_switches_at_the_same_sunday_open() -> None:
    # ESH3 expired on Friday 2023-03-17; trading day Monday 03-20 opens at 17:00 CDT on
    # Sunday 03-19 = 22:00 UTC on 03-19, the UTC date Databento's ES.c.0 switches on.
    mapping = read_resolve_json(DATA / "ES.c.0.resolve.json")

    rows = compare_with_databento(_schedule(dt.date(2023, 3, 20)), mapping, TABLE)

    assert {r.agree for r in rows} == {"yes"}
    monday = next(r for r in rows if r.trading_day == dt.date(2023, 3, 20))
    assert monday.open_utc_date == dt.date(2023, 3, 19)


def test_compare_flags_a_volume_roll_before_databentos_calendar_switch() -> None:
    mapping = read_resolve_json(DATA / "ES.c.0.resolve.json")

    rows = compare_with_databento(_schedule(dt.date(2023, 3, 14)), mapping, TABLE)

    assert [r.trading_day for r in rows if r.agree == "no"] == TABLE.between(
        dt.date(2023, 3, 14), dt.date(2023, 3, 17)
    )


def test_compare_flags_the_evening_hours_when_both_switch_on_the_same_day(
    tmp_path: Path,
) -> None:
    # A mapping that switches on UTC date 03-14: fxstore's trading day 03-14 opened on the
    # evening of 03-13 (UTC date 03-13), still ESH3 for Databento until midnight UTC.
    path = tmp_path / "ES.v.0.json"
    intervals = [
        {"d0": "2023-03-01", "d1": "2023-03-14", "s": "ESH3"},
        {"d0": "2023-03-14", "d1": "2023-04-01", "s": "ESM3"},
    ]
    path.write_text(json.dumps({"result": {"ES.v.0": intervals}, "stype_out": "raw_symbol"}))

    rows = compare_with_databento(_schedule(dt.date(2023, 3, 14)), read_resolve_json(path), TABLE)

    assert [(r.trading_day, r.agree) for r in rows if r.agree != "yes"] == [
        (dt.date(2023, 3, 14), "evening")
    ]


def test_compare_matches_instrument_ids_when_resolved_to_ids(tmp_path: Path) -> None:
    path = tmp_path / "ids.json"
    intervals = [{"d0": "2023-03-01", "d1": "2023-04-01", "s": "1"}]
    path.write_text(json.dumps({"result": {"ES.c.0": intervals}, "stype_out": "instrument_id"}))

    rows = compare_with_databento(_schedule(dt.date(2023, 3, 20)), read_resolve_json(path), TABLE)

    assert {r.agree for r in rows if r.contract == "ESH3"} == {"yes"}
    assert {r.agree for r in rows if r.contract == "ESM3"} == {"no"}


@pytest.mark.parametrize(
    ("content", "error", "message"),
    [
        ("not json", SchemaError, "not JSON"),
        ('{"status": 0}', SchemaError, "no `result` mapping"),
        ('{"result": {"ES.c.0": [], "ES.v.0": []}}', InvalidInputError, "--databento-symbol"),
        ('{"result": {"ES.c.0": [{"d0": "soon", "d1": "x", "s": "ESH3"}]}}', SchemaError, "date"),
    ],
)
def test_read_resolve_json_rejects_what_is_not_a_resolution(
    tmp_path: Path, content: str, error: type[Exception], message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)

    with pytest.raises(error, match=message):
        read_resolve_json(path)
