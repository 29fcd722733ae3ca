"""What to buy: a validated fetch request and the one Databento request per schema it makes.

A :class:`FetchRequest` is parsed once from the CLI's options; its :meth:`~FetchRequest.parts`
are the Databento requests it stands for (the main schema, then ``definition`` and
``statistics`` when asked), each with a stable :attr:`Part.key` that names it in the store.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Final, Literal, get_args

from fxstore.config._validate import validate_number
from fxstore.errors import InvalidInputError
from fxstore.store import validate_key

__all__ = ["SCHEMAS", "STYPES_IN", "FetchRequest", "Part", "Via"]

Via = Literal["auto", "batch", "stream"]
#: Databento's historical schemas (databento_dbn's Schema values).
SCHEMAS: Final = (
    "mbo",
    "mbp-1",
    "mbp-10",
    "tbbo",
    "trades",
    "bbo-1s",
    "bbo-1m",
    "cbbo-1s",
    "cbbo-1m",
    "tcbbo",
    "ohlcv-1s",
    "ohlcv-1m",
    "ohlcv-1h",
    "ohlcv-1d",
    "definition",
    "statistics",
    "status",
    "imbalance",
)
#: The input symbologies fxstore passes on (Databento's `stype_in`).
STYPES_IN: Final = ("parent", "raw_symbol", "continuous", "instrument_id")
#: How batch jobs are cut and packed: as the batch portal does by default, one DBN file per
#: UTC day, zstd-compressed (the layout `fxstore ingest` reads).
BATCH_LAYOUT: Final = {"encoding": "dbn", "compression": "zstd", "split_duration": "day"}
_SYMBOL_RE: Final = re.compile(r"[A-Za-z0-9._ /&^:-]+")


@dataclass(frozen=True, slots=True)
class Part:
    """One Databento request: one schema of a fetch request."""

    dataset: str
    schema: str
    symbols: tuple[str, ...]
    stype_in: str
    start: dt.date
    """First UTC day (inclusive)."""
    end: dt.date
    """Last UTC day (inclusive); Databento is sent the day after (its `end` is exclusive)."""

    @property
    def end_exclusive(self) -> dt.date:
        """The `end` Databento's API is given: the day after the last day."""
        return self.end + dt.timedelta(days=1)

    def to_json(self) -> dict[str, object]:
        """The request as JSON data (the store's record of what was bought)."""
        return {
            "dataset": self.dataset,
            "schema": self.schema,
            "symbols": list(self.symbols),
            "stype_in": self.stype_in,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            **BATCH_LAYOUT,
        }

    @property
    def key(self) -> str:
        """16 hex digits naming this request: equal requests have equal keys."""
        text = json.dumps(self.to_json(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def n_days(self) -> int:
        """Calendar days requested."""
        return (self.end - self.start).days + 1


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """What `fxstore fetch` buys from Databento's historical API (:func:`fxstore.fetch.fetch`)."""

    symbols: tuple[str, ...]
    """Databento symbols in `stype_in` symbology ("ES.FUT" for a parent), at most 2,000."""

    start: dt.date
    """First UTC day (inclusive)."""

    end: dt.date
    """Last UTC day (inclusive)."""

    dataset: str = "GLBX.MDP3"
    """Databento dataset code (CME Globex MDP 3.0)."""

    schema: str = "mbp-10"
    """Record schema of the main request."""

    stype_in: str = "parent"
    """Symbology of `symbols`: parent (all contracts of a product), raw_symbol, continuous
    or instrument_id."""

    with_definitions: bool = False
    """Also fetch the ``definition`` schema for the same symbols and days."""

    with_statistics: bool = False
    """Also fetch the ``statistics`` schema (open interest, settlement prices)."""

    max_cost_usd: float | None = None
    """Refuse to buy when what is left to buy costs more (US dollars); None: no limit."""

    via: Via = "auto"
    """batch (a batch job, resumable, downloads free for 30 days), stream
    (timeseries.get_range, billed again on every call) or auto (stream up to
    `stream_max_bytes` of billable size, batch above)."""

    stream_max_bytes: int = 100_000_000
    """Largest billable size that `via="auto"` streams."""

    def __post_init__(self) -> None:
        if not self.symbols:
            raise InvalidInputError("`--symbol` is empty: name at least one symbol, e.g. ES.FUT.")
        if len(self.symbols) > 2000:
            raise InvalidInputError(
                f"`--symbol` names {len(self.symbols)} symbols; Databento takes at most 2,000 "
                "per request: split the fetch."
            )
        for symbol in self.symbols:
            if not _SYMBOL_RE.fullmatch(symbol):
                raise InvalidInputError(f"`--symbol` {symbol!r} is not a Databento symbol.")
        validate_key(self.dataset, "dataset")
        _check_choice("schema", self.schema, SCHEMAS)
        _check_choice("stype-in", self.stype_in, STYPES_IN)
        _check_choice("via", self.via, get_args(Via))
        if self.end < self.start:
            raise InvalidInputError(
                f"`--end` {self.end} is before `--start` {self.start}: the range is empty."
            )
        if self.max_cost_usd is not None:
            validate_number("max-cost", self.max_cost_usd, above=-1e-12)
        validate_number("stream_max_bytes", self.stream_max_bytes, above=-1.0, integral=True)

    @property
    def schemas(self) -> tuple[str, ...]:
        """The schemas fetched, the main one first."""
        extra = [
            name
            for name, wanted in (
                ("definition", self.with_definitions),
                ("statistics", self.with_statistics),
            )
            if wanted and name != self.schema
        ]
        return (self.schema, *extra)

    def parts(self) -> tuple[Part, ...]:
        """One Databento request per schema, in :attr:`schemas` order."""
        return tuple(
            Part(self.dataset, schema, self.symbols, self.stype_in, self.start, self.end)
            for schema in self.schemas
        )


def _check_choice(option: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InvalidInputError(f"`--{option}` must be one of {', '.join(choices)}, was {value!r}.")
