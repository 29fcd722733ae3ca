"""Frozen configuration dataclasses, one per stage, passed explicitly as the first argument.

Each field carries a docstring (the attribute docstring under it); the CLI reuses these as
help text. Derived values are properties; validation happens in ``__post_init__``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Final, Literal, get_args

from fxstore.errors import InvalidInputError

if TYPE_CHECKING:
    from fxstore.features.definitions import FeatureSet

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


def _check_number(name: str, value: object, *, above: float, integral: bool = False) -> float:
    """Return `value` as a float, or raise InvalidInputError unless it is finite and > `above`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"`{name}` must be a finite number, was {value!r}.")
    if value <= above:
        raise InvalidInputError(f"`{name}` must be > {above:g}, was {value!r}.")
    if integral and value != int(value):
        raise InvalidInputError(f"`{name}` must be a whole number, was {value!r}.")
    return float(value)


def _key_number(value: float) -> str:
    """Format a parameter for a store key: '5000', '0.5', '1e-05' (never '+' or a space)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value)).replace("+", "")


@dataclass(frozen=True, slots=True)
class BarConfig:
    """How ingest cuts one instrument's trading day into bars (:mod:`fxstore.ingest.bars`).

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

    multiplier: float = 50.0
    """Dollars per index point of one contract (ES: 50): scales dollar bars and
    `dollar_volume`."""

    def __post_init__(self) -> None:
        if self.bar_type not in get_args(BarType):
            choices = ", ".join(repr(name) for name in get_args(BarType))
            raise InvalidInputError(f"`bar_type` must be one of {choices}, was {self.bar_type!r}.")
        self._check_threshold()
        _check_number("target_bars_per_day", self.target_bars_per_day, above=0.0)
        _check_number("band", self.band, above=1.0)
        _check_number("ewma_span_bars", self.ewma_span_bars, above=0.0, integral=True)
        _check_number("ewma_span_trades", self.ewma_span_trades, above=0.0, integral=True)
        _check_number("multiplier", self.multiplier, above=0.0)

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
        threshold = _check_number("threshold", self.threshold, above=0.0)
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
        params |= {"bar_type": self.bar_type, "multiplier": float(self.multiplier)}
        digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:8]
        return f"{_BAR_KEY_PREFIX[self.bar_type]}{_key_number(size)}-{digest}"


SplitMode = Literal["trading-day", "utc-day"]
#: Dates the synthetic market can generate: its price walk starts on the first; contract
#: ids use two-digit years, unique within the century.
SYNTH_FIRST_DAY: Final = dt.date(2000, 1, 3)
SYNTH_LAST_DAY: Final = dt.date(2099, 12, 31)


def _synth_check_date(name: str, value: object) -> dt.date:
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise InvalidInputError(
            f"`{name}` must be a date (datetime.date, e.g. 2024-03-01), was {value!r}."
        )
    if not SYNTH_FIRST_DAY <= value <= SYNTH_LAST_DAY:
        raise InvalidInputError(
            f"`{name}` must be between {SYNTH_FIRST_DAY} and {SYNTH_LAST_DAY}, was {value}."
        )
    return value


def _synth_check_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"`{name}` must be a whole number, was {value!r}.")
    if value < low:
        raise InvalidInputError(f"`{name}` must be >= {low}, was {value!r}.")
    if value > high:
        raise InvalidInputError(f"`{name}` must be <= {high}, was {value!r}.")
    return value


def _synth_check_float(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"`{name}` must be a finite number, was {value!r}.")
    if not low <= value <= high:
        raise InvalidInputError(f"`{name}` must be in [{low:g}, {high:g}], was {value!r}.")
    return float(value)


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
    0 makes the price a martingale that flow cannot predict."""

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
    """Half-life of the planted signal in records; 0 picks events_per_day // 100 (about
    14 minutes of an average session)."""

    compression_level: int = 3
    """zstd level of the .dbn.zst files (1-22)."""

    def __post_init__(self) -> None:
        start = _synth_check_date("start", self.start)
        end = _synth_check_date("end", self.end)
        if end < start:
            raise InvalidInputError(
                f"`end` must be on or after `start` ({start}), was {end}; swap them."
            )
        _synth_check_int("events_per_day", self.events_per_day, 1_000, 100_000_000)
        _synth_check_int("seed", self.seed, 0, 2**63 - 1)
        _synth_check_float("signal_strength", self.signal_strength, 0.0, 1.0)
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
        if self.split not in get_args(SplitMode):
            raise InvalidInputError(
                f"`split` must be 'trading-day' or 'utc-day', was {self.split!r}."
            )
        tick = _synth_check_float("tick_size", self.tick_size, 1e-9, 1e6)
        if abs(tick * 1e9 - round(tick * 1e9)) > 1e-6:
            raise InvalidInputError(
                f"`tick_size` must be a multiple of 1e-9 (DBN's price scale), was {tick!r}."
            )
        _synth_check_float("base_price", self.base_price, 1e-3, 1e9)
        _synth_check_float("daily_volatility", self.daily_volatility, 1e-6, 0.2)
        _synth_check_float("carry_points_per_quarter", self.carry_points_per_quarter, 0.0, 1e6)
        _synth_check_int("signal_half_life_events", self.signal_half_life_events, 0, 10**9)
        _synth_check_int("compression_level", self.compression_level, 1, 22)

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
        return self.signal_half_life_events or max(10, self.events_per_day // 100)


@dataclass(frozen=True, slots=True)
class IngestConfig:
    """How `fxstore ingest` turns DBN MBP-10 files into the bar store (:mod:`fxstore.ingest`)."""

    symbol: str = "ES.FUT"
    """Store key and parent symbol: "ES.FUT" selects outrights of root ES (continuous over
    rolls in front-month mode). Letters, digits, '.', '_' and '-' only."""

    instrument_mode: str = "front-month"
    """Which records are kept: 'all', 'id=N' (one instrument id) or 'front-month' (the
    root's outright with the highest traded volume on the previous trading day)."""

    bars: BarConfig = field(default_factory=BarConfig)
    """The bar type and its parameters."""

    workers: int = 1
    """Processes building trading days in parallel (the output is the same for any count)."""

    chunk_records: int = 1 << 12
    """MBP-10 records decoded per chunk (the reader's fastest block size); memory per worker
    is a few chunks plus one day of the kept instrument's records."""

    force: bool = False
    """Rebuild every day even when its inputs and config are unchanged."""

    def __post_init__(self) -> None:
        from fxstore.ingest.contracts import root_of_parent
        from fxstore.ingest.instruments import parse_instrument_mode
        from fxstore.store import validate_key

        validate_key(self.symbol, "symbol")
        if self.instrument_mode.strip().lower() in ("front-month", "front_month"):
            root_of_parent(self.symbol)
        parse_instrument_mode(self.instrument_mode)
        _check_number("workers", self.workers, above=0.0, integral=True)
        _check_number("chunk_records", self.chunk_records, above=0.0, integral=True)

    def to_json(self) -> dict[str, object]:
        """The settings that decide the output (not workers, chunking or force), as JSON data."""
        from fxstore.ingest.instruments import parse_instrument_mode

        return {
            "symbol": self.symbol,
            "instrument_mode": str(parse_instrument_mode(self.instrument_mode)),
            "bars": asdict(self.bars),
        }


ShardBy = Literal["month", "year", "day"]


def _default_featureset() -> FeatureSet:
    from fxstore.features.definitions import default_featureset

    return default_featureset()


@dataclass(frozen=True, slots=True)
class FeatureConfig:
    """How `fxstore precompute` turns a bar series into an fxcache (:mod:`fxstore.features`)."""

    symbol: str = "ES.FUT"
    """Store symbol of the bars, continuous over rolls (e.g. "ES.FUT")."""

    instrument_key: str = "mbp10_front_month"
    """Bar series' instrument key: 'mbp10_front_month' or 'mbp10_instr<id>' (one continuous
    series; bars of several instruments interleaved are refused)."""

    bar_key: str | None = None
    """Bar series' bar key (e.g. 'dib-b100-946dfb62'); None picks the only one there is."""

    features: FeatureSet = field(default_factory=_default_featureset)
    """The features, targets and settings (default: the default feature set)."""

    shard_by: ShardBy = "month"
    """One shard per calendar 'month' (YYYY-MM.arrow), 'year' or 'day' of trading_day."""

    force: bool = False
    """Recompute even when the bars and the feature set are unchanged."""

    def __post_init__(self) -> None:
        from fxstore.features.definitions import FeatureSet
        from fxstore.store import validate_key

        validate_key(self.symbol, "symbol")
        validate_key(self.instrument_key, "instrument-key")
        if self.bar_key is not None:
            validate_key(self.bar_key, "bar-key")
        if not isinstance(self.features, FeatureSet):
            raise InvalidInputError(
                f"`features` must be a FeatureSet, was {type(self.features).__name__}."
            )
        if self.shard_by not in get_args(ShardBy):
            raise InvalidInputError(
                f"`shard_by` must be 'month', 'year' or 'day', was {self.shard_by!r}."
            )


@dataclass(frozen=True, slots=True)
class WalkForwardConfig:
    """How :func:`fxstore.train.walkforward.make_folds` cuts a symbol's rows into folds.

    Each fold is ``[training part][purge][validation][embargo][test]``, every edge on a
    trading-day boundary; counts are trading days present in the data, not calendar days.
    Every gap holds at least the longest target horizon in bars, so no label of a row used
    for fitting or early stopping looks into a later slice.
    """

    train_days: int = 60
    """Trading days in a training window (training part + purge + validation). Rolling: every
    window has exactly this many; anchored: the first window has at least this many."""

    test_days: int = 20
    """Trading days in each test window; test windows follow each other without a gap."""

    embargo_days: int | None = None
    """Least number of whole trading days in each gap (before the test window and before the
    validation slice). None: as few as hold `max_target_horizon_bars` bars. A gap is widened,
    never narrowed, until it holds that many bars."""

    anchored: bool = False
    """True: every training window starts at the first day and grows (expanding window);
    False: it rolls forward, `train_days` long."""

    min_train_days: int = 1
    """Least number of trading days left in the training part once the validation slice and
    its purge are cut from the end of the window."""

    validation_fraction: float = 0.0
    """Share of the training window's days (rounded, at least one day when > 0) kept at its
    end as a validation slice for early stopping; 0 for none. In [0, 1)."""

    def __post_init__(self) -> None:
        for name in ("train_days", "test_days", "min_train_days"):
            _check_number(name, getattr(self, name), above=0, integral=True)
        if self.embargo_days is not None:
            _check_number("embargo_days", self.embargo_days, above=-math.inf, integral=True)
            if self.embargo_days < 0:
                raise InvalidInputError(f"`embargo_days` must be >= 0, was {self.embargo_days}.")
        if not isinstance(self.anchored, bool):
            raise InvalidInputError(f"`anchored` must be True or False, was {self.anchored!r}.")
        if self.min_train_days > self.train_days:
            raise InvalidInputError(
                f"`min_train_days` ({self.min_train_days}) must be <= `train_days` "
                f"({self.train_days}); lower it or raise `train_days`."
            )
        fraction = self.validation_fraction
        _check_number("validation_fraction", fraction, above=-math.inf)
        if not 0.0 <= fraction < 1.0:
            raise InvalidInputError(f"`validation_fraction` must be in [0, 1), was {fraction!r}.")

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (for a run's ``config.json``)."""
        return asdict(self)
