from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from fxstore.config import RollConfig
from fxstore.errors import NoFrontMonthError
from fxstore.ingest.dbn.format import MBP10_DTYPE
from fxstore.ingest.select.activity import ActivityCounter, DailyActivity
from fxstore.ingest.select.front_month import FrontMonthSelector, select_front_month
from fxstore.market.calendar import session_bounds_ns

pytestmark = pytest.mark.quick

SYMBOLS = {1: "ESH4", 2: "ESM4", 3: "ESU4", 4: "ESH4-ESM4", 5: "MESH4", 6: "ESXH4"}


def _activity(rows: list[tuple[dt.date, int, int]]) -> DailyActivity:
    """rows: (trading day, instrument id, traded volume); one record per unit of volume + 1."""
    return DailyActivity(
        trading_day=np.array([r[0] for r in rows], dtype="datetime64[D]"),
        instrument_id=np.array([r[1] for r in rows], dtype=np.uint32),
        n_records=np.array([r[2] + 1 for r in rows], dtype=np.int64),
        volume=np.array([r[2] for r in rows], dtype=np.int64),
    )


def _symbols(
    days: list[dt.date], ids: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
) -> dict[dt.date, dict[int, str]]:
    """The symbology of `days`: the instruments `ids` are listed every day."""
    return {d: {i: SYMBOLS[i] for i in ids} for d in days}


def _days(n: int, start: dt.date = dt.date(2024, 3, 4)) -> list[dt.date]:
    return [start + dt.timedelta(days=i) for i in range(n)]


def test_select_front_month_rolls_the_day_after_volume_crossover() -> None:
    days = _days(5)
    # ESH4 leads on days 0-1; ESM4 overtakes on day 2 (the crossover); roll on day 3.
    volumes = [(100, 10), (90, 40), (40, 90), (10, 100), (5, 120)]
    rows = [(d, 1, a) for d, (a, _) in zip(days, volumes, strict=True)]
    rows += [(d, 2, b) for d, (_, b) in zip(days, volumes, strict=True)]
    rows += [(d, 4, 500) for d in days]  # a busy spread is never chosen

    schedule = select_front_month(_activity(rows), _symbols(days), "ES")

    assert [e.contract for e in schedule] == ["ESH4", "ESH4", "ESH4", "ESM4", "ESM4"]
    assert [e.reason for e in schedule] == ["first-day", "held", "held", "volume", "held"]
    assert schedule[3].instrument_id == 2
    assert schedule[3].prior_volume_share == pytest.approx(90 / 130)


def test_select_front_month_first_day_takes_nearest_unexpired_outright() -> None:
    days = _days(1)
    rows = [(days[0], 3, 5), (days[0], 2, 50), (days[0], 1, 1)]

    schedule = select_front_month(_activity(rows), _symbols(days), "ES")

    assert schedule[0].contract == "ESH4"
    assert schedule[0].reason == "first-day"


def test_select_front_month_on_expiry_day_starts_with_next_contract() -> None:
    expiry = dt.date(2024, 3, 15)
    rows = [(expiry, 1, 5), (expiry, 2, 50)]

    schedule = select_front_month(_activity(rows), _symbols([expiry]), "ES")

    assert schedule[0].contract == "ESM4"


def test_select_front_month_tie_keeps_current_contract() -> None:
    days = _days(3)
    rows = [(days[0], 1, 10), (days[0], 2, 5), (days[1], 1, 50), (days[1], 2, 50)]
    rows += [(days[2], 1, 1), (days[2], 2, 1)]

    schedule = select_front_month(_activity(rows), _symbols(days), "ES")

    assert [e.contract for e in schedule] == ["ESH4", "ESH4", "ESH4"]


def test_select_front_month_never_rolls_back_to_earlier_contract() -> None:
    days = _days(4)
    rows = [(days[0], 1, 10), (days[0], 2, 50)]  # day 1 rolls to ESM4
    rows += [(days[1], 1, 90), (days[1], 2, 10)]  # ESH4 busier again: no roll back
    rows += [(days[2], 1, 1), (days[2], 2, 1), (days[3], 2, 1)]

    schedule = select_front_month(_activity(rows), _symbols(days), "ES")

    assert [e.contract for e in schedule] == ["ESH4", "ESM4", "ESM4", "ESM4"]


def test_select_front_month_same_day_volume_is_never_used() -> None:
    days = _days(2)
    # On day 1 ESM4 trades far more, but only day 0's volume decides day 1.
    rows = [(days[0], 1, 100), (days[0], 2, 1), (days[1], 1, 1), (days[1], 2, 10_000)]

    schedule = select_front_month(_activity(rows), _symbols(days), "ES")

    assert schedule[1].contract == "ESH4"


def test_select_front_month_prefix_roots_are_never_chosen() -> None:
    days = _days(2)
    rows = [(d, i, 1000) for d in days for i in (5, 6)] + [(d, 3, 1) for d in days]

    schedule = select_front_month(_activity(rows), _symbols(days, (3, 4, 5, 6)), "ES")

    assert {e.contract for e in schedule} == {"ESU4"}


def test_select_front_month_expired_contract_is_replaced() -> None:
    days = [dt.date(2024, 3, 14), dt.date(2024, 3, 18)]
    # ESH4 expires 2024-03-15 and never lost the volume lead in the data.
    rows = [(days[0], 1, 100), (days[0], 2, 1), (days[1], 2, 5), (days[1], 3, 9)]
    symbols = {days[0]: {1: "ESH4", 2: "ESM4"}, days[1]: {2: "ESM4", 3: "ESU4"}}

    schedule = select_front_month(_activity(rows), symbols, "ES")

    assert [(e.contract, e.reason) for e in schedule] == [
        ("ESH4", "first-day"),
        ("ESM4", "expired"),
    ]


def test_select_front_month_without_outrights_raises() -> None:
    days = _days(1)
    rows = [(days[0], 4, 10), (days[0], 5, 10)]

    with pytest.raises(NoFrontMonthError, match="No outright of root 'ES'"):
        select_front_month(_activity(rows), _symbols(days, (4, 5, 6)), "ES")


def test_activity_counter_counts_records_and_traded_volume_per_day() -> None:
    records = np.zeros(6, dtype=MBP10_DTYPE)
    # the 2024-03-11 session closes 2024-03-11 21:00 UTC: two records before, four at or
    # after it (the 2024-03-12 session's pre-open, then its session)
    close_ns = session_bounds_ns(dt.date(2024, 3, 11))[1]
    records["ts_recv"] = close_ns + np.array([-2, -1, 0, 1, 2, 3]) * 1_000_000
    records["instrument_id"] = [1, 1, 1, 2, 1, 2]
    records["action"] = [b"T", b"A", b"T", b"T", b"C", b"A"]
    records["size"] = [3, 7, 4, 5, 6, 9]
    counter = ActivityCounter()

    counter.update(records[:3])
    counter.update(records[3:])
    activity = counter.result()

    assert activity.on(dt.date(2024, 3, 11)) == {1: (2, 3)}
    assert activity.on(dt.date(2024, 3, 12)) == {1: (2, 4), 2: (2, 5)}


def test_select_front_month_records_on_days_no_symbol_is_listed_says_so() -> None:
    monday = dt.date(2024, 3, 4)  # Saturday records count towards Monday's trading day
    rows = [(monday, 1, 50)]

    with pytest.raises(NoFrontMonthError) as info:
        select_front_month(_activity(rows), {dt.date(2024, 3, 2): {1: "ESH4"}}, "ES")

    assert str(info.value) == (
        "No instrument of the input is listed on the trading days its records fall on "
        "(2024-03-04): the records lie outside the symbology's dates (data of a weekend or "
        "holiday, when no session trades, or files of other dates); check the files' dates."
    )


def test_select_front_month_at_depth_two_holds_the_next_contract_and_rolls_with_the_front() -> None:
    days = _days(5)
    # ESH4 leads on days 0-1; ESM4 overtakes on day 2: the front rolls on day 3.
    volumes = [(100, 10, 1), (90, 40, 1), (40, 90, 2), (10, 100, 3), (5, 120, 4)]
    rows = [(d, i + 1, v[i]) for d, v in zip(days, volumes, strict=True) for i in range(3)]
    front = select_front_month(_activity(rows), _symbols(days), "ES")
    selector = FrontMonthSelector("ES", RollConfig(depth=2))

    schedule = select_front_month(_activity(rows), _symbols(days), "ES", selector)

    assert [e.contract for e in front] == ["ESH4", "ESH4", "ESH4", "ESM4", "ESM4"]
    assert [e.contract for e in schedule] == ["ESM4", "ESM4", "ESM4", "ESU4", "ESU4"]
    assert [e.reason for e in schedule] == [e.reason for e in front]
    assert [e.instrument_id for e in schedule] == [2, 2, 2, 3, 3]
    assert schedule[3].volume_share == pytest.approx(3 / 113)


def test_select_front_month_deeper_than_the_listed_contracts_raises() -> None:
    days = _days(2)
    rows = [(d, i, 10) for d in days for i in (1, 2, 3)]
    selector = FrontMonthSelector("ES", RollConfig(depth=4))

    with pytest.raises(NoFrontMonthError, match=r"--depth 4: 2024-03-04 lists 2 outright"):
        select_front_month(_activity(rows), _symbols(days), "ES", selector)
