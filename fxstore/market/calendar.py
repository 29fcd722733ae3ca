"""CME Globex sessions from a maintained calendar: trading days, session bounds, expiries.

Sessions, holidays and early closes come from ``pandas_market_calendars`` (the CME Globex
calendars of each product group: equity, fixed income, FX, energy, metals), which knows
CME's holiday schedule (New Year's Day, Good Friday, Christmas), its abbreviated sessions
(12:00 CT on Thanksgiving, 12:15 CT the day after, 08:15 CT on Good Friday 2024 for
equities …) and adhoc closures. fxstore builds one table of sessions per calendar from it,
once per process, and assigns records to sessions with one vectorised search.

A *trading day* is one session of that table, named by the calendar day it closes on: trading
day D runs from its open (17:00 America/Chicago on the evening before) to its close (16:00
on D, earlier on an early-close day). Every moment belongs to exactly one trading day, and
moments between two sessions are *out of session*, inside no bar:

* within :data:`PRE_OPEN_NS` (24 hours) before a session's open, they are its *pre-open*
  (the daily maintenance window 16:00-17:00, the Sunday pre-open, the evening after a
  holiday): their records update the book the session's first OFI is measured against;
* earlier in a longer gap (a weekend, a holiday), they are the previous session's
  *post-close* (Friday's purge of day orders after 16:00): counted, changing nothing.

So a Databento UTC-day file of a Friday never reaches into Monday, and weeks stay
independent units of work. Days without a session (weekends, holidays) are not trading
days anywhere.

Daylight-saving changes happen at 02:00 on a Sunday, when Globex is closed, so one session
never straddles two UTC offsets. Trading days are ``numpy.datetime64[D]`` (or
``datetime.date`` at the API edge).

Contract expiries count *business days* of CME's trade-date calendar (``CME_TradeDate``:
no US exchange holiday), which is what CME's termination-of-trading rules mean.
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Final
from zoneinfo import ZoneInfo

import numpy as np
import numpy.typing as npt

from fxstore.errors import InvalidInputError

__all__ = [
    "CALENDARS",
    "CHICAGO",
    "DEFAULT_CALENDAR",
    "MONTH_CODES",
    "NS_PER_DAY",
    "NS_PER_HOUR",
    "TRADE_DATE_CALENDAR",
    "Sessions",
    "business_days_before",
    "is_business_day",
    "is_trading_day",
    "quarterly_expiry",
    "roll_date",
    "session_bounds_ns",
    "sessions",
    "third_friday",
    "trading_day_of",
    "trading_days_between",
]

CHICAGO: Final = ZoneInfo("America/Chicago")
NS_PER_SECOND: Final = 1_000_000_000
NS_PER_HOUR: Final = 3600 * NS_PER_SECOND
NS_PER_DAY: Final = 24 * NS_PER_HOUR
#: CME futures month codes, January to December.
MONTH_CODES: Final = "FGHJKMNQUVXZ"
QUARTERLY_MONTHS: Final = (3, 6, 9, 12)

#: The pandas_market_calendars calendar of each CME product group (fxstore's RootSpec.group).
CALENDARS: Final = {
    "equity": "CME Globex Equity",
    "rates": "CME Globex Fixed Income",
    "fx": "CMEGlobex_FX",
    "energy": "CMEGlobex_Energy",
    "metals": "CMEGlobex_Metals",
}
#: The calendar of a series whose product group fxstore cannot tell (equity index hours).
DEFAULT_CALENDAR: Final = CALENDARS["equity"]
#: CME's calendar of trade dates: the business days termination-of-trading rules count.
TRADE_DATE_CALENDAR: Final = "CME_TradeDate"
#: How long before its open a moment between two sessions belongs to the next one.
PRE_OPEN_NS: Final = 24 * NS_PER_HOUR
#: The years every session table covers.
FIRST_DAY: Final = dt.date(1990, 1, 1)
LAST_DAY: Final = dt.date(2040, 12, 31)

_LOCK = threading.Lock()


def _as_ns(ts_ns: npt.ArrayLike) -> npt.NDArray[np.int64]:
    return np.asarray(ts_ns).astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class Sessions:
    """The Globex sessions of one calendar, in order: day k runs [open_ns[k], close_ns[k]).

    Build it with :func:`sessions`; the table is immutable and shared within a process.
    """

    #: The pandas_market_calendars name ("CME Globex Equity").
    name: str
    #: ``datetime64[D]`` (n,): the trading days, ascending.
    days: npt.NDArray[np.datetime64]
    #: int64 (n,): UTC ns of each session's open and close.
    open_ns: npt.NDArray[np.int64]
    close_ns: npt.NDArray[np.int64]
    #: int64 (n + 1,): where each trading day's moments start (its pre-open), and the end of
    #: the last one's: day k holds [start_ns[k], start_ns[k + 1]).
    start_ns: npt.NDArray[np.int64]

    def locate(self, ts_ns: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Index of the trading day each moment belongs to (see the module docstring).

        Raises
        ------
        InvalidInputError
            A moment outside the table (before 1990 or past :data:`LAST_DAY`).
        """
        ts = _as_ns(ts_ns)
        index = np.searchsorted(self.start_ns, ts, side="right").astype(np.int64) - 1
        if index.size and (int(index.min()) < 0 or int(index.max()) >= self.close_ns.size):
            bad = int(ts.min()) if int(index.min()) < 0 else int(ts.max())
            when = dt.datetime.fromtimestamp(bad / NS_PER_SECOND, tz=dt.UTC)
            raise InvalidInputError(
                f"timestamp {when:%Y-%m-%d %H:%M} UTC is outside the sessions fxstore's "
                f"calendar {self.name!r} holds ({FIRST_DAY} to {LAST_DAY}); the data's "
                "ts_recv is wrong."
            )
        return index

    def trading_day_of(self, ts_ns: npt.ArrayLike) -> npt.NDArray[np.datetime64]:
        """``datetime64[D]``: the trading day of each moment (see the module docstring)."""
        return self.days[self.locate(ts_ns)]

    def in_session(self, ts_ns: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Whether each moment is inside its trading day's session (not its pre-open or
        post-close)."""
        ts = _as_ns(ts_ns)
        k = self.locate(ts)
        return (ts >= self.open_ns[k]) & (ts < self.close_ns[k])

    def _index(self, day: dt.date) -> int | None:
        key = np.datetime64(day, "D")
        k = int(np.searchsorted(self.days, key))
        return k if k < self.days.size and self.days[k] == key else None

    def is_trading_day(self, day: dt.date) -> bool:
        """Whether `day` has a session."""
        return self._index(day) is not None

    def bounds(self, day: dt.date) -> tuple[int, int]:
        """UTC ns of the open and close of trading day `day`.

        Raises
        ------
        InvalidInputError
            `day` has no session (a weekend or holiday).
        """
        k = self._index(day)
        if k is None:
            raise InvalidInputError(
                f"{day} has no {self.name} session (a weekend or an exchange holiday)."
            )
        return int(self.open_ns[k]), int(self.close_ns[k])

    def span_of(self, ts_ns: int) -> tuple[dt.date, int, int]:
        """(trading day, first moment, end) of the trading day moment `ts_ns` belongs to."""
        k = int(self.locate(np.array([ts_ns], dtype=np.int64))[0])
        day = self.days[k].item()
        assert isinstance(day, dt.date)
        return day, int(self.start_ns[k]), int(self.start_ns[k + 1])

    def between(self, start: dt.date, end: dt.date) -> list[dt.date]:
        """Trading days in [start, end], in order."""
        lo = np.searchsorted(self.days, np.datetime64(start, "D"))
        hi = np.searchsorted(self.days, np.datetime64(end, "D"), side="right")
        return [d.item() for d in self.days[lo:hi]]

    def day_before(self, day: dt.date, n: int) -> dt.date:
        """The trading day `n` sessions before `day` (before the last trading day on or
        before it, when `day` has no session); ``n=0``: that day itself.

        Raises
        ------
        InvalidInputError
            The table holds no session that early.
        """
        k = int(np.searchsorted(self.days, np.datetime64(day, "D"), side="right")) - 1 - n
        if k < 0:
            raise InvalidInputError(
                f"no {self.name} session {n} trading days before {day}: the calendar starts "
                f"on {self.days[0]}."
            )
        found = self.days[k].item()
        assert isinstance(found, dt.date)
        return found

    def length_ns(self, day: dt.date) -> int:
        """The session's length (shorter on an early-close day)."""
        open_ns, close_ns = self.bounds(day)
        return close_ns - open_ns


def _utc_ns(column: object) -> npt.NDArray[np.int64]:
    """int64 UTC ns of a pandas column of tz-aware timestamps."""
    values = column.dt.tz_convert("UTC").dt.tz_localize(None)  # type: ignore[attr-defined]
    return np.asarray(values.to_numpy().astype("datetime64[ns]")).astype(np.int64)


@lru_cache(maxsize=16)
def _build(name: str) -> Sessions:
    try:
        import pandas_market_calendars as pmc
    except ImportError as exc:  # a declared dependency: only a broken install lacks it
        raise InvalidInputError(
            "fxstore's CME calendar needs pandas_market_calendars, which is not installed: "
            "pip install pandas_market_calendars (or reinstall fxstore)."
        ) from exc
    schedule = pmc.get_calendar(name).schedule(FIRST_DAY.isoformat(), LAST_DAY.isoformat())
    days = np.asarray(schedule.index.to_numpy().astype("datetime64[D]"))
    open_ns, close_ns = _utc_ns(schedule["market_open"]), _utc_ns(schedule["market_close"])
    start_ns = np.maximum(open_ns - PRE_OPEN_NS, np.r_[open_ns[0] - PRE_OPEN_NS, close_ns[:-1]])
    end_ns = close_ns[-1] + PRE_OPEN_NS
    return Sessions(
        name=name, days=days, open_ns=open_ns, close_ns=close_ns, start_ns=np.r_[start_ns, end_ns]
    )


def sessions(name: str = DEFAULT_CALENDAR) -> Sessions:
    """The session table of calendar `name` (one of :data:`CALENDARS`' values), built once
    per process from pandas_market_calendars.

    Raises
    ------
    InvalidInputError
        `name` is not a calendar fxstore uses.
    """
    if name not in CALENDARS.values() and name != TRADE_DATE_CALENDAR:
        raise InvalidInputError(
            f"unknown calendar {name!r}: fxstore uses {', '.join(sorted(CALENDARS.values()))}."
        )
    with _LOCK:
        return _build(name)


def trading_day_of(
    ts_ns: npt.NDArray[np.int64] | npt.NDArray[np.uint64], calendar: str = DEFAULT_CALENDAR
) -> npt.NDArray[np.datetime64]:
    """Map UTC timestamps (ns, any order, shape (n,)) to trading days, ``datetime64[D]``:
    each moment's session, or for a moment between two the one whose pre-open or post-close
    it is (see the module docstring)."""
    ts = _as_ns(ts_ns)
    if ts.size == 0:
        return np.empty(0, dtype="datetime64[D]")
    return sessions(calendar).trading_day_of(ts)


def session_bounds_ns(day: dt.date, calendar: str = DEFAULT_CALENDAR) -> tuple[int, int]:
    """UTC ns of the open and close of trading day `day` (see :meth:`Sessions.bounds`)."""
    return sessions(calendar).bounds(day)


def is_trading_day(day: dt.date, calendar: str = DEFAULT_CALENDAR) -> bool:
    """Whether `day` has a Globex session in `calendar`."""
    return sessions(calendar).is_trading_day(day)


def trading_days_between(
    start: dt.date, end: dt.date, calendar: str = DEFAULT_CALENDAR
) -> list[dt.date]:
    """Trading days in [start, end], in order."""
    return sessions(calendar).between(start, end)


def is_business_day(day: dt.date) -> bool:
    """Whether `day` is a CME trade date (a business day of expiry rules)."""
    return sessions(TRADE_DATE_CALENDAR).is_trading_day(day)


def business_days_before(day: dt.date, n: int) -> dt.date:
    """The n-th CME business day before `day` (n >= 1)."""
    table = sessions(TRADE_DATE_CALENDAR).days
    k = int(np.searchsorted(table, np.datetime64(day, "D"))) - n
    if k < 0:
        raise InvalidInputError(f"{day} is before fxstore's calendar ({FIRST_DAY}).")
    value = table[k].item()
    assert isinstance(value, dt.date)
    return value


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
