"""Configuration of ingest: the bars cut from each trading day and how DBN files are read.

:class:`IngestConfig` and :class:`BarConfig` are recorded in every bar manifest
(:meth:`IngestConfig.to_json`); their fields and JSON are part of the store format.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final, Literal, get_args

from fxstore.config._validate import validate_at_least, validate_number
from fxstore.config.executor import ExecutorConfig
from fxstore.errors import InvalidInputError
from fxstore.store import validate_key

BarType = Literal[
    "tick_imbalance",
    "volume_imbalance",
    "dollar_imbalance",
    "tick",
    "volume",
    "dollar",
    "time",
]
#: Bar types that size themselves from `target_bars_per_day` (López de Prado's imbalance bars).
IMBALANCE_BAR_TYPES: Final[frozenset[str]] = frozenset(
    {"tick_imbalance", "volume_imbalance", "dollar_imbalance"}
)
#: The first part of a bar-key: the bar type, then the letter naming its size parameter.
_BAR_KEY_PREFIX: Final[dict[str, str]] = {
    "tick_imbalance": "tib-b",
    "volume_imbalance": "vib-b",
    "dollar_imbalance": "dib-b",
    "tick": "tick-t",
    "volume": "volume-v",
    "dollar": "dollar-d",
    "time": "time-s",
}


def _key_number(value: float) -> str:
    """Format a parameter for a store key: '5000', '0.5', '1e-05' (never '+' or a space)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value)).replace("+", "")


@dataclass(frozen=True, slots=True)
class BarConfig:
    """How ingest cuts one instrument's trading day into bars (:mod:`fxstore.ingest.bars.builder`).

    Imbalance bars follow López de Prado (Advances in Financial Machine Learning, 2.3.2)
    with causal, per-day guards that keep their count near `target_bars_per_day`; plain bars
    close after a fixed `threshold`. Every bar closes only at a record carrying F_LAST.
    """

    bar_type: BarType = "dollar_imbalance"
    """Bar family: 'tick_imbalance', 'volume_imbalance', 'dollar_imbalance' (sized by
    `target_bars_per_day`), or 'tick', 'volume', 'dollar', 'time' (sized by `threshold`)."""

    threshold: float | None = None
    """Plain bars only, required there: trades per tick bar, contracts per volume bar, dollars
    (price × size × `multiplier`) per dollar bar, seconds per time bar. Leave unset for
    imbalance bars."""

    target_bars_per_day: float = 100.0
    """Imbalance bars: bars aimed at per trading day (met exactly at a steady trade rate).
    100 gives ES bars of a few thousand trades: minutes long in regular hours, enough
    trades per bar for a stable estimate of the expected signed flow."""

    band: float = 3.0
    """Imbalance bars: a bar's length in trades is kept within [T*/band, T*·band], where T* is
    the day's trades so far per target bar; so bars per day stay within about
    [target/band, target·band]. Must be > 1."""

    ewma_span_bars: int = 20
    """Imbalance bars: span, in bars, of the EWMA of trades per bar (E0[T])."""

    ewma_span_trades: int = 50_000
    """Imbalance bars: span, in trades, of the EWMAs of the signed flow b·v and of its square
    (E0[b·v] and its variance). Spanning about ten bars keeps the noise in E0[b·v] well below
    the threshold's noise floor, so random imbalance does not pass for a trend."""

    multiplier: float | None = None
    """Dollars per price point of one contract (ES: 50, MES: 5, NQ: 20): scales dollar bars
    and `dollar_volume`. Unset (the default): each contract's own, from the instrument master
    (Databento definition records, else fxstore's table of CME roots); set it only to
    override the master for every contract of the run."""

    def __post_init__(self) -> None:
        if self.bar_type not in get_args(BarType):
            choices = ", ".join(repr(name) for name in get_args(BarType))
            raise InvalidInputError(f"`bar_type` must be one of {choices}, was {self.bar_type!r}.")
        self._check_threshold()
        validate_number("target_bars_per_day", self.target_bars_per_day, above=0.0)
        validate_number("band", self.band, above=1.0)
        validate_number("ewma_span_bars", self.ewma_span_bars, above=0.0, integral=True)
        validate_number("ewma_span_trades", self.ewma_span_trades, above=0.0, integral=True)
        if self.multiplier is not None:
            validate_number("multiplier", self.multiplier, above=0.0)

    def _check_threshold(self) -> None:
        if self.bar_type in IMBALANCE_BAR_TYPES:
            if self.threshold is not None:
                raise InvalidInputError(
                    f"`threshold` applies to plain bars only, was {self.threshold!r} for "
                    f"{self.bar_type!r}: imbalance bars are sized by `target_bars_per_day`."
                )
            return
        if self.threshold is None:
            raise InvalidInputError(f"`threshold` is required for {self.bar_type!r} bars.")
        threshold = validate_number("threshold", self.threshold, above=0.0)
        unit = {"tick": "trades", "volume": "contracts"}.get(self.bar_type)
        if unit and not threshold.is_integer():
            raise InvalidInputError(
                f"`threshold` must be a whole number of {unit}, was {self.threshold!r}."
            )
        if self.bar_type == "time" and round(threshold * 1e9) < 1:
            raise InvalidInputError(
                f"`threshold` must be at least 1 ns for time bars, was {self.threshold!r}."
            )

    @property
    def is_imbalance(self) -> bool:
        """Whether the bars are imbalance bars (sized by `target_bars_per_day`)."""
        return self.bar_type in IMBALANCE_BAR_TYPES

    @property
    def key(self) -> str:
        """The bar-key naming these bars in store paths, e.g. 'dib-b100-1f0c3a9e'.

        Type and size parameter, then 8 hex digits of a hash of every parameter that shapes
        the bars (so two configs never share a key); only ``[A-Za-z0-9._-]`` characters.
        """
        if self.is_imbalance:
            size = self.target_bars_per_day
            params: dict[str, object] = {
                "target_bars_per_day": float(self.target_bars_per_day),
                "band": float(self.band),
                "ewma_span_bars": int(self.ewma_span_bars),
                "ewma_span_trades": int(self.ewma_span_trades),
            }
        else:
            size = float(self.threshold or 0.0)
            params = {"threshold": size}
        params |= {"bar_type": self.bar_type}
        if self.multiplier is not None:  # unset: each contract's own, a fact of the data
            params |= {"multiplier": float(self.multiplier)}
        digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:8]
        return f"{_BAR_KEY_PREFIX[self.bar_type]}{_key_number(size)}-{digest}"


_ID_MODE: Final = re.compile(r"id=(\d{1,10})")


@dataclass(frozen=True, slots=True)
class InstrumentSelection:
    """Which records of the input an ingest keeps (the ``--instrument-mode`` option, parsed)."""

    mode: Literal["all", "id", "front-month"]
    #: The instrument id kept in mode "id"; None otherwise.
    instrument_id: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("all", "id", "front-month"):
            raise InvalidInputError(
                f"`mode` must be 'all', 'id' or 'front-month', was {self.mode!r}."
            )
        if (self.mode == "id") != (self.instrument_id is not None):
            raise InvalidInputError(
                f"`instrument_id` goes with mode 'id' only, was {self.instrument_id!r} for "
                f"{self.mode!r}."
            )

    @classmethod
    def parse(cls, text: str) -> InstrumentSelection:
        """Parse ``all``, ``id=N`` or ``front-month`` (case and ``_`` for ``-`` ignored)."""
        value = text.strip().lower()
        if value == "all":
            return cls("all")
        if value in ("front-month", "front_month"):
            return cls("front-month")
        match = _ID_MODE.fullmatch(value)
        if match and int(match.group(1)) < 2**32:
            return cls("id", int(match.group(1)))
        raise InvalidInputError(
            f"`--instrument-mode` must be all, id=N (N an instrument id < 2^32) or front-month, "
            f"was {text!r}."
        )

    @property
    def key(self) -> str:
        """The instrument-key of the store layout: mbp10, mbp10_instr<N>, mbp10_front_month."""
        if self.mode == "all":
            return "mbp10"
        if self.mode == "id":
            return f"mbp10_instr{self.instrument_id}"
        return "mbp10_front_month"

    def __str__(self) -> str:
        return f"id={self.instrument_id}" if self.mode == "id" else self.mode


FRONT_MONTH: Final = InstrumentSelection("front-month")

RollRule = Literal["volume", "open-interest", "calendar", "databento"]
AdjustMethod = Literal["none", "difference", "ratio"]
RollOffsetUnit = Literal["trading", "calendar"]
AdjustDirection = Literal["backward", "forward"]
_MONTH_CODES: Final = "FGHJKMNQUVXZ"
#: The deepest contract ``--depth`` may follow.
MAX_DEPTH: Final = 12


def depth_symbol(symbol: str, depth: int) -> str:
    """The store symbol of the `depth`-th contract of parent `symbol`: the parent itself
    for the front month (depth 1), else the parent and the depth ("ES.FUT.2", "ES.FUT.3").
    The root stays what precedes the first '.', as every stage reads it."""
    return symbol if depth == 1 else f"{symbol}.{depth}"


def parse_roll_months(text: str | None) -> str | None:
    """``--roll-months``: CME month codes ("GJMQVZ" or "G,J,M,Q,V,Z"), in calendar order."""
    if text is None or not text.strip():
        return None
    codes = text.replace(",", "").replace(" ", "").upper()
    bad = sorted({c for c in codes if c not in _MONTH_CODES})
    if bad or len(set(codes)) != len(codes):
        raise InvalidInputError(
            f"`--roll-months` must be distinct CME month codes (F G H J K M N Q U V X Z, e.g. "
            f"GJMQVZ or G,J,M,Q,V,Z), was {text!r}."
        )
    return "".join(c for c in _MONTH_CODES if c in codes)


@dataclass(frozen=True, slots=True)
class RollConfig:
    """How the front month of a continuous series is chosen, and how its prices are adjusted.

    Every rule is causal (decided from what was known before the session it applies to),
    forward only (never back to an earlier delivery month) and switches at the session
    boundary (17:00 Chicago); the reason of each day's choice goes into the roll schedule.
    """

    rule: RollRule = "volume"
    """'volume': the outright with the highest traded volume on the previous trading day;
    'open-interest': the highest open interest published before the session opens (Databento
    ``statistics`` records, --statistics); 'calendar': `offset` trading days before the last
    trading day, or before the first notice day of a deliverable product; 'databento': the
    contract a saved Databento ``symbology.resolve`` answer maps a continuous symbol
    ("ES.c.0") to on each trading day's UTC date (--roll-symbology)."""

    offset: int = 0
    """Calendar rule only: days (of `offset_unit`) before the last trading day (or first
    notice day) on which the next contract becomes the front month; 0 rolls on that day
    itself."""

    offset_unit: RollOffsetUnit = "trading"
    """Calendar rule only: what `offset` counts. 'trading': sessions of the product's
    calendar (the roll day is a trading day); 'calendar': calendar days, the next contract
    becoming the front on the first trading day on or after the anchor less `offset` days
    (a roll day on a weekend or holiday rolls on the next session)."""

    databento_symbol: str | None = None
    """Databento rule only: the continuous symbol of the --roll-symbology answer to follow
    ("ES.c.0"); None: the only one it holds."""

    months: str | None = None
    """Contract months the series holds, as CME month codes in calendar order ("GJMQVZ" for
    GC's liquid months); None: every listed month."""

    adjust: AdjustMethod = "none"
    """Adjusted prices next to the raw ones (adj_open, adj_high, adj_low, adj_close,
    adj_vwap): 'difference' (Panama canal: add each roll's gap) or 'ratio' (multiply by
    each roll's price ratio); 'none' keeps raw prices only."""

    direction: AdjustDirection = "backward"
    """'backward': the latest contract keeps its traded prices and history is shifted;
    'forward': the first contract keeps its prices and later ones are shifted."""

    depth: int = 1
    """Which contract of the curve the series holds: 1 the front month (chosen by `rule`),
    2 the next live contract after it (of `months`), 3 the one after that, ...; every depth
    rolls when the front month rolls. A depth above 1 is stored under its own symbol
    (:func:`depth_symbol`: "ES.FUT.2")."""

    def __post_init__(self) -> None:
        for name, value, choices in (
            ("--roll", self.rule, get_args(RollRule)),
            ("--roll-offset-unit", self.offset_unit, get_args(RollOffsetUnit)),
            ("--adjust", self.adjust, get_args(AdjustMethod)),
            ("--adjust-direction", self.direction, get_args(AdjustDirection)),
        ):
            if value not in choices:
                names = ", ".join(repr(c) for c in choices)
                raise InvalidInputError(f"`{name}` must be one of {names}, was {value!r}.")
        validate_at_least("--roll-offset", self.offset, 0, integral=True)
        validate_at_least("--depth", self.depth, 1, integral=True)
        if self.depth > MAX_DEPTH:
            raise InvalidInputError(
                f"`--depth` must be at most {MAX_DEPTH} (a contract that far out barely "
                f"trades), was {self.depth}."
            )
        if self.offset_unit != "trading" and self.rule != "calendar":
            raise InvalidInputError(
                f"`--roll-offset-unit` applies to `--roll calendar` only, was "
                f"{self.offset_unit!r} with `--roll {self.rule}`."
            )
        if self.databento_symbol is not None and self.rule != "databento":
            raise InvalidInputError(
                f"`--roll-continuous` applies to `--roll databento` only, was "
                f"{self.databento_symbol!r} with `--roll {self.rule}`."
            )
        if self.offset and self.rule != "calendar":
            raise InvalidInputError(
                f"`--roll-offset` applies to `--roll calendar` only, was {self.offset} with "
                f"`--roll {self.rule}`."
            )
        if self.months is not None and parse_roll_months(self.months) != self.months:
            raise InvalidInputError(
                f"`months` must be CME month codes in calendar order, was {self.months!r}: "
                "parse the text with parse_roll_months."
            )

    @property
    def is_default(self) -> bool:
        """Today's rule (previous-day volume, every month, raw prices only)."""
        return self == RollConfig()

    @property
    def key_suffix(self) -> str:
        """What the rule adds to the instrument-key ("" for the volume rule over every month):
        "-oi", "-cal5", "-cal7cd" (calendar days), "-vol-GJMQVZ"; the adjustment never
        changes the key (the day files are the same, only the manifest's transitions
        differ)."""
        if self.rule == "volume" and self.months is None:
            return ""
        unit = "cd" if self.offset_unit == "calendar" else ""
        followed = "" if self.databento_symbol is None else f"-{self.databento_symbol}"
        rule = {
            "volume": "-vol",
            "open-interest": "-oi",
            "calendar": f"-cal{self.offset}{unit}",
            "databento": f"-db{followed}",
        }
        return rule[self.rule] + ("" if self.months is None else f"-{self.months}")

    def to_json(self) -> dict[str, object]:
        """The settings as manifests record them (`offset_unit` only when not 'trading',
        so the manifests and fingerprints of series built before it stay as they were)."""
        out = asdict(self)
        if self.offset_unit == "trading":
            del out["offset_unit"]
        if self.databento_symbol is None:
            del out["databento_symbol"]
        if self.depth == 1:  # the front month: manifests of series before --depth stay
            del out["depth"]
        return out


@dataclass(frozen=True, slots=True)
class IngestConfig:
    """How `fxstore ingest` turns DBN MBP-10 files into the bar store (:mod:`fxstore.ingest`)."""

    symbol: str = "ES.FUT"
    """Store key and parent symbol: "ES.FUT" selects outrights of root ES (continuous over
    rolls in front-month mode). Letters, digits, '.', '_' and '-' only."""

    instrument_mode: InstrumentSelection = FRONT_MONTH
    """Which records are kept: all, one instrument id, or the front month (the root's
    outright with the highest traded volume on the previous trading day); parse the option's
    text with :meth:`InstrumentSelection.parse`."""

    bars: BarConfig = field(default_factory=BarConfig)
    """The bar type and its parameters."""

    workers: int = 1
    """Processes (local pool) or Ray tasks at once (``executor.kind == "ray"``) building
    trading days in parallel; 0 with Ray: one per CPU of the cluster. The output is the same
    for any count and either executor."""

    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    """Where the groups are built: the local process pool, or a Ray cluster."""

    chunk_records: int = 1 << 12
    """MBP-10 records decoded per chunk (the reader's fastest block size); memory per worker
    is a few chunks plus one day of the kept instrument's records."""

    force: bool = False
    """Rebuild every day even when its inputs and config are unchanged."""

    definitions: tuple[Path, ...] = ()
    """Databento ``definition`` files (or folders of them) to take contract facts from,
    besides any definition file among the inputs (``--definitions``)."""

    roll: RollConfig = field(default_factory=RollConfig)
    """Front-month mode: the roll rule and the price adjustment (``--roll``, ``--adjust``)."""

    statistics: tuple[Path, ...] = ()
    """Databento ``statistics`` files (or folders of them): open interest for
    ``--roll open-interest`` (``--statistics``)."""

    symbology: Path | None = None
    """A saved answer of Databento's ``symbology.resolve`` (``stype_in="continuous"``):
    the roll schedule of ``--roll databento`` (``--roll-symbology``)."""

    def __post_init__(self) -> None:
        validate_key(self.symbol, "symbol")
        if not isinstance(self.instrument_mode, InstrumentSelection):
            raise InvalidInputError(
                f"`instrument_mode` must be an InstrumentSelection, was "
                f"{self.instrument_mode!r}: parse the text with InstrumentSelection.parse."
            )
        if not (self.executor.is_ray and self.workers == 0):
            validate_number("workers", self.workers, above=0.0, integral=True)
        validate_number("chunk_records", self.chunk_records, above=0.0, integral=True)
        if not self.roll.is_default and self.instrument_mode.mode != "front-month":
            raise InvalidInputError(
                f"`--roll`, `--roll-months`, `--adjust` and `--depth` apply to --instrument-mode "
                f"front-month only, was {self.instrument_mode}."
            )

    @property
    def store_symbol(self) -> str:
        """The store key of the series: `symbol`, with the depth of ``--depth`` above 1
        (:func:`depth_symbol`)."""
        return depth_symbol(self.symbol, self.roll.depth)

    @property
    def instrument_key(self) -> str:
        """The instrument-key of the series: the mode's, plus the roll rule's suffix."""
        return self.instrument_mode.key + self.roll.key_suffix

    def to_json(self) -> dict[str, object]:
        """The settings that decide the output (not workers, chunking or force), as JSON data."""
        out: dict[str, object] = {
            "symbol": self.symbol,
            "instrument_mode": str(self.instrument_mode),
            "bars": asdict(self.bars),
        }
        if not self.roll.is_default:  # absent for today's rule: those series stay as they were
            out["roll"] = self.roll.to_json()
        return out
