"""fxstore's front month against Databento's continuous symbology (``ES.c.0``, ``ES.v.0``).

Databento resolves a continuous symbol per *UTC date*: ``symbology.resolve`` answers
intervals ``[d0, d1)`` of UTC dates, each mapped to one contract, switching at 00:00 UTC.
fxstore switches at the *session open*, 17:00 America/Chicago on the evening before the
trading day (22:00 or 23:00 UTC). So trading day D spans two UTC dates: its first hours
(from the open to midnight UTC) fall on UTC date D-1, the rest on D. A day *agrees* when
Databento's contract on both dates is fxstore's; on a roll day the two usually disagree on
the evening hours only (``"evening"``: Databento still on the old contract until 00:00 UTC).

Databento's rules also differ from fxstore's: ``c`` ranks by expiration (calendar), ``v``
by the previous day's volume, ``n`` by open interest; ``.0`` is the front.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.ingest.select.front_month import RollEntry
from fxstore.market.calendar import NS_PER_SECOND, Sessions

__all__ = [
    "DatabentoMapping",
    "DayComparison",
    "compare_with_databento",
    "read_resolve_json",
]


@dataclass(frozen=True, slots=True)
class DatabentoMapping:
    """A continuous symbol's resolution: UTC-date intervals [d0, d1) and their contract."""

    #: The continuous symbol ("ES.c.0").
    symbol: str
    #: Output symbology of the resolution ("raw_symbol" or "instrument_id").
    stype_out: str
    #: (d0, d1, symbol) rows, d1 exclusive, sorted.
    intervals: tuple[tuple[dt.date, dt.date, str], ...]

    def on(self, day: dt.date) -> str | None:
        """The contract Databento maps on UTC date `day`, or None outside every interval."""
        for d0, d1, symbol in self.intervals:
            if d0 <= day < d1:
                return symbol
        return None


def _date(value: object, where: str) -> dt.date:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError as err:
        raise SchemaError(
            f"{where}: {value!r} is not a date YYYY-MM-DD; pass the JSON that "
            "symbology.resolve returned."
        ) from err


def read_resolve_json(path: Path, symbol: str | None = None) -> DatabentoMapping:
    """Read the JSON of Databento's ``symbology.resolve`` (``stype_in="continuous"``).

    Parameters
    ----------
    path
        The saved response: ``{"result": {"ES.c.0": [{"d0": ..., "d1": ..., "s": ...}]},
        "stype_out": ..., ...}``.
    symbol
        The continuous symbol to read; None: the only one in the file.

    Raises
    ------
    InvalidInputError
        The file cannot be read, or holds several symbols and none was chosen.
    SchemaError
        Not a resolve response.
    """
    try:
        data: Any = json.loads(path.read_text())
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot read the file ({err.strerror}).") from err
    except json.JSONDecodeError as err:
        raise SchemaError(f"{path}: not JSON ({err.msg}, line {err.lineno}).") from err
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, dict) or not result:
        raise SchemaError(
            f"{path}: no `result` mapping of continuous symbols; pass the JSON that Databento's "
            "symbology.resolve returned (stype_in='continuous')."
        )
    if symbol is None:
        if len(result) > 1:
            raise InvalidInputError(
                f"{path}: holds {', '.join(sorted(result))}; pick one with --databento-symbol."
            )
        symbol = next(iter(result))
    if symbol not in result:
        raise InvalidInputError(f"{path}: no {symbol!r}; it holds {', '.join(sorted(result))}.")
    rows = result[symbol]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SchemaError(f"{path}: `result.{symbol}` must be a list of {{d0, d1, s}} objects.")
    intervals = sorted(
        (_date(r.get("d0"), str(path)), _date(r.get("d1"), str(path)), str(r.get("s")))
        for r in rows
    )
    return DatabentoMapping(symbol, str(data.get("stype_out", "raw_symbol")), tuple(intervals))


@dataclass(frozen=True, slots=True)
class DayComparison:
    """One trading day: fxstore's front month and Databento's on the day's two UTC dates."""

    trading_day: dt.date
    contract: str
    instrument_id: int
    #: UTC date of the session open (the evening before the trading day) and its mapping.
    open_utc_date: dt.date
    databento_at_open: str | None
    #: Databento's mapping on UTC date `trading_day` (the rest of the session).
    databento: str | None
    #: "yes" (both agree all session), "evening" (they differ from the open to 00:00 UTC
    #: only), "no" (they differ for the rest of the session), "n/a" (Databento maps nothing).
    agree: str

    def to_json(self) -> dict[str, object]:
        """The row as ``fxstore rolls --databento`` prints it."""
        return {
            "trading_day": self.trading_day.isoformat(),
            "contract": self.contract,
            "instrument_id": self.instrument_id,
            "open_utc_date": self.open_utc_date.isoformat(),
            "databento_at_open": self.databento_at_open,
            "databento": self.databento,
            "agree": self.agree,
        }


def compare_with_databento(
    schedule: Sequence[RollEntry], mapping: DatabentoMapping, table: Sessions
) -> list[DayComparison]:
    """Compare fxstore's schedule with Databento's mapping, one row per trading day."""
    rows = []
    for entry in schedule:
        open_ns, _ = table.bounds(entry.trading_day)
        open_date = dt.datetime.fromtimestamp(open_ns / NS_PER_SECOND, dt.UTC).date()
        ours = str(entry.instrument_id) if mapping.stype_out == "instrument_id" else entry.contract
        at_open, rest = mapping.on(open_date), mapping.on(entry.trading_day)
        if rest is None:
            agree = "n/a"
        elif rest != ours:
            agree = "no"
        else:
            agree = (
                "yes" if at_open in (None, ours) or open_date == entry.trading_day else "evening"
            )
        rows.append(
            DayComparison(
                trading_day=entry.trading_day,
                contract=entry.contract,
                instrument_id=entry.instrument_id,
                open_utc_date=open_date,
                databento_at_open=at_open,
                databento=rest,
                agree=agree,
            )
        )
    return rows
