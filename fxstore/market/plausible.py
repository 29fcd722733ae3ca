"""Plausible price ranges: what a price of each CME root can be, to flag absurd books.

A book with a bid of 5.58e9 or an ask of -8.57e9 index points is not a market, it is a
damaged record or a wrong price scale. The ranges below are wide on purpose (an order of
magnitude around every price the root has traded at, negative crude included): a price
outside them is certainly wrong, one inside them may still be. Calendar spreads trade at the
difference of two outrights, so theirs is symmetric around zero. A root the table does not
hold gets only a generic bound, and the manifest says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from fxstore.market.contracts import root_of_outright

__all__ = ["GENERIC_LIMIT", "PLAUSIBLE", "PriceRange", "plausible_range"]

#: Outright prices (points) no contract of the root can plausibly print outside of.
PLAUSIBLE: Final[Mapping[str, tuple[float, float]]] = {
    **dict.fromkeys(("ES", "MES"), (100.0, 100_000.0)),
    **dict.fromkeys(("NQ", "MNQ"), (100.0, 300_000.0)),
    **dict.fromkeys(("RTY", "M2K", "EMD"), (50.0, 50_000.0)),
    **dict.fromkeys(("YM", "MYM"), (1_000.0, 500_000.0)),
    **dict.fromkeys(("CL", "MCL"), (-200.0, 1_000.0)),  # CLK0 settled at -37.63 in April 2020
    "NG": (-10.0, 200.0),
    **dict.fromkeys(("GC", "MGC"), (10.0, 50_000.0)),
    "SI": (0.5, 2_000.0),
    "HG": (0.05, 100.0),
    **dict.fromkeys(("ZN", "ZB", "ZF", "ZT"), (20.0, 500.0)),
    "6E": (0.05, 10.0),
    "6J": (0.000_01, 0.1),
    "6B": (0.05, 10.0),
}
#: The bound of a root outside the table: |price| <= this many points.
GENERIC_LIMIT: Final = 1e9


class PriceRange(NamedTuple):
    """[lo, hi] in price points, and where it came from ("builtin" or "generic")."""

    lo: float
    hi: float
    source: str


def plausible_range(raw_symbol: str) -> PriceRange:
    """The plausible prices of `raw_symbol`: an outright's root's, a spread's around zero
    ("ESH4-ESM4": ±(hi - lo) of ES), the generic bound for a root the table does not hold."""
    legs = raw_symbol.split("-")
    root = root_of_outright(legs[0].split(":", 1)[0])
    known = PLAUSIBLE.get(root or "")
    if known is None:
        return PriceRange(-GENERIC_LIMIT, GENERIC_LIMIT, "generic")
    lo, hi = known
    if len(legs) > 1 or ":" in raw_symbol:
        return PriceRange(-(hi - lo), hi - lo, "builtin")
    return PriceRange(lo, hi, "builtin")
