"""Which contracts of a root trade on a day: symbols, instrument ids, volume shares and carry.

Quarterly equity-index futures (H, M, U, Z) expire on the third Friday of their month. On a
trading day three outrights are live (front, next, deferred) plus the front-next calendar
spread. Volume migrates from the front to the next contract around the roll date (the Monday
of expiry week, :func:`fxstore.market.calendar.roll_date`): the next contract's share of the
outright volume is a logistic in the trading-day distance to that date, so the daily volume
crossover falls on the roll date itself. On expiry day the front and the spread stop at
08:30 Chicago (the equity-index final settlement is the opening quotation).

Instrument ids are a formula of (root, year, month), so the same contract has the same id in
every file and every run::

    block       = crc32(root) % 40                    # separates roots
    outright id = 100_000 + 10_000 * block + (year % 100) * 100 + month
    spread id   = 1_000_000 + outright id of the front leg

e.g. ESH4 (March 2024) -> 432403 and ESH4-ESM4 -> 1432403.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import zlib
from dataclasses import dataclass
from typing import Final, Literal

from fxstore.market.calendar import (
    MONTH_CODES,
    is_trading_day,
    quarterly_expiry,
    roll_date,
    trading_days_between,
)

__all__ = [
    "Instrument",
    "carry_points",
    "instruments_on",
    "next_share",
    "outright_id",
    "outright_symbol",
    "spread_id",
    "trading_days_from",
]

logger = logging.getLogger(__name__)

#: Width (in trading days) of the logistic that moves volume from front to next.
ROLL_WIDTH_DAYS: Final = 1.5
#: Share of the day's events that go to the deferred (third) outright.
DEFERRED_SHARE: Final = 0.01
#: Smallest share of outright volume the next contract keeps far from a roll.
NEXT_FLOOR: Final = 0.01
#: Spread share far from a roll, and its extra share at the height of the roll.
SPREAD_BASE_SHARE: Final = 0.02
SPREAD_ROLL_SHARE: Final = 0.08
_QUARTERLY: Final = (3, 6, 9, 12)
#: CME equity-index calendar spreads trade in a fifth of their legs' tick (ES 0.05, 0.25).
SPREAD_TICKS_PER_TICK: Final = 5
_DAYS_PER_QUARTER: Final = 365.25 / 4


@dataclass(frozen=True, slots=True)
class Instrument:
    """One tradable instrument of the synthetic market on one trading day."""

    #: Raw symbol: "ESH4" for an outright, "ESH4-ESM4" (front leg first) for a spread.
    raw_symbol: str
    #: DBN instrument_id, stable across days and files (see the module docstring).
    instrument_id: int
    #: Expiry (last trading day) of the outright, or of the spread's front leg.
    expiry: dt.date
    #: Place in the day's curve; the spread is front minus next.
    role: Literal["front", "next", "deferred", "spread"]
    #: Fraction of the day's events (and so, roughly, of its volume) this instrument gets.
    share: float
    #: Premium over the index fair value, in points (outrights), or the spread's fair price.
    carry: float
    #: Whether trading stops at 08:30 Chicago today (the front on its expiry day).
    stops_at_open: bool

    @property
    def is_spread(self) -> bool:
        """Whether this is the front-next calendar spread."""
        return self.role == "spread"

    def tick_fixed(self, outright_tick_fixed: int) -> int:
        """The instrument's price increment, DBN fixed point: a calendar spread ticks
        :data:`SPREAD_TICKS_PER_TICK` times finer than its legs (ES: 0.05 against 0.25)."""
        return (
            outright_tick_fixed // SPREAD_TICKS_PER_TICK if self.is_spread else outright_tick_fixed
        )


_ROLES: Final = ("front", "next", "deferred")


def _block(root: str) -> int:
    return zlib.crc32(root.encode("ascii")) % 40


def outright_symbol(root: str, year: int, month: int) -> str:
    """CME raw symbol of an outright, e.g. ("ES", 2024, 3) -> "ESH4" (one-digit year)."""
    return f"{root}{MONTH_CODES[month - 1]}{year % 10}"


def outright_id(root: str, year: int, month: int) -> int:
    """DBN instrument_id of the outright `root` `year`-`month`."""
    return 100_000 + 10_000 * _block(root) + (year % 100) * 100 + month


def spread_id(root: str, year: int, month: int) -> int:
    """DBN instrument_id of the calendar spread whose front leg is `root` `year`-`month`."""
    return 1_000_000 + outright_id(root, year, month)


def _quarterlies_from(day: dt.date, count: int) -> list[tuple[int, int]]:
    """The first `count` quarterly (year, month) contracts whose expiry is on or after `day`."""
    year, month = day.year, next(m for m in _QUARTERLY if m >= day.month)
    out: list[tuple[int, int]] = []
    while len(out) < count:
        if quarterly_expiry(year, month) >= day:
            out.append((year, month))
        month += 3
        if month > 12:
            year, month = year + 1, month - 12
    return out


def trading_days_from(origin: dt.date, day: dt.date) -> int:
    """Signed number of trading days from `origin` to `day`: trading days in [origin, day)."""
    if day >= origin:
        return len(trading_days_between(origin, day - dt.timedelta(days=1)))
    return -len(trading_days_between(day, origin - dt.timedelta(days=1)))


def next_share(day: dt.date, front_expiry: dt.date) -> float:
    """Next contract's share of the front+next outright volume on trading `day`.

    A logistic in the trading-day distance k to the front's roll date, centred half a day
    before it: the next contract has more volume than the front from the roll date on.
    """
    k = trading_days_from(roll_date(front_expiry), day)
    logistic = 1.0 / (1.0 + math.exp(-(k + 0.5) / ROLL_WIDTH_DAYS))
    return NEXT_FLOOR + (1.0 - 2.0 * NEXT_FLOOR) * logistic


def carry_points(
    day: dt.date, expiry: dt.date, points_per_quarter: float, multiplier: float
) -> float:
    """Premium of a contract over the index in points: proportional to time to expiry."""
    return points_per_quarter * multiplier * (expiry - day).days / _DAYS_PER_QUARTER


def instruments_on(
    root: str, day: dt.date, points_per_quarter: float, carry_multiplier: float
) -> tuple[Instrument, ...]:
    """The instruments trading on trading `day`: front, next, deferred, front-next spread.

    Shares sum to 1 over the returned instruments. `carry_multiplier` (around 1) scales the
    carry slowly from day to day.
    """
    if not is_trading_day(day):
        raise ValueError(f"{day} is not a CME trading day")
    contracts = _quarterlies_from(day, 3)
    expiries = [quarterly_expiry(y, m) for y, m in contracts]
    carries = [carry_points(day, e, points_per_quarter, carry_multiplier) for e in expiries]
    nxt = next_share(day, expiries[0])
    spread = SPREAD_BASE_SHARE + SPREAD_ROLL_SHARE * 4.0 * nxt * (1.0 - nxt)
    outright = 1.0 - spread - DEFERRED_SHARE
    shares = [outright * (1.0 - nxt), outright * nxt, DEFERRED_SHARE]
    stops = expiries[0] == day
    out = [
        Instrument(
            raw_symbol=outright_symbol(root, y, m),
            instrument_id=outright_id(root, y, m),
            expiry=expiries[k],
            role=_ROLES[k],
            share=shares[k],
            carry=carries[k],
            stops_at_open=stops and k == 0,
        )
        for k, (y, m) in enumerate(contracts)
    ]
    (y0, m0), (y1, m1) = contracts[0], contracts[1]
    out.append(
        Instrument(
            raw_symbol=f"{outright_symbol(root, y0, m0)}-{outright_symbol(root, y1, m1)}",
            instrument_id=spread_id(root, y0, m0),
            expiry=expiries[0],
            role="spread",
            share=spread,
            carry=carries[0] - carries[1],
            stops_at_open=stops,
        )
    )
    return tuple(out)
