"""CME Globex calendar: trading days, session bounds, holidays and quarterly expiries.

Trading day D runs from 17:00 America/Chicago on calendar day D-1 to 16:00 on D; the hour
16:00-17:00 is the daily maintenance break. Daylight-saving changes happen at 02:00 on a
Sunday, when Globex is closed, so one session never straddles two UTC offsets. Trading days
are represented as ``numpy.datetime64[D]`` (or ``datetime.date`` at the API edge).
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt

__all__ = [
    "CHICAGO",
    "MONTH_CODES",
    "NS_PER_DAY",
    "NS_PER_HOUR",
    "is_trading_day",
    "quarterly_expiry",
    "roll_date",
    "session_bounds_ns",
    "third_friday",
    "trading_day_of",
    "trading_days_between",
]

CHICAGO: Final = ZoneInfo("America/Chicago")
NS_PER_SECOND: Final = 1_000_000_000
NS_PER_HOUR: Final = 3600 * NS_PER_SECOND
NS_PER_DAY: Final = 24 * NS_PER_HOUR
SESSION_OPEN_HOUR: Final = 17  # local hour on D-1 when trading day D opens
SESSION_CLOSE_HOUR: Final = 16  # local hour on D when trading day D closes
#: CME futures month codes, January to December.
MONTH_CODES: Final = "FGHJKMNQUVXZ"
QUARTERLY_MONTHS: Final = (3, 6, 9, 12)


def _easter(year: int) -> dt.date:
    """Gregorian Easter Sunday (anonymous Gregorian algorithm)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    ell = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * ell) // 451
    month = (h + ell - 7 * m + 114) // 31
    day = (h + ell - 7 * m + 114) % 31 + 1
    return dt.date(year, month, day)


def _observed(day: dt.date) -> dt.date:
    """A fixed-date holiday on a weekend is observed on the nearest weekday."""
    if day.weekday() == 5:
        return day - dt.timedelta(days=1)
    if day.weekday() == 6:
        return day + dt.timedelta(days=1)
    return day


@lru_cache(maxsize=64)
def holidays(year: int) -> frozenset[dt.date]:
    """Days with no Globex equity-index session in `year`.

    CME closes fully on New Year's Day, Good Friday and Christmas, and trades abbreviated
    sessions on Independence Day and Thanksgiving; fxstore's calendar (and its synthetic
    market) treats all five as closed, which is what a causal backtest needs: no bars.
    """
    thanksgiving = dt.date(year, 11, 1)
    thanksgiving += dt.timedelta(days=(3 - thanksgiving.weekday()) % 7 + 21)
    return frozenset(
        {
            _observed(dt.date(year, 1, 1)),
            _easter(year) - dt.timedelta(days=2),
            _observed(dt.date(year, 7, 4)),
            thanksgiving,
            _observed(dt.date(year, 12, 25)),
        }
    )


def is_trading_day(day: dt.date) -> bool:
    """Whether `day` has a Globex session: a weekday that is not a holiday."""
    return day.weekday() < 5 and day not in holidays(day.year)


def trading_days_between(start: dt.date, end: dt.date) -> list[dt.date]:
    """Trading days in [start, end], in order."""
    days = []
    day = start
    while day <= end:
        if is_trading_day(day):
            days.append(day)
        day += dt.timedelta(days=1)
    return days


def _local_ns(day: dt.date, hour: int) -> int:
    local = dt.datetime(day.year, day.month, day.day, hour, tzinfo=CHICAGO)
    return int(local.timestamp()) * NS_PER_SECOND


def session_bounds_ns(day: dt.date) -> tuple[int, int]:
    """UTC ns of the open (17:00 Chicago on D-1) and close (16:00 Chicago on D) of trading day D."""
    return _local_ns(day - dt.timedelta(days=1), SESSION_OPEN_HOUR), _local_ns(
        day, SESSION_CLOSE_HOUR
    )


def _utc_offset_ns(ts_ns: int) -> int:
    moment = dt.datetime.fromtimestamp(ts_ns / NS_PER_SECOND, tz=dt.UTC).astimezone(CHICAGO)
    offset = moment.utcoffset()
    assert offset is not None
    return int(offset.total_seconds()) * NS_PER_SECOND


@lru_cache(maxsize=256)
def _offset_table(
    first_hour: int, last_hour: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Chicago UTC offsets over UTC hours [first_hour, last_hour]: (change starts, offsets).

    DST changes happen on the hour, so the offset is constant within a UTC hour; the table
    is found by probing once a day and bisecting to the hour where it changes.
    """
    starts = [first_hour * NS_PER_HOUR]
    offsets = [_utc_offset_ns(starts[0])]
    hour = first_hour
    while hour < last_hour:
        step = min(24, last_hour - hour)
        nxt = hour + step
        off = _utc_offset_ns(nxt * NS_PER_HOUR)
        if off != offsets[-1]:
            lo, hi = hour, nxt  # offset at lo is the old one, at hi the new one
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _utc_offset_ns(mid * NS_PER_HOUR) == offsets[-1]:
                    lo = mid
                else:
                    hi = mid
            starts.append(hi * NS_PER_HOUR)
            offsets.append(off)
        hour = nxt
    return np.asarray(starts, dtype=np.int64), np.asarray(offsets, dtype=np.int64)


def trading_day_of(
    ts_ns: npt.NDArray[np.int64] | npt.NDArray[np.uint64],
) -> npt.NDArray[np.datetime64]:
    """Map UTC timestamps to CME trading days.

    Parameters
    ----------
    ts_ns
        Timestamps in ns since the epoch, any order, shape (n,).

    Returns
    -------
    numpy.ndarray
        ``datetime64[D]``, shape (n,): the trading day each timestamp belongs to. A moment at
        or after 17:00 Chicago belongs to the next calendar day's session.
    """
    ts = np.asarray(ts_ns).astype(np.int64, copy=False)
    if ts.size == 0:
        return np.empty(0, dtype="datetime64[D]")
    starts, offsets = _offset_table(int(ts.min()) // NS_PER_HOUR, int(ts.max()) // NS_PER_HOUR + 1)
    offset = offsets[np.searchsorted(starts, ts, side="right") - 1]
    shift = (24 - SESSION_OPEN_HOUR) * NS_PER_HOUR  # 17:00 local becomes midnight of D
    days = (ts + offset + shift) // NS_PER_DAY
    return days.astype("datetime64[D]")


def third_friday(year: int, month: int) -> dt.date:
    """The third Friday of `month`: the expiry day of CME quarterly equity-index futures."""
    first = dt.date(year, month, 1)
    return first + dt.timedelta(days=(4 - first.weekday()) % 7 + 14)


def quarterly_expiry(year: int, month: int) -> dt.date:
    """Expiry (last trading day) of the quarterly contract of `month` (3, 6, 9 or 12) in `year`."""
    if month not in QUARTERLY_MONTHS:
        raise ValueError(f"not a quarterly month: {month}")
    return third_friday(year, month)


def roll_date(expiry: dt.date) -> dt.date:
    """The roll date of a quarterly contract: the Monday of its expiry week."""
    return expiry - dt.timedelta(days=expiry.weekday())
