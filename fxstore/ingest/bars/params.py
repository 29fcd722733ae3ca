"""The bar rule of one instrument-day, as the kernels read it: :class:`BarParams`.

A :class:`~fxstore.config.BarConfig` says what the user asked for (bar type, target bars per
day, band, spans); :func:`bar_params` turns it and the day's session into the numbers the
streaming kernels of :mod:`fxstore.ingest.bars.stream` compute with, by name: a NamedTuple of
scalars, which numba passes to a kernel as one typed record.
"""

from __future__ import annotations

import math
from typing import Final, NamedTuple

from fxstore.config import BarConfig
from fxstore.errors import InvalidInputError
from fxstore.ingest.dbn.format import FIXED_PRICE_SCALE

__all__ = [
    "CLOSE_REASONS",
    "NO_PRICE_HI",
    "REASON_INTERVAL",
    "REASON_MAX_TRADES",
    "REASON_MIN_TRADES",
    "REASON_PARTIAL",
    "REASON_THRESHOLD",
    "REASON_WARMUP",
    "RULE_IMBALANCE",
    "RULE_PLAIN",
    "RULE_TIME",
    "WEIGHT_DOLLARS",
    "WEIGHT_ONE",
    "WEIGHT_SIZE",
    "BarParams",
    "bar_params",
]

# How a bar closes: plain (tick, volume and dollar bars: Σ v reaches the threshold), time
# (an interval ends), imbalance (|θ| reaches the expected imbalance).
RULE_PLAIN: Final = 0
RULE_TIME: Final = 1
RULE_IMBALANCE: Final = 2
# Why a bar closed (the bar table's close_reason). threshold: Σ v or |θ| reached the
# threshold; min_trades: |θ| had reached it, the bar waited for its minimum trade count;
# max_trades: the bar reached its maximum trade count first; warmup: the time warm-up that
# opens an imbalance-bar day; interval: a time bar's interval ended; partial: the day's
# records ended before the bar's own rule closed it.
REASON_THRESHOLD: Final = 0
REASON_MIN_TRADES: Final = 1
REASON_MAX_TRADES: Final = 2
REASON_WARMUP: Final = 3
REASON_INTERVAL: Final = 4
REASON_PARTIAL: Final = 5
CLOSE_REASONS: Final = ("threshold", "min_trades", "max_trades", "warmup", "interval", "partial")
# What v, the weight of a trade, is: 1, its size, or its dollar value.
WEIGHT_ONE: Final = 0
WEIGHT_SIZE: Final = 1
WEIGHT_DOLLARS: Final = 2

#: `BarParams.price_hi` of a run without a price range: no price is implausible, and the
#: trades are not checked against the book either.
NO_PRICE_HI: Final = 2**63 - 2


class BarParams(NamedTuple):
    """One instrument-day's bar rule, fixed before its first record."""

    #: RULE_PLAIN, RULE_TIME or RULE_IMBALANCE.
    rule: int
    #: WEIGHT_ONE, WEIGHT_SIZE or WEIGHT_DOLLARS.
    weight: int
    #: Fixed-point prices per index point (DBN: 1e9).
    price_scale: int
    session_open_ns: int
    session_close_ns: int
    #: Time bars: the interval, ns (1 for other bars).
    interval_ns: int
    #: Plain bars: trades, contracts, dollars or seconds per bar; NaN for imbalance bars.
    threshold: float
    #: Dollars per index point of one contract.
    multiplier: float
    #: Imbalance bars: session length / target bars per day, ns: a target bar's duration.
    target_bar_ns: float
    #: Imbalance bars: a bar's trades stay within [T*/band, T*·band].
    band: float
    #: EWMA weights over bars (E0[T]) and over trades (E0[b·v] and its variance).
    alpha_bars: float
    alpha_trades: float
    #: Plausible prices, fixed point: a book state or trade outside [lo, hi] is counted.
    price_lo: int
    price_hi: int
    #: The contract's tick, fixed point: a trade off its grid is counted (0: not known).
    tick_fixed: int = 0


def _rule(config: BarConfig) -> tuple[int, int]:
    """(rule, weight kind) of the bar type."""
    rule = RULE_PLAIN
    if config.is_imbalance:
        rule = RULE_IMBALANCE
    elif config.bar_type == "time":
        rule = RULE_TIME
    if config.bar_type in ("tick", "tick_imbalance"):
        return rule, WEIGHT_ONE
    if config.bar_type in ("dollar", "dollar_imbalance"):
        return rule, WEIGHT_DOLLARS
    return rule, WEIGHT_SIZE  # volume bars, and the signed volume of time bars


def bar_params(
    config: BarConfig,
    session_open_ns: int,
    session_close_ns: int,
    price_range: tuple[float, float] | None = None,
    tick_size: float | None = None,
) -> BarParams:
    """The kernels' parameters for one instrument-day of session [open, close) ns UTC, with
    the contract's plausible prices (points; None: any price) and tick size (points; None:
    not known, no trade is checked against a grid).

    Raises
    ------
    InvalidInputError
        `config` has no multiplier: bars need the contract's (an ingest takes it from the
        instrument master; a direct caller sets ``BarConfig.multiplier``).
    """
    if config.multiplier is None:
        raise InvalidInputError(
            "`multiplier` is unset: bars need the contract's dollars per point; set "
            "BarConfig(multiplier=...) (fxstore.market.master.InstrumentMaster().facts(symbol, "
            "day).multiplier gives it)."
        )
    rule, weight = _rule(config)
    threshold = float(config.threshold or 0.0)
    return BarParams(
        rule=rule,
        weight=weight,
        price_scale=FIXED_PRICE_SCALE,
        session_open_ns=session_open_ns,
        session_close_ns=session_close_ns,
        interval_ns=round(threshold * 1e9) if rule == RULE_TIME else 1,
        threshold=math.nan if config.is_imbalance else threshold,
        multiplier=float(config.multiplier),
        target_bar_ns=(session_close_ns - session_open_ns) / config.target_bars_per_day,
        band=float(config.band),
        alpha_bars=2.0 / (config.ewma_span_bars + 1.0),
        alpha_trades=2.0 / (config.ewma_span_trades + 1.0),
        price_lo=_fixed(price_range[0]) if price_range else -(2**63) + 1,
        price_hi=_fixed(price_range[1]) if price_range else NO_PRICE_HI,
        tick_fixed=_fixed(tick_size) if tick_size and tick_size > 0 else 0,
    )


def _fixed(points: float) -> int:
    """Points to DBN fixed point, clipped inside int64 (UNDEF_PRICE stays out of range)."""
    return int(max(-(2**63) + 1, min(2**63 - 2, round(points * FIXED_PRICE_SCALE))))
