from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from fxstore.market.calendar import (
    holidays,
    is_trading_day,
    quarterly_expiry,
    roll_date,
    session_bounds_ns,
    trading_day_of,
)

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


def test_trading_day_of_session_open_belongs_to_next_day() -> None:
    open_ns, close_ns = session_bounds_ns(dt.date(2024, 3, 11))
    ts = np.array([open_ns - 1, open_ns, close_ns - 1, close_ns + 1], dtype=np.int64)

    days = trading_day_of(ts)

    expected = ["2024-03-10", "2024-03-11", "2024-03-11", "2024-03-11"]
    assert days.tolist() == [np.datetime64(d, "D").item() for d in expected]


def test_trading_day_of_matches_session_bounds_over_a_year() -> None:
    days = [dt.date(2024, 1, 2) + dt.timedelta(days=i) for i in range(366)]
    opens = np.array([session_bounds_ns(d)[0] for d in days], dtype=np.int64)
    closes = np.array([session_bounds_ns(d)[1] for d in days], dtype=np.int64)

    at_open = trading_day_of(opens)
    before_close = trading_day_of(closes - 1)

    expected = np.array(days, dtype="datetime64[D]")
    assert (at_open == expected).all()
    assert (before_close == expected).all()


def test_trading_day_of_empty_input_returns_empty() -> None:
    assert trading_day_of(np.empty(0, dtype=np.int64)).shape == (0,)


@pytest.mark.parametrize(
    "day",
    [
        dt.date(2024, 1, 1),  # New Year's Day
        dt.date(2024, 3, 29),  # Good Friday
        dt.date(2024, 7, 4),  # Independence Day
        dt.date(2024, 11, 28),  # Thanksgiving
        dt.date(2024, 12, 25),  # Christmas
        dt.date(2022, 12, 26),  # Christmas on a Sunday, observed Monday
        dt.date(2024, 3, 9),  # Saturday
        dt.date(2024, 3, 10),  # Sunday
    ],
)
def test_is_trading_day_on_holiday_or_weekend_is_false(day: dt.date) -> None:
    assert not is_trading_day(day)


def test_is_trading_day_on_ordinary_weekday_is_true() -> None:
    assert is_trading_day(dt.date(2024, 3, 11))


def test_holidays_has_five_days_a_year() -> None:
    assert len(holidays(2025)) == 5


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
