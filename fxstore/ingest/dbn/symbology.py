"""Instrument symbology of DBN inputs: instrument_id → raw symbol, with time validity.

Two sources feed it: the metadata header's mappings (date intervals, one orientation or the
other depending on stype_in/stype_out) and SymbolMapping records (rtype 0x16, ns intervals)
that live-recorded files carry in the record stream.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.errors import InvalidInputError, SymbolNotFoundError
from fxstore.ingest.dbn.format import UNDEF_TIMESTAMP, DbnMetadata

__all__ = ["SymbolSpan", "Symbology"]

logger = logging.getLogger(__name__)

_NS_PER_DAY: Final = 86_400 * 1_000_000_000
_EPOCH: Final = dt.date(1970, 1, 1)


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("ascii", errors="replace")


def _date_to_ns(value: dt.date) -> int:
    return (value - _EPOCH).days * _NS_PER_DAY


@dataclass(frozen=True, slots=True)
class SymbolSpan:
    """An instrument_id meant `symbol` from `start_ns` (inclusive) to `end_ns` (exclusive)."""

    #: Start of validity, ns since the epoch, UTC (a metadata date maps to its midnight UTC).
    start_ns: int
    #: End of validity, exclusive; u64 max when open-ended.
    end_ns: int
    #: The raw symbol, e.g. "ESH1" (whatever the mapping's symbol side holds).
    symbol: str


class Symbology:
    """Instrument symbology collected from DBN metadata and SymbolMapping records.

    Maps DBN's integer ``instrument_id`` to the raw symbol (the contract, e.g. "ESH1"), with
    the time span in which the mapping holds: ids are reused by exchanges over time.

    Examples
    --------
    >>> sym = Symbology()
    >>> sym.add_span(5482, SymbolSpan(1609113600000000000, 1609200000000000000, "ESH1"))
    >>> sym.symbol_for(5482, dt.date(2020, 12, 28))
    'ESH1'
    """

    __slots__ = ("_spans",)

    def __init__(self) -> None:
        self._spans: dict[int, list[SymbolSpan]] = {}

    def add_span(self, instrument_id: int, span: SymbolSpan) -> None:
        """Record that `instrument_id` meant `span.symbol` during the span (idempotent)."""
        spans = self._spans.setdefault(int(instrument_id), [])
        if span not in spans:
            spans.append(span)
            spans.sort(key=lambda s: (s.start_ns, s.end_ns))

    def add_metadata(self, meta: DbnMetadata) -> None:
        """Add the mappings of a metadata header, in either orientation.

        With stype_out instrument_id the mapping key is the requested symbol (raw symbol, or
        each child contract for parent requests) and the interval's symbol is the id as text;
        with stype_in instrument_id it is the other way round. Other pairs carry no ids.
        """
        for interval in meta.mappings:
            if meta.stype_out == "instrument_id":
                id_text, symbol = interval.symbol, interval.raw_symbol
            elif meta.stype_in == "instrument_id":
                id_text, symbol = interval.raw_symbol, interval.symbol
            else:
                logger.debug(
                    "no instrument_id side in %s -> %s mappings", meta.stype_in, meta.stype_out
                )
                return
            if not id_text.isdigit() or not symbol:
                continue  # an unresolved interval: Databento leaves the symbol empty
            span = SymbolSpan(
                _date_to_ns(interval.start_date), _date_to_ns(interval.end_date), symbol
            )
            self.add_span(int(id_text), span)

    def add_mapping_records(self, rows: npt.NDArray[np.void]) -> None:
        """Add SymbolMapping records (a structured array of ``symbol_mapping_dtype``).

        The symbol is the output symbol (the raw symbol, e.g. "ESH4" for a parent "ES.FUT"
        subscription), or the input symbol where the output is an instrument_id: the rule
        databento's own InstrumentMap applies. An undefined start means "since always".
        """
        for row in rows.tolist():
            fields = dict(zip(rows.dtype.names or (), row, strict=True))
            out_symbol = _cstr(fields["stype_out_symbol"])
            symbol = _cstr(fields["stype_in_symbol"]) if out_symbol.isdigit() else out_symbol
            if not symbol:
                continue
            start_ns = 0 if fields["start_ts"] == UNDEF_TIMESTAMP else int(fields["start_ts"])
            span = SymbolSpan(start_ns, int(fields["end_ts"]), symbol)
            self.add_span(int(fields["instrument_id"]), span)

    def spans(self, instrument_id: int) -> tuple[SymbolSpan, ...]:
        """Return every span known for `instrument_id`, sorted by start (empty if unknown)."""
        return tuple(self._spans.get(int(instrument_id), ()))

    def instrument_ids(self) -> tuple[int, ...]:
        """Return the instrument_ids with at least one span, ascending."""
        return tuple(sorted(self._spans))

    def symbol_for(self, instrument_id: int, when: dt.date | int) -> str:
        """Return the raw symbol `instrument_id` had at `when`.

        Parameters
        ----------
        instrument_id
            DBN's integer instrument id.
        when
            A UTC calendar date (matches any span overlapping that day), or a timestamp in
            ns since the epoch (matches the span containing it). Where several spans match,
            the one that started last wins.

        Raises
        ------
        SymbolNotFoundError
            No span of `instrument_id` covers `when`.
        InvalidInputError
            `when` is neither a date nor an int.
        """
        if isinstance(when, dt.datetime) or not isinstance(when, dt.date | int | np.integer):
            raise InvalidInputError(
                f"`when` must be a datetime.date or an int ns timestamp, was {when!r}."
            )
        if isinstance(when, dt.date):
            lo, hi = _date_to_ns(when), _date_to_ns(when) + _NS_PER_DAY
        else:
            lo, hi = int(when), int(when) + 1
        matches = [s for s in self.spans(instrument_id) if s.start_ns < hi and lo < s.end_ns]
        if not matches:
            known = ", ".join(
                f"{s.symbol} [{s.start_ns}, {s.end_ns})" for s in self.spans(instrument_id)
            )
            raise SymbolNotFoundError(
                f"instrument_id {instrument_id} has no symbol at {when}; "
                f"known spans: {known or 'none'}. The DBN metadata does not map it on that "
                "date: check the inputs cover it."
            )
        return matches[-1].symbol

    def latest_symbols(self) -> dict[int, str]:
        """Return instrument_id → symbol of its latest-starting span."""
        return {iid: spans[-1].symbol for iid, spans in sorted(self._spans.items())}

    def __contains__(self, instrument_id: object) -> bool:
        return isinstance(instrument_id, int | np.integer) and int(instrument_id) in self._spans

    def __len__(self) -> int:
        return len(self._spans)

    def __repr__(self) -> str:
        return f"Symbology({len(self._spans)} instruments)"
