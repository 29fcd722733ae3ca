"""Configuration of the built-in synthetic market (:mod:`fxstore.synth`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final, Literal, get_args

from fxstore.config._validate import validate_choice, validate_date, validate_in_range, validate_int
from fxstore.errors import InvalidInputError

SplitMode = Literal["trading-day", "utc-day"]
#: Dates the synthetic market can generate: its price walk starts on the first; contract
#: ids use two-digit years, unique within the century.
SYNTH_FIRST_DAY: Final = dt.date(2000, 1, 3)
SYNTH_LAST_DAY: Final = dt.date(2099, 12, 31)


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """The built-in synthetic market (:func:`fxstore.synth.generate_market`).

    It writes Databento-style GLBX.MDP3 MBP-10 DBN files for the parent symbol
    ``f"{root}.FUT"``: quarterly outrights rolling on CME's calendar, a calendar spread,
    U-shaped intraday activity and, optionally, a planted order-flow signal. Every trading
    day is generated from (seed, day) alone, so a sub-range reproduces the same bytes.
    """

    start: dt.date
    """First calendar day of the range (trading days in [start, end] are generated)."""

    end: dt.date
    """Last calendar day of the range, inclusive; on or after `start`."""

    events_per_day: int = 200_000
    """MBP-10 records per trading day, over all instruments (at least 1,000). Real ES
    days have 5-10 million; price moves per record are capped, so small days move less."""

    seed: int = 7
    """Seed of every random choice; the same seed gives byte-identical files."""

    signal_strength: float = 0.0
    """Strength in [0, 1] of the planted signal: a latent AR(1) factor that tilts trade
    aggressor sides and the next fair-value moves, so signed flow predicts the next return.
    0 makes the price a martingale that flow cannot predict. In information-coefficient
    units (see `signal_ic`), with the default half-life, strength 1 is an IC of about 0.38,
    0.5 about 0.20, 0.25 about 0.10 and 0.1 about 0.04."""

    signal_ic: float | None = None
    """The planted signal's information coefficient, in place of `signal_strength`: the
    correlation between the signal at a bar's close and the next bar's return (the
    default target horizon, one bar), for bars of the default ingest (about 75 a day on
    this market, some 18 minutes each on average). Realistic order-flow signals at these
    horizons have ICs of 0.02-0.1. The signal persists (`signal_half_life_events`), so
    its IC over several bars is higher (about 2x over four bars). None:
    `signal_strength` decides. Set one of the two, not both."""

    root: str = "ES"
    """CME product root (1-4 upper-case letters or digits); the parent symbol is
    f"{root}.FUT" and outrights are e.g. "ESH4"."""

    split: SplitMode = "trading-day"
    """One file per CME trading day ('trading-day', named by the trading day) or per UTC
    calendar day ('utc-day', as Databento batch downloads split: a session spans two files)."""

    tick_size: float = 0.25
    """Minimum price increment in index points; prices stay on this grid."""

    base_price: float = 4700.0
    """Index level in points that the daily price walk reverts to (ES: about 4000-5500)."""

    daily_volatility: float = 0.01
    """Standard deviation of a day's log return when `events_per_day` is large (>= ~5 M);
    below that, each record moves the fair value by at most 0.08 ticks (standard deviation)
    and days move less."""

    carry_points_per_quarter: float = 20.0
    """Premium in points of a contract over the index per quarter to its expiry: deferred
    contracts trade higher, so a roll jumps by about this much."""

    signal_half_life_events: int = 0
    """Half-life of the planted signal in records; 0 picks events_per_day // 10: about ten
    bars of the default ingest's target size (100 a day), some 2.3 hours of an average
    session. A signal that lasts several bars is what makes an edge of a realistic IC
    tradable after costs: positions are held for many bars, so one round trip's spread and
    fees are paid for by many bars of expected gain (a signal that decays within a bar
    flips the position every few bars, and its costs exceed its edge)."""

    compression_level: int = 3
    """zstd level of the .dbn.zst files (1-22)."""

    def __post_init__(self) -> None:
        start = validate_date("start", self.start, SYNTH_FIRST_DAY, SYNTH_LAST_DAY)
        end = validate_date("end", self.end, SYNTH_FIRST_DAY, SYNTH_LAST_DAY)
        if end < start:
            raise InvalidInputError(
                f"`end` must be on or after `start` ({start}), was {end}; swap them."
            )
        validate_int("events_per_day", self.events_per_day, 1_000, 100_000_000)
        validate_int("seed", self.seed, 0, 2**63 - 1)
        validate_in_range("signal_strength", self.signal_strength, 0.0, 1.0)
        if self.signal_ic is not None:
            validate_in_range("signal_ic", self.signal_ic, 0.0, 0.5)
            if self.signal_strength:
                raise InvalidInputError(
                    "set `signal_ic` or `signal_strength`, not both; "
                    f"were {self.signal_ic!r} and {self.signal_strength!r}."
                )
        root = self.root
        if not (
            isinstance(root, str)
            and 1 <= len(root) <= 4
            and root.isascii()
            and root.isalnum()
            and root == root.upper()
            and any(c.isalpha() for c in root)
        ):
            raise InvalidInputError(
                f"`root` must be 1-4 upper-case letters or digits (e.g. 'ES'), was {root!r}."
            )
        validate_choice("split", self.split, get_args(SplitMode))
        tick = validate_in_range("tick_size", self.tick_size, 1e-9, 1e6)
        if abs(tick * 1e9 - round(tick * 1e9)) > 1e-6:
            raise InvalidInputError(
                f"`tick_size` must be a multiple of 1e-9 (DBN's price scale), was {tick!r}."
            )
        validate_in_range("base_price", self.base_price, 1e-3, 1e9)
        validate_in_range("daily_volatility", self.daily_volatility, 1e-6, 0.2)
        validate_in_range("carry_points_per_quarter", self.carry_points_per_quarter, 0.0, 1e6)
        validate_int("signal_half_life_events", self.signal_half_life_events, 0, 10**9)
        validate_int("compression_level", self.compression_level, 1, 22)

    @property
    def parent_symbol(self) -> str:
        """The Databento parent symbol of the market, e.g. "ES.FUT"."""
        return f"{self.root}.FUT"

    @property
    def tick_fixed(self) -> int:
        """`tick_size` in DBN fixed point (1e-9 units): 0.25 -> 250_000_000."""
        return round(self.tick_size * 1_000_000_000)

    @property
    def signal_half_life(self) -> int:
        """Half-life of the planted signal in records (`signal_half_life_events` or auto)."""
        return self.signal_half_life_events or max(10, self.events_per_day // 10)
