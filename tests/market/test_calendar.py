from __future__ import annotations

import datetime as dt

import numpy as np
import pandas_market_calendars as pmc
import pytest

from fxstore.errors import InvalidInputError
from fxstore.market.calendar import (
    CALENDARS,
    CHICAGO,
    business_days_before,
    is_business_day,
    is_trading_day,
    quarterly_expiry,
    roll_date,
    session_bounds_ns,
    sessions,
    trading_day_of,
    trading_days_between,
)

pytestmark = pytest.mark.quick

NS = 1_000_000_000


def _utc_ns(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=dt.UTC).timestamp()) * NS


@pytest.mark.parametrize(
    ("day", "open_utc", "close_utc"),
    [
        # winter (CST, UTC-6): 17:00 CST = 23:00 UTC, 16:00 CST = 22:00 UTC
        (dt.date(2024, 1, 9), (2024, 1, 8, 23), (2024, 1, 9, 22)),
        # Monday after the DST switch (Sunday 2024-03-10): opens 17:00 CDT = 22:00 UTC
        (dt.date(2024, 3, 11), (2024, 3, 10, 22), (2024, 3, 11, 21)),
        # Monday after DST ends (Sunday 2024-11-03): opens 17:00 CST = 23:00 UTC
        (dt.date(2024, 11, 4), (2024, 11, 3, 23), (2024, 11, 4, 22)),
    ],
)
def test_session_bounds_ns_across_dst_follows_chicago(
    day: dt.date, open_utc: tuple[int, ...], close_utc: tuple[int, ...]
) -> None:
    assert session_bounds_ns(day) == (_utc_ns(*open_utc), _utc_ns(*close_utc))


def _local(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / NS, tz=CHICAGO).strftime("%Y-%m-%d %H:%M")


def test_trading_day_of_maintenance_window_is_the_next_days_pre_open() -> None:
    open_ns, close_ns = session_bounds_ns(dt.date(2024, 3, 11))
    next_open, _ = session_bounds_ns(dt.date(2024, 3, 12))
    ts = np.array([open_ns - 1, open_ns, close_ns - 1, close_ns, next_open - 1], dtype=np.int64)

    days = trading_day_of(ts)
    inside = sessions().in_session(ts)

    # 2024-03-10 is a Sunday: the moment before Monday's open is Monday's pre-open
    expected = ["2024-03-11", "2024-03-11", "2024-03-11", "2024-03-12", "2024-03-12"]  # weekday
    assert days.tolist() == [np.datetime64(d, "D").item() for d in expected]
    assert inside.tolist() == [False, True, True, False, False]


@pytest.mark.parametrize("name", sorted(set(CALENDARS.values())))
def test_sessions_match_the_calendar_library_2015_to_2026(name: str) -> None:
    """Every session of 2015-2026 as pandas_market_calendars lists it; every moment of it
    (open, just before the close) maps to it, its pre-open too; the close maps to the next
    session when that opens within a day, else (a weekend, a holiday) to its own."""
    schedule = pmc.get_calendar(name).schedule("2015-01-01", "2026-12-31")
    opens = schedule["market_open"].map(lambda t: t.value).to_numpy(np.int64)
    closes = schedule["market_close"].map(lambda t: t.value).to_numpy(np.int64)
    days = schedule.index.to_numpy().astype("datetime64[D]")
    table = sessions(name)

    assert [table.bounds(d.item()) for d in days] == list(zip(opens, closes, strict=True))
    assert table.between(dt.date(2015, 1, 1), dt.date(2026, 12, 31)) == [d.item() for d in days]
    assert (table.trading_day_of(opens) == days).all()
    assert (table.trading_day_of(closes - 1) == days).all()
    short_gap = opens[1:] - closes[:-1] <= 24 * 3600 * NS
    after_close = np.where(short_gap, days[1:], days[:-1])
    assert (table.trading_day_of(closes[:-1]) == after_close).all()
    assert (table.trading_day_of(opens[1:] - 1) == days[1:]).all()
    assert not table.in_session(opens - 1).any() and table.in_session(closes - 1).all()
    assert not table.in_session(closes).any()
    assert short_gap.mean() > 0.75 and not short_gap.all()  # both cases are exercised


@pytest.mark.parametrize(
    ("day", "close_local"),
    [
        (dt.date(2023, 11, 23), "2023-11-23 12:00"),  # Thanksgiving
        (dt.date(2023, 11, 24), "2023-11-24 12:15"),  # the day after
        (dt.date(2024, 3, 29), "2024-03-29 08:15"),  # Good Friday 2024 (payrolls day)
        (dt.date(2024, 1, 15), "2024-01-15 12:00"),  # Martin Luther King Jr. Day
        (dt.date(2024, 7, 3), "2024-07-03 12:15"),
        (dt.date(2024, 3, 11), "2024-03-11 16:00"),  # an ordinary day
    ],
)
def test_equity_sessions_know_cme_early_closes(day: dt.date, close_local: str) -> None:
    open_ns, close_ns = session_bounds_ns(day)

    assert _local(close_ns) == close_local
    assert _local(open_ns).endswith("17:00")


def test_energy_has_no_session_on_good_friday_2024_but_equity_does() -> None:
    good_friday = dt.date(2024, 3, 29)

    assert is_trading_day(good_friday)
    assert not is_trading_day(good_friday, CALENDARS["energy"])


def _at(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=CHICAGO).timestamp()) * NS


def test_holiday_and_weekend_records_belong_to_a_session_not_a_pseudo_day() -> None:
    ts = np.array(
        [
            _at(2023, 12, 25, 10),  # Christmas: the pre-open of Tuesday's session
            _at(2024, 3, 10, 16, 30),  # Sunday, before the open: Monday's pre-open
            _at(2024, 3, 8, 16, 20),  # Friday after the close: Friday's post-close
            _at(2024, 3, 9, 12),  # Saturday noon: still Friday's (Monday opens in 29 h)
        ],
        dtype=np.int64,
    )

    days = trading_day_of(ts)

    expected = [dt.date(2023, 12, 26), dt.date(2024, 3, 11), dt.date(2024, 3, 8)]
    assert days.tolist() == [*expected, dt.date(2024, 3, 8)]
    assert not sessions().in_session(ts).any()


def test_trading_day_of_empty_input_returns_empty() -> None:
    assert trading_day_of(np.empty(0, dtype=np.int64)).shape == (0,)


def test_trading_day_of_past_the_table_names_the_calendar() -> None:
    far = np.array([int(dt.datetime(2041, 6, 1, tzinfo=dt.UTC).timestamp()) * NS])

    with pytest.raises(InvalidInputError, match=r"outside the sessions .*CME Globex Equity"):
        trading_day_of(far)


@pytest.mark.parametrize(
    "day",
    [
        dt.date(2024, 1, 1),  # New Year's Day
        dt.date(2024, 12, 25),  # Christmas
        dt.date(2022, 12, 26),  # Christmas on a Sunday, observed Monday
        dt.date(2024, 3, 9),  # Saturday
        dt.date(2024, 3, 10),  # Sunday
    ],
)
def test_is_trading_day_on_holiday_or_weekend_is_false(day: dt.date) -> None:
    assert not is_trading_day(day)
    assert day not in trading_days_between(day - dt.timedelta(days=3), day + dt.timedelta(3))
    with pytest.raises(InvalidInputError, match="no CME Globex Equity session"):
        session_bounds_ns(day)


def test_is_trading_day_on_ordinary_weekday_is_true() -> None:
    assert is_trading_day(dt.date(2024, 3, 11))


def test_business_days_skip_cme_holidays_with_abbreviated_sessions() -> None:
    # MLK Day trades an abbreviated session but is no CME trade date
    assert is_trading_day(dt.date(2024, 1, 15)) and not is_business_day(dt.date(2024, 1, 15))
    assert business_days_before(dt.date(2024, 1, 16), 1) == dt.date(2024, 1, 12)
    assert business_days_before(dt.date(2024, 3, 20), 3) == dt.date(2024, 3, 15)


@pytest.mark.parametrize(
    ("year", "month", "expiry", "roll"),
    [
        (2024, 3, dt.date(2024, 3, 15), dt.date(2024, 3, 11)),
        (2024, 6, dt.date(2024, 6, 21), dt.date(2024, 6, 17)),
        (2024, 9, dt.date(2024, 9, 20), dt.date(2024, 9, 16)),
        (2024, 12, dt.date(2024, 12, 20), dt.date(2024, 12, 16)),
    ],
)
def test_quarterly_expiry_is_third_friday_and_roll_is_monday(
    year: int, month: int, expiry: dt.date, roll: dt.date
) -> None:
    assert quarterly_expiry(year, month) == expiry
    assert roll_date(expiry) == roll
