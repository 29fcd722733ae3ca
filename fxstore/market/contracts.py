"""Futures contract symbols: parsing CME outright symbols and resolving their year digits.

A CME outright is ROOT + month code + year digits ("ESH4", "ESZ24", "6EM5", "CLF25").
Spreads ("ESH4-ESM4"), options and other roots sharing a prefix ("MESH4", "ESXH4" when
the root is "ES") are not outrights of that root.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Final

from fxstore.errors import InvalidInputError
from fxstore.market.calendar import MONTH_CODES

__all__ = [
    "Contract",
    "parse_outright",
    "root_of_outright",
    "root_of_parent",
    "validate_root",
]

_ROOT_RE: Final = re.compile(r"[A-Z0-9]{1,6}")


@dataclass(frozen=True, slots=True, order=True)
class Contract:
    """An outright futures contract; orders by delivery month (year, then month)."""

    year: int
    month: int
    #: The raw symbol as it appears in the data ("ESH4").
    symbol: str

    @property
    def month_code(self) -> str:
        """The CME month letter ("H" for March)."""
        return MONTH_CODES[self.month - 1]


def validate_root(root: str, param: str = "root") -> str:
    """Return `root` if it is a plausible CME product code (e.g. "ES", "6E"), else raise."""
    if not _ROOT_RE.fullmatch(root):
        raise InvalidInputError(
            f"`{param}` must be a CME product code of 1-6 capital letters or digits "
            f"(ES, NQ, 6E), was {root!r}."
        )
    return root


def root_of_parent(symbol: str) -> str:
    """The product root of a parent symbol: "ES.FUT" → "ES"; a bare root is returned as is."""
    root = symbol.removesuffix(".FUT")
    return validate_root(root, "symbol")


def _resolve_year(digits: str, month: int, on: dt.date) -> int:
    """The year meant by `digits` for a contract seen trading on `on`.

    Exchanges print one or two year digits. A contract trading on `on` delivers in the
    current month or later, and within a decade, so the year is the first one ending in
    `digits` whose delivery month is not before `on`'s month (ESH4 seen in 2024 is
    March 2024, not 2014; ESH0 seen in December 2029 is March 2030).
    """
    modulus = 10 ** len(digits)
    value = int(digits)
    year: int = on.year - on.year % modulus + value
    if (year, month) < (on.year, on.month):
        year += modulus
    return year


def parse_outright(symbol: str, root: str, on: dt.date) -> Contract | None:
    """Parse `symbol` as an outright of `root` seen on trading day `on`, or None if it is not.

    Parameters
    ----------
    symbol
        A raw exchange symbol, e.g. "ESH4", "ESH4-ESM4", "MESH4".
    root
        The product root, e.g. "ES".
    on
        A day the symbol traded; resolves the year digits.

    Examples
    --------
    >>> parse_outright("ESH4", "ES", dt.date(2024, 1, 2))
    Contract(year=2024, month=3, symbol='ESH4')
    >>> parse_outright("ESH4-ESM4", "ES", dt.date(2024, 1, 2)) is None
    True
    """
    if not symbol.startswith(root):
        return None
    rest = symbol[len(root) :]
    if len(rest) < 2 or len(rest) > 5 or rest[0] not in MONTH_CODES:
        return None
    digits = rest[1:]
    if not digits.isdigit() or len(digits) not in (1, 2, 4):
        return None
    month = MONTH_CODES.index(rest[0]) + 1
    year = int(digits) if len(digits) == 4 else _resolve_year(digits, month, on)
    return Contract(year=year, month=month, symbol=symbol)


_OUTRIGHT_RE: Final = re.compile(r"([A-Z0-9]{1,6}?)([FGHJKMNQUVXZ])(\d{1,2}|\d{4})")


def root_of_outright(symbol: str) -> str | None:
    """The product root of an outright symbol ("ESH4" → "ES", "6EM25" → "6E"), else None.

    Spreads ("ESH4-ESM4"), options and other symbols that are not ROOT + month + year give
    None.
    """
    match = _OUTRIGHT_RE.fullmatch(symbol)
    return match.group(1) if match else None
