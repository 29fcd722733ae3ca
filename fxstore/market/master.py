"""The instrument master: what each contract is worth, and until when it trades.

Two sources, in this order:

1. Databento ``definition`` records (a definition DBN file in the batch folder, or
   ``--definitions PATH``): each instrument's multiplier (``unit_of_measure_qty``), tick size
   (``min_price_increment``), expiration, activation and instrument class, as the exchange
   published them. Decoded with ``databento_dbn``, Databento's own decoder.
2. A built-in table of the CME roots people trade (:data:`ROOTS`): contract size, tick,
   listed months and the last-trading-day rule, from the exchange's contract specs.

A root in neither is an error naming ``--definitions``: fxstore never assumes ES's $50 for
a contract it does not know. Every fact carries its source, so manifests and ``fxstore scan``
can say where a number came from.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import databento_dbn
from databento_dbn import InstrumentDefMsg

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.market.calendar import (
    CALENDARS,
    DEFAULT_CALENDAR,
    MONTH_CODES,
    business_days_before,
    is_business_day,
    third_friday,
)
from fxstore.market.contracts import Contract, parse_outright, root_of_outright

__all__ = [
    "ROOTS",
    "ContractFacts",
    "InstrumentMaster",
    "RootSpec",
    "calendar_of_symbol",
    "check_facts",
    "contract_expiry",
    "first_notice_day",
    "last_trading_day",
    "read_definitions",
    "root_spec",
]

ExpiryRule = Literal[
    "third_friday",  # CME equity index: the third Friday of the contract month
    "fx_imm",  # CME FX: two business days before the third Wednesday of the contract month
    "energy_crude",  # 3 business days before the 25th of the month before delivery (CL)
    "energy_micro_crude",  # 4 business days before the 25th of the month before (MCL)
    "energy_gas",  # 3 business days before the first day of the delivery month (NG)
    "metals",  # the third last business day of the delivery month (COMEX)
    "treasury_long",  # 7 business days before the last business day of the month (ZN, ZB)
    "treasury_short",  # the last business day of the delivery month (ZF, ZT)
]
Source = Literal["definition", "builtin", "option"]


@dataclass(frozen=True, slots=True)
class RootSpec:
    """The contract specification of one CME product root."""

    root: str
    #: Dollars per price point of one contract (ES: 50; ZN: 1,000 per point of par).
    multiplier: float
    #: Minimum price increment, price points.
    tick_size: float
    #: Contract months listed, as CME month codes ("HMUZ").
    months: str
    expiry_rule: ExpiryRule
    #: Physically delivered (a first notice day precedes the last trading day).
    is_deliverable: bool
    #: CME product group, for its trading hours: equity, fx, energy, metals, rates.
    group: Literal["equity", "fx", "energy", "metals", "rates"]

    @property
    def calendar(self) -> str:
        """The pandas_market_calendars calendar of the root's Globex sessions."""
        return CALENDARS[self.group]

    @property
    def tick_value(self) -> float:
        """Dollars per tick of one contract."""
        return self.multiplier * self.tick_size


_Q, _ALL = "HMUZ", MONTH_CODES
#: The built-in table: CME Group contract specifications (contract unit, minimum price
#: fluctuation, listed cycle, termination of trading) of the most traded roots.
ROOTS: Final[Mapping[str, RootSpec]] = {
    spec.root: spec
    for spec in (
        RootSpec("ES", 50.0, 0.25, _Q, "third_friday", False, "equity"),
        RootSpec("MES", 5.0, 0.25, _Q, "third_friday", False, "equity"),
        RootSpec("NQ", 20.0, 0.25, _Q, "third_friday", False, "equity"),
        RootSpec("MNQ", 2.0, 0.25, _Q, "third_friday", False, "equity"),
        RootSpec("RTY", 50.0, 0.1, _Q, "third_friday", False, "equity"),
        RootSpec("M2K", 5.0, 0.1, _Q, "third_friday", False, "equity"),
        RootSpec("YM", 5.0, 1.0, _Q, "third_friday", False, "equity"),
        RootSpec("MYM", 0.5, 1.0, _Q, "third_friday", False, "equity"),
        RootSpec("EMD", 100.0, 0.1, _Q, "third_friday", False, "equity"),
        RootSpec("CL", 1000.0, 0.01, _ALL, "energy_crude", True, "energy"),
        RootSpec("MCL", 100.0, 0.01, _ALL, "energy_micro_crude", False, "energy"),
        RootSpec("NG", 10_000.0, 0.001, _ALL, "energy_gas", True, "energy"),
        RootSpec("GC", 100.0, 0.1, "GJMQVZ", "metals", True, "metals"),
        RootSpec("MGC", 10.0, 0.1, "GJMQVZ", "metals", True, "metals"),
        RootSpec("SI", 5000.0, 0.005, "HKNUZ", "metals", True, "metals"),
        RootSpec("HG", 25_000.0, 0.0005, "HKNUZ", "metals", True, "metals"),
        RootSpec("ZN", 1000.0, 1.0 / 64.0, _Q, "treasury_long", True, "rates"),
        RootSpec("ZB", 1000.0, 1.0 / 32.0, _Q, "treasury_long", True, "rates"),
        RootSpec("ZF", 1000.0, 1.0 / 128.0, _Q, "treasury_short", True, "rates"),
        RootSpec("ZT", 2000.0, 1.0 / 256.0, _Q, "treasury_short", True, "rates"),
        RootSpec("6E", 125_000.0, 0.00005, _Q, "fx_imm", True, "fx"),
        RootSpec("6J", 12_500_000.0, 0.0000005, _Q, "fx_imm", True, "fx"),
        RootSpec("6B", 62_500.0, 0.0001, _Q, "fx_imm", True, "fx"),
    )
}


def root_spec(root: str) -> RootSpec:
    """The built-in spec of `root`.

    Raises
    ------
    InvalidInputError
        A root the table does not hold; the message names ``--definitions``.
    """
    spec = ROOTS.get(root)
    if spec is None:
        raise InvalidInputError(
            f"no contract facts for root {root!r}: fxstore's table holds "
            f"{', '.join(sorted(ROOTS))}; pass Databento definition records for it with "
            "--definitions PATH (schema 'definition', same symbols and days)."
        )
    return spec


def calendar_of_symbol(symbol: str) -> str:
    """The session calendar of a series keyed `symbol` ("ES.FUT", "ES", "ESH4"): its root's
    product group's, or equity-index hours (:data:`DEFAULT_CALENDAR`) for a root fxstore's
    table does not hold."""
    root = symbol.split(".", 1)[0] if "." in symbol else (root_of_outright(symbol) or symbol)
    spec = ROOTS.get(root)
    return DEFAULT_CALENDAR if spec is None else spec.calendar


# --- last trading days -------------------------------------------------------------------------


def _last_business_day(year: int, month: int) -> dt.date:
    nxt = dt.date(year + month // 12, month % 12 + 1, 1)
    return business_days_before(nxt, 1)


def _month_before(year: int, month: int) -> tuple[int, int]:
    return (year, month - 1) if month > 1 else (year - 1, 12)


def _crude(year: int, month: int, n: int) -> dt.date:
    """n business days before the 25th of the month before delivery (the 25th if a business
    day, else the business day before it)."""
    y, m = _month_before(year, month)
    anchor = dt.date(y, m, 25)
    if not is_business_day(anchor):
        anchor = business_days_before(anchor, 1)
    return business_days_before(anchor, n)


def last_trading_day(spec: RootSpec, year: int, month: int) -> dt.date:
    """The last trading day of `spec`'s contract of `month` `year`, by its rule."""
    rule = spec.expiry_rule
    if rule == "third_friday":
        return third_friday(year, month)
    if rule == "fx_imm":
        third_wednesday = third_friday(year, month) - dt.timedelta(days=2)
        return business_days_before(third_wednesday, 2)
    if rule == "energy_crude":
        return _crude(year, month, 3)
    if rule == "energy_micro_crude":
        return _crude(year, month, 4)
    if rule == "energy_gas":
        return business_days_before(dt.date(year, month, 1), 3)
    last = _last_business_day(year, month)
    if rule == "metals":
        return business_days_before(last, 2)
    if rule == "treasury_long":
        return business_days_before(last, 7)
    return last  # treasury_short


def first_notice_day(spec: RootSpec, year: int, month: int) -> dt.date | None:
    """The first notice day of `spec`'s contract of `month` `year`, where it precedes the
    last trading day; None for cash-settled roots and for those whose notices start only
    after trading ends (CL, NG, CME FX).

    COMEX metals (GC, SI, HG) and CBOT Treasuries (ZN, ZB, ZF, ZT): the last business day of
    the month before the contract month, which is why longs roll out of them before the
    delivery month begins.
    """
    if not spec.is_deliverable or spec.group not in ("metals", "rates"):
        return None
    return _last_business_day(*_month_before(year, month))


def contract_expiry(root: str, contract: Contract) -> dt.date:
    """Last trading day of `contract` of `root`: by the root's rule where the built-in table
    knows it; otherwise the last day of the month before delivery, a conservative bound
    (it only makes a forced roll come early)."""
    spec = ROOTS.get(root)
    if spec is not None:
        return last_trading_day(spec, contract.year, contract.month)
    return dt.date(contract.year, contract.month, 1) - dt.timedelta(days=1)


# --- definitions ---------------------------------------------------------------------------------

_UNDEF_I64: Final = 2**63 - 1
_UNDEF_U64: Final = 2**64 - 1
_PRICE_SCALE: Final = 1e-9


@dataclass(frozen=True, slots=True)
class ContractFacts:
    """What one instrument is worth and when it trades, and where that was learned."""

    raw_symbol: str
    #: DBN instrument id (None for a fact of the built-in table).
    instrument_id: int | None
    #: Dollars per price point; None where the source does not say (spreads).
    multiplier: float | None
    tick_size: float
    #: Last trading day (exchange date); from the definition's expiration or the root's rule.
    expiration: dt.date | None
    #: First trading moment, ns UTC; None when unknown.
    activation_ns: int | None
    #: Databento instrument class: "F" future, "S" spread, "C"/"P" options, ...
    instrument_class: str
    source: Source

    def to_json(self) -> dict[str, object]:
        """The facts as manifests record them."""
        return {
            "raw_symbol": self.raw_symbol,
            "instrument_id": self.instrument_id,
            "multiplier": self.multiplier,
            "tick_size": self.tick_size,
            "expiration": None if self.expiration is None else self.expiration.isoformat(),
            "instrument_class": self.instrument_class,
            "source": self.source,
        }


#: A definition's multiplier or tick size more than this factor away from the built-in table's
#: for its root is implausible (MES is ES / 10: still plausible; ES at $50,000 is not).
_FACT_FACTOR: Final = 10.0
#: Outer bounds for a root the table does not hold (6J's $12.5M a point is the largest listed).
_MAX_MULTIPLIER: Final = 1e8
_MAX_TICK: Final = 1e4


def check_facts(facts: ContractFacts, on: dt.date | None = None) -> ContractFacts:
    """Return the facts of a future's definition if they are plausible, else raise.

    Plausible: a positive, finite multiplier and tick size, within a factor of 10 of the
    built-in table's for the contract's root (within wide outer bounds for other roots),
    and, when the contract has data on trading day `on`, an expiration not before it.
    Facts of the built-in table and of non-futures (spreads leave the multiplier unset)
    pass as they are.

    Raises
    ------
    InvalidInputError
        An implausible fact, naming the contract, the field and the value.
    """
    if facts.source != "definition" or facts.instrument_class != "F":
        return facts
    where = f"the definition of {facts.raw_symbol} (instrument id {facts.instrument_id})"
    fix = (
        "the definition record is damaged or of another product; pass correct ones with "
        "--definitions PATH (or --multiplier to set the multiplier)"
    )
    spec = ROOTS.get(root_of_outright(facts.raw_symbol) or "")
    root = spec.root if spec is not None else ""
    checks = (
        ("multiplier (unit_of_measure_qty)", facts.multiplier, spec and spec.multiplier),
        ("tick size (min_price_increment)", facts.tick_size, spec and spec.tick_size),
    )
    bound = {checks[0][0]: _MAX_MULTIPLIER, checks[1][0]: _MAX_TICK}
    for name, value, usual in checks:
        if value is None or not math.isfinite(value) or value <= 0:
            shown = "undefined" if value is None else f"{value:g}"
            raise InvalidInputError(f"{where} gives {name} {shown}: it must be > 0; {fix}.")
        if usual and not usual / _FACT_FACTOR <= value <= usual * _FACT_FACTOR:
            raise InvalidInputError(
                f"{where} gives {name} {value:g}, implausible for {root} (contract specs: "
                f"{usual:g}; more than {_FACT_FACTOR:g}x away); {fix}."
            )
        if not usual and value > bound[name]:
            raise InvalidInputError(f"{where} gives {name} {value:g}, implausibly large; {fix}.")
    if on is not None and facts.expiration is not None and on > facts.expiration:
        raise InvalidInputError(
            f"{where} says it expired on {facts.expiration}, but the data has its records "
            f"on trading day {on}; {fix}."
        )
    return facts


def _ns_to_date(ns: int) -> dt.date | None:
    if ns in (_UNDEF_I64, _UNDEF_U64):
        return None
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).date()


def _fixed(value: int) -> float | None:
    return None if value == _UNDEF_I64 else value * _PRICE_SCALE


def _decode_definitions(path: Path) -> list[InstrumentDefMsg]:
    import zstandard

    try:
        data = path.read_bytes()
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot read the file ({err.strerror}).") from err
    if data[:4] == b"\x28\xb5\x2f\xfd":
        try:
            with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as rd:
                data = rd.read()
        except zstandard.ZstdError as err:
            raise SchemaError(f"{path}: the Zstandard data is corrupt ({err}).") from err
    decoder = databento_dbn.DBNDecoder(
        upgrade_policy=databento_dbn.VersionUpgradePolicy.UPGRADE_TO_V3  # type: ignore[arg-type]
    )
    try:
        decoder.write(data)
        records = decoder.decode()
    except ValueError as err:  # databento_dbn's decoding errors
        raise SchemaError(f"{path}: not a readable DBN file ({err}).") from err
    meta = records[0] if records else None
    schema = meta.schema if isinstance(meta, databento_dbn.Metadata) else None
    if schema != databento_dbn.Schema.DEFINITION:
        name = "unknown" if schema is None else str(schema)
        raise SchemaError(
            f"{path}: the file holds schema {name!r}, not 'definition'; pass Databento "
            "definition records (schema='definition')."
        )
    return [r for r in records if isinstance(r, InstrumentDefMsg)]


def _undef_to_none(ns: int) -> int | None:
    return None if ns in (_UNDEF_I64, _UNDEF_U64) else ns


def read_definitions(paths: Sequence[Path]) -> list[ContractFacts]:
    """Decode Databento definition files into facts, one per instrument (its latest record).

    Raises
    ------
    InvalidInputError
        A file that cannot be read.
    SchemaError
        A file that is not DBN, or not of schema definition.
    """
    latest: dict[int, tuple[int, ContractFacts]] = {}
    for path in paths:
        for rec in _decode_definitions(Path(path)):
            facts = ContractFacts(
                raw_symbol=rec.raw_symbol,
                instrument_id=rec.instrument_id,
                multiplier=_fixed(rec.unit_of_measure_qty),
                tick_size=_fixed(rec.min_price_increment) or 0.0,
                expiration=_ns_to_date(rec.expiration),
                activation_ns=_undef_to_none(rec.activation),
                instrument_class=str(rec.instrument_class),
                source="definition",
            )
            if rec.instrument_id not in latest or latest[rec.instrument_id][0] <= rec.ts_recv:
                latest[rec.instrument_id] = (rec.ts_recv, facts)
    return [facts for _, facts in latest.values()]


class InstrumentMaster:
    """Contract facts by raw symbol: definitions first, the built-in table second.

    Examples
    --------
    >>> master = InstrumentMaster()
    >>> master.facts("ESH4", dt.date(2024, 1, 2)).multiplier
    50.0
    """

    def __init__(self, definitions: Iterable[ContractFacts] = ()) -> None:
        self._by_symbol = {f.raw_symbol: f for f in definitions}

    @classmethod
    def from_files(cls, paths: Sequence[Path]) -> InstrumentMaster:
        """A master of the definitions in `paths` (none: the built-in table only)."""
        return cls(read_definitions(paths)) if paths else cls()

    def knows_root(self, root: str) -> bool:
        """Whether the table or a definition has facts for outrights of `root`."""
        return root in ROOTS or any(root_of_outright(symbol) == root for symbol in self._by_symbol)

    def multiplier(self, raw_symbol: str, on: dt.date) -> tuple[float, Source]:
        """Dollars per price point of `raw_symbol` and where that came from.

        A spread's definition leaves the multiplier unset: it is its legs', from the first
        leg's facts ("ESH4-ESM4" → ESH4's).

        Raises
        ------
        InvalidInputError
            No definition or built-in spec gives one.
        """
        facts = self._by_symbol.get(raw_symbol)
        if facts is not None and facts.multiplier is not None:
            return facts.multiplier, facts.source
        leg = raw_symbol.split("-", 1)[0].split(":", 1)[0]
        found = self.facts(leg, on)
        if found.multiplier is None:
            raise InvalidInputError(
                f"no multiplier for {raw_symbol!r}: its definition leaves it unset; pass "
                "--multiplier."
            )
        return found.multiplier, found.source

    def resolve(self, raw_symbol: str, on: dt.date) -> tuple[float, Source, ContractFacts | None]:
        """(multiplier, its source, the symbol's own facts or None) of `raw_symbol`.

        The facts are None for a spread fxstore cannot parse and no definition names: its
        multiplier is then its first leg's.

        Raises
        ------
        InvalidInputError
            No multiplier is known for the symbol (see :meth:`multiplier`).
        """
        multiplier, source = self.multiplier(raw_symbol, on)
        try:
            return multiplier, source, self.facts(raw_symbol, on)
        except InvalidInputError:
            return multiplier, source, None

    @property
    def definitions(self) -> tuple[ContractFacts, ...]:
        """The facts of every instrument with a definition record."""
        return tuple(self._by_symbol.values())

    def definition(self, raw_symbol: str) -> ContractFacts | None:
        """The facts of `raw_symbol`'s definition record, None when it has none."""
        return self._by_symbol.get(raw_symbol)

    def definitions_of(self, instrument_id: int) -> list[ContractFacts]:
        """The definition facts of DBN instrument `instrument_id` (none, or one)."""
        return [f for f in self._by_symbol.values() if f.instrument_id == instrument_id]

    @property
    def n_definitions(self) -> int:
        """Instruments known from definition records."""
        return len(self._by_symbol)

    def facts(self, raw_symbol: str, on: dt.date) -> ContractFacts:
        """The facts of `raw_symbol` (an outright seen on trading day `on`, or any symbol
        with a definition).

        Raises
        ------
        InvalidInputError
            No definition for the symbol and no built-in spec for its root.
        """
        known = self._by_symbol.get(raw_symbol)
        if known is not None:
            return known
        root = root_of_outright(raw_symbol)
        if root is None:
            raise InvalidInputError(
                f"no contract facts for {raw_symbol!r}: it is not an outright fxstore can "
                "parse and no definition record names it; pass --definitions PATH."
            )
        spec = root_spec(root)
        contract = parse_outright(raw_symbol, root, on)
        expiry = None if contract is None else last_trading_day(spec, contract.year, contract.month)
        return ContractFacts(
            raw_symbol=raw_symbol,
            instrument_id=None,
            multiplier=spec.multiplier,
            tick_size=spec.tick_size,
            expiration=expiry,
            activation_ns=None,
            instrument_class="F",
            source="builtin",
        )
