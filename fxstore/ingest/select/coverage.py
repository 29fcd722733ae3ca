"""Whether the inputs hold anything a selection keeps, checked before any file is written.

An ingest of ``--symbol NQ.FUT`` over ES files, or of ``--instrument-mode id=N`` for an id the
files never list, would otherwise read every record, keep none and write an empty series.
:func:`check_selection` refuses it from the symbology alone, naming what the inputs hold.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from fxstore.config import InstrumentSelection
from fxstore.errors import InvalidInputError, SymbolNotFoundError
from fxstore.ingest.dbn.symbology import Symbology
from fxstore.market.contracts import parse_outright, root_of_outright
from fxstore.market.master import InstrumentMaster

__all__ = ["check_instrument_root", "check_selection", "describe_roots"]

#: Instruments named in a message before "…".
_SHOWN: Final = 6


def _span_day(start_ns: int) -> dt.date:
    return dt.datetime.fromtimestamp(start_ns / 1e9, dt.UTC).date()


def _roots(symbology: Symbology) -> tuple[dict[str, set[str]], set[str]]:
    """Outright symbols by product root, and the other symbols (spreads, options)."""
    by_root: dict[str, set[str]] = {}
    other: set[str] = set()
    for instrument_id in symbology.instrument_ids():
        for span in symbology.spans(instrument_id):
            root = root_of_outright(span.symbol)
            if root is None:
                other.add(span.symbol)
            else:
                by_root.setdefault(root, set()).add(span.symbol)
    return by_root, other


def describe_roots(symbology: Symbology) -> str:
    """What the inputs list, by product root: "ES (12 outrights: ESH4, ESM4, …)"."""
    by_root, other = _roots(symbology)
    parts = []
    for root, symbols in sorted(by_root.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join(sorted(symbols)[:_SHOWN]) + (", …" if len(symbols) > _SHOWN else "")
        parts.append(f"{root} ({len(symbols)} outrights: {shown})")
    if other:
        parts.append(f"{len(other)} spreads or other instruments")
    return "; ".join(parts) or "no instrument symbols"


def _describe_ids(symbology: Symbology) -> str:
    ids = symbology.instrument_ids()
    latest = symbology.latest_symbols()
    shown = ", ".join(f"{i} ({latest.get(i, '?')})" for i in sorted(ids)[:_SHOWN])
    return f"{len(ids)} instrument ids: {shown}" + (", …" if len(ids) > _SHOWN else "")


def check_selection(
    selection: InstrumentSelection, root: str | None, symbology: Symbology, where: str
) -> None:
    """Raise when the inputs (their `symbology`) list nothing that `selection` keeps.

    Inputs without symbology (no mappings in their metadata) pass: there the records
    themselves decide, and an ingest that keeps no record is refused after reading them.

    Raises
    ------
    SymbolNotFoundError
        Mode id=N and N is not listed; front-month mode and no outright of `root` is.
    """
    if len(symbology) == 0 or selection.mode == "all":
        return
    if selection.mode == "id":
        if selection.instrument_id not in symbology:
            raise SymbolNotFoundError(
                f"No instrument id {selection.instrument_id} in {where}; they list "
                f"{_describe_ids(symbology)}. Pick one (`fxstore scan` lists them) or "
                "--instrument-mode all."
            )
        return
    assert root is not None  # front-month plans always have a root
    found = any(
        parse_outright(span.symbol, root, _span_day(span.start_ns)) is not None
        for instrument_id in symbology.instrument_ids()
        for span in symbology.spans(instrument_id)
    )
    if not found:
        roots = sorted(_roots(symbology)[0])
        fix = (
            f"pass --symbol {roots[0]}.FUT"
            if len(roots) == 1
            else "pass --symbol ROOT.FUT for one of their roots"
        )
        raise SymbolNotFoundError(
            f"No outright of root {root!r} in {where}; they list {describe_roots(symbology)}: "
            f"{fix}."
        )


def _root_of_instrument(symbol: str) -> str | None:
    """The root of an outright, or of a spread's first leg ("ESH4-ESM4" → ES); else None."""
    return root_of_outright(symbol.split("-", 1)[0].split(":", 1)[0])


def check_instrument_root(
    selection: InstrumentSelection,
    symbol: str,
    symbology: Symbology,
    master: InstrumentMaster,
) -> None:
    """Refuse ``--instrument-mode id=N`` for an instrument of another root than `symbol`'s.

    The bars are stored (and their PnL booked) under `symbol`: MES.FUT over an ES
    instrument would book ES at MES's $5 a point. The instrument's symbols in the inputs'
    symbology and its definition record (where there is one) must be of `symbol`'s root
    ("MES" of "MES.FUT"). A store key that is no parent symbol (ROOT.FUT) is not checked.

    Raises
    ------
    InvalidInputError
        A symbol or definition of the instrument belongs to another root.
    """
    if selection.mode != "id" or not symbol.endswith(".FUT"):
        return
    root = symbol.removesuffix(".FUT")
    instrument_id = selection.instrument_id
    named = (
        [(s.symbol, "symbology") for s in symbology.spans(instrument_id or 0)]
        if (instrument_id in symbology)
        else []
    )
    named += [(f.raw_symbol, "definition") for f in master.definitions_of(instrument_id or 0)]
    for raw, where in named:
        found = _root_of_instrument(raw)
        if found is not None and found != root:
            raise InvalidInputError(
                f"--instrument-mode id={instrument_id} is {raw} (its {where}), of root "
                f"{found!r}, not of --symbol {symbol} (root {root!r}): its bars would be "
                f"stored and booked as {root}'s; pass --symbol {found}.FUT."
            )
