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
        from fxstore.ingest import parse_instrument_mode
        from fxstore.market.contracts import root_of_parent
        from fxstore.store import validate_key

        validate_key(self.symbol, "symbol")
        if self.instrument_mode.strip().lower() in ("front-month", "front_month"):
            root_of_parent(self.symbol)
        parse_instrument_mode(self.instrument_mode)
        _check_number("workers", self.workers, above=0.0, integral=True)
        _check_number("chunk_records", self.chunk_records, above=0.0, integral=True)

    def to_json(self) -> dict[str, object]:
        """The settings that decide the output (not workers, chunking or force), as JSON data."""
        from fxstore.ingest import parse_instrument_mode

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


#: The baseline policies of ``fxstore backtest`` (see :mod:`fxstore.train.backtest`).
BASELINE_POLICIES: Final = ("flat", "long", "random", "ofi-sign")
RollMode = Literal["roll", "close"]
RewardMode = Literal["dollars", "ticks", "vol"]


@dataclass(frozen=True, slots=True)
class EnvConfig:
    """How :class:`fxstore.train.env.VecEnv` trades fxcache bars and books their PnL.

    At the close of bar t the agent picks a target position from `positions`; it trades to
    it at that close, paying commission, half the spread at the close and slippage per
    contract traded, and holds it over bar t -> t+1. Money is float64 dollars.
    """

    positions: tuple[int, ...] = (-2, -1, 0, 1, 2)
    """Target positions the actions stand for, in contracts (signed, distinct, holding 0)."""

    commission_per_contract: float = 1.25
    """Dollars per contract per side (exchange, clearing and broker fees)."""

    slippage_ticks: float = 0.0
    """Ticks paid per contract traded beyond half the spread at the bar's close."""

    roll: RollMode = "roll"
    """At a contract roll: 'roll' carries the position into the new contract (closing it at
    the old contract's last bar and reopening it at the new one's first, paying both);
    'close' closes it at the old contract's last bar and starts the new contract flat."""

    reward: RewardMode = "vol"
    """What the agent is rewarded in: 'dollars' (net PnL), 'ticks' (net PnL in tick values of
    one contract) or 'vol' (net PnL over the dollar move of a one-sigma bar of one contract,
    sigma the causal rolling RMS of one-bar log returns)."""

    multiplier: float | None = None
    """Dollars per index point of one contract; None: from the symbol's contract spec."""

    tick_size: float | None = None
    """Minimum price increment in index points; None: from the symbol's contract spec."""

    vol_window: int = 200
    """Bars of the rolling RMS behind the 'vol' reward (past bars only)."""

    def __post_init__(self) -> None:
        positions = self.positions
        if (
            not isinstance(positions, tuple)
            or len(positions) < 2
            or any(isinstance(p, bool) or not isinstance(p, int) for p in positions)
            or len(set(positions)) != len(positions)
            or 0 not in positions
        ):
            raise InvalidInputError(
                f"`positions` must be two or more distinct whole numbers of contracts holding "
                f"0, e.g. -2,-1,0,1,2; was {positions!r}."
            )
        _check_number("commission_per_contract", self.commission_per_contract, above=-math.inf)
        _check_number("slippage_ticks", self.slippage_ticks, above=-math.inf)
        for name in ("commission_per_contract", "slippage_ticks"):
            if getattr(self, name) < 0:
                raise InvalidInputError(f"`{name}` must be >= 0, was {getattr(self, name)!r}.")
        if self.roll not in get_args(RollMode):
            raise InvalidInputError(f"`roll` must be 'roll' or 'close', was {self.roll!r}.")
        if self.reward not in get_args(RewardMode):
            raise InvalidInputError(
                f"`reward` must be 'dollars', 'ticks' or 'vol', was {self.reward!r}."
            )
        for name in ("multiplier", "tick_size"):
            if getattr(self, name) is not None:
                _check_number(name, getattr(self, name), above=0.0)
        _check_number("vol_window", self.vol_window, above=1, integral=True)

    @property
    def max_position(self) -> int:
        """The largest |position| an action can hold, in contracts."""
        return max(abs(p) for p in self.positions)

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (for a run's ``config.json``)."""
        return {**asdict(self), "positions": list(self.positions)}


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


@dataclass(frozen=True, slots=True)
class BacktestConfig:
    """What ``fxstore backtest`` runs: baseline policies on every walk-forward test window.

    Every policy trades the same test windows with the same costs (:mod:`fxstore.train.env`
    accounting); nothing is fitted, so the training windows only place the test windows
    exactly where a trained agent's would be.
    """

    symbol: str = "ES.FUT"
    """Store symbol of the fxcache, continuous (e.g. "ES.FUT")."""

    featureset: str | None = None
    """Feature-set hash under ``fxcache/<symbol>/``; None when there is one."""

    policies: tuple[str, ...] = ("flat", "long", "random", "ofi-sign")
    """Baseline policies to run, in report order: 'flat', 'long', 'random', 'ofi-sign'."""

    env: EnvConfig = field(default_factory=EnvConfig)
    """Positions, costs and roll handling of the book (its reward setting is unused)."""

    walkforward: WalkForwardConfig = field(default_factory=WalkForwardConfig)
    """How rows are cut into folds; only the test windows are traded."""

    capital: float = 100_000.0
    """Dollars the metrics' returns are measured on."""

    seed: int = 0
    """Seed of the 'random' policy and of the Sharpe bootstrap."""

    plots: bool = True
    """Write one equity-curve PNG per fold into the run folder (needs matplotlib)."""

    def __post_init__(self) -> None:
        from fxstore.store import validate_key

        validate_key(self.symbol, "symbol")
        if self.featureset is not None:
            validate_key(self.featureset, "featureset")
        policies = self.policies
        if not isinstance(policies, tuple) or not policies:
            raise InvalidInputError(
                f"`policies` must be a non-empty tuple of {', '.join(BASELINE_POLICIES)}, "
                f"was {policies!r}."
            )
        for policy in policies:
            if policy not in BASELINE_POLICIES:
                raise InvalidInputError(
                    f"unknown policy {policy!r}; choose from {', '.join(BASELINE_POLICIES)}."
                )
        if len(set(policies)) != len(policies):
            raise InvalidInputError(f"`policies` must not repeat a policy, was {policies!r}.")
        if not isinstance(self.env, EnvConfig):
            raise InvalidInputError(f"`env` must be an EnvConfig, was {type(self.env).__name__}.")
        if not isinstance(self.walkforward, WalkForwardConfig):
            raise InvalidInputError(
                f"`walkforward` must be a WalkForwardConfig, was {type(self.walkforward).__name__}."
            )
        _check_number("capital", self.capital, above=0.0)
        _check_number("seed", self.seed, above=-1, integral=True)
        if not isinstance(self.plots, bool):
            raise InvalidInputError(f"`plots` must be True or False, was {self.plots!r}.")

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (the run's ``config.json``)."""
        return {
            "symbol": self.symbol,
            "featureset": self.featureset,
            "policies": list(self.policies),
            "env": self.env.to_json(),
            "walkforward": self.walkforward.to_json(),
            "capital": float(self.capital),
            "seed": self.seed,
            "plots": self.plots,
        }


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The distributional (C51) double DQN of `fxstore train` (:mod:`fxstore.train.agent`).

    A dueling MLP over `n_atoms` return atoms in [`v_min`, `v_max`], trained from
    prioritised n-step replay with Adam, global-norm clipping and a target network.
    """

    hidden: int = 256
    """Width of each hidden layer."""

    layers: int = 2
    """Hidden layers (Linear + ReLU) in the shared torso."""

    n_atoms: int = 51
    """Atoms of the return distribution (C51: 51); > 1."""

    v_min: float = -10.0
    """Lowest return atom, in reward units."""

    v_max: float = 10.0
    """Highest return atom, in reward units; > `v_min`."""

    gamma: float = 0.99
    """Discount per environment step, in (0, 1]."""

    n_step: int = 3
    """Steps summed into each bootstrapped return (1 is one-step DQN)."""

    lr: float = 1e-4
    """Adam learning rate."""

    adam_beta1: float = 0.9
    """Adam decay of the first moment, in [0, 1)."""

    adam_beta2: float = 0.999
    """Adam decay of the second moment, in [0, 1)."""

    adam_eps: float = 1.5e-4
    """Adam's epsilon added to the root of the second moment (Rainbow: 1.5e-4)."""

    grad_clip: float = 10.0
    """Largest global L2 norm of the gradient; larger gradients are scaled down to it."""

    batch_size: int = 1024
    """Transitions per update."""

    replay_size: int = 200_000
    """Capacity of the replay buffer in transitions (oldest overwritten first)."""

    per_alpha: float = 0.6
    """Priority exponent of prioritised replay: 0 samples uniformly. In [0, 1]."""

    per_beta_start: float = 0.4
    """Importance-weight exponent at the start of training, in [0, 1]."""

    per_beta_end: float = 1.0
    """Importance-weight exponent at the end of training, in [0, 1]."""

    per_eps: float = 1e-6
    """Added to every priority so no transition has probability 0; > 0."""

    target_tau: float = 0.005
    """Polyak rate of the target network, in (0, 1]: target += tau · (online − target).
    With `target_period` > 0, 1.0 makes the periodic update a hard copy."""

    target_period: int = 0
    """Updates between target-network updates (hard copies when `target_tau` is 1.0);
    0 applies the Polyak update after every update."""

    eps_start: float = 1.0
    """Exploration rate (ε-greedy) at step 0, in [0, 1]."""

    eps_end: float = 0.05
    """Exploration rate after `eps_decay_steps`, in [0, 1]."""

    eps_decay_steps: int = 10_000
    """Steps over which ε falls linearly from `eps_start` to `eps_end`."""

    seed: int = 0
    """Seed of the weight initialisation (and of replay sampling and exploration)."""

    tf32: bool = False
    """On a GPU, let cuBLAS round float32 matmul inputs to TF32 (tensor cores: faster, about
    1e-3 relative error per product; still deterministic). numpy ignores it."""

    def __post_init__(self) -> None:
        if not isinstance(self.tf32, bool):
            raise InvalidInputError(f"`tf32` must be true or false, was {self.tf32!r}.")
        for name in ("hidden", "layers", "n_step", "batch_size", "replay_size"):
            _check_number(name, getattr(self, name), above=0, integral=True)
        _check_number("n_atoms", self.n_atoms, above=1, integral=True)
        _check_number("v_min", self.v_min, above=-math.inf)
        if _check_number("v_max", self.v_max, above=-math.inf) <= self.v_min:
            raise InvalidInputError(
                f"`v_max` must be > `v_min` ({self.v_min!r}), was {self.v_max!r}."
            )
        for name in ("lr", "adam_eps", "grad_clip", "per_eps"):
            _check_number(name, getattr(self, name), above=0.0)
        for name in ("gamma", "target_tau"):
            _agent_check_range(name, getattr(self, name), 0.0, 1.0, open_low=True)
        for name in ("adam_beta1", "adam_beta2"):
            _agent_check_range(name, getattr(self, name), 0.0, 1.0, open_high=True)
        for name in ("per_alpha", "per_beta_start", "per_beta_end", "eps_start", "eps_end"):
            _agent_check_range(name, getattr(self, name), 0.0, 1.0)
        for name in ("target_period", "eps_decay_steps", "seed"):
            _check_number(name, getattr(self, name), above=-math.inf, integral=True)
            if getattr(self, name) < 0:
                raise InvalidInputError(f"`{name}` must be >= 0, was {getattr(self, name)!r}.")

    def epsilon(self, step: int) -> float:
        """ε-greedy exploration rate at environment step `step` (linear decay, then flat)."""
        if step >= self.eps_decay_steps or self.eps_decay_steps == 0:
            return float(self.eps_end)
        done = max(step, 0) / self.eps_decay_steps
        return float(self.eps_start + (self.eps_end - self.eps_start) * done)

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (for a run's ``config.json``)."""
        return asdict(self)


def _agent_check_range(
    name: str,
    value: object,
    low: float,
    high: float,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> None:
    """Raise InvalidInputError unless `value` is a finite number in the given interval."""
    number = _check_number(name, value, above=-math.inf)
    if (number < low or (open_low and number == low)) or (
        number > high or (open_high and number == high)
    ):
        interval = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
        raise InvalidInputError(f"`{name}` must be in {interval}, was {value!r}.")


DeviceChoice = Literal["auto", "cpu", "cuda"]


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """What ``fxstore train`` does: environment, agent, folds, and how long each fold learns.

    Profiles (``smoke``, ``default``, ``production`` or a TOML file) fill these fields; see
    :func:`fxstore.train.profiles.load_profile`. Sizes left None are chosen from the device
    (a GPU's free memory) when the run starts and written to the run's ``config.json``.
    """

    symbol: str = "ES.FUT"
    """Store symbol of the fxcache, continuous (e.g. "ES.FUT")."""

    featureset: str | None = None
    """Feature-set hash under ``fxcache/<symbol>/``; None when there is one."""

    profile: str = "default"
    """Name of the profile the settings came from (recorded in the run)."""

    device: DeviceChoice = "auto"
    """'cuda' (CuPy), 'cpu' (numpy) or 'auto' (CUDA when CuPy finds a GPU)."""

    env: EnvConfig = field(default_factory=EnvConfig)
    """How the environment trades and books PnL."""

    agent: AgentConfig = field(default_factory=lambda: AgentConfig())
    """The learner; its `batch_size` and `replay_size` are replaced by the resolved sizes."""

    walkforward: WalkForwardConfig = field(
        default_factory=lambda: WalkForwardConfig(validation_fraction=0.2)
    )
    """How rows are cut into folds; the validation slice drives early stopping."""

    n_envs: int | None = None
    """Parallel environments stepped at once; None: 4,096 on a GPU, 64 on a CPU."""

    batch_size: int | None = None
    """Transitions per update; None: 16,384 on a GPU with >= 8 GB free, else the agent's."""

    replay_size: int | None = None
    """Replay capacity in transitions; None: what a quarter of a GPU's free memory holds
    (at most 2,000,000), or the agent's on a CPU."""

    episode_bars: int = 2000
    """Rows per training episode (capped at the training window), which ends flat."""

    env_steps: int = 20_000
    """Vectorised environment steps per fold (each adds `n_envs` transitions)."""

    learn_start: int = 10_000
    """Transitions in replay before the first update."""

    updates_per_step: int = 1
    """Learner updates per environment step once learning has started."""

    eval_every: int = 1000
    """Environment steps between validation evaluations (early stopping, progress)."""

    patience: int = 5
    """Validation evaluations without improvement before a fold stops early; 0: never."""

    checkpoint_every: int = 5000
    """Environment steps between checkpoints (0: only at the end of a fold)."""

    max_folds: int | None = None
    """Train on the first this many folds only; None: every fold."""

    capital: float = 100_000.0
    """Dollars the metrics' returns are measured on."""

    baselines: tuple[str, ...] = ("flat", "long", "random", "ofi-sign")
    """Baseline policies run on the same folds and costs for comparison."""

    seed: int = 0
    """Seed of everything random (weights, exploration, replay, episode starts)."""

    def __post_init__(self) -> None:
        from fxstore.store import validate_key

        validate_key(self.symbol, "symbol")
        if self.featureset is not None:
            validate_key(self.featureset, "featureset")
        if self.device not in get_args(DeviceChoice):
            raise InvalidInputError(
                f"`device` must be 'auto', 'cpu' or 'cuda', was {self.device!r}."
            )
        for name in ("n_envs", "batch_size", "replay_size", "max_folds"):
            if getattr(self, name) is not None:
                _check_number(name, getattr(self, name), above=0, integral=True)
        for name in ("episode_bars", "env_steps", "updates_per_step", "eval_every"):
            _check_number(name, getattr(self, name), above=0, integral=True)
        for name in ("learn_start", "patience", "checkpoint_every", "seed"):
            _check_number(name, getattr(self, name), above=-1, integral=True)
        if self.episode_bars < 2:
            raise InvalidInputError(f"`episode_bars` must be >= 2, was {self.episode_bars}.")
        _check_number("capital", self.capital, above=0.0)
        unknown = [b for b in self.baselines if b not in BASELINE_POLICIES]
        if unknown:
            raise InvalidInputError(
                f"unknown baseline {unknown[0]!r}; choose from {', '.join(BASELINE_POLICIES)}."
            )

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (the run's ``config.json``)."""
        out = asdict(self)
        out["env"] = self.env.to_json()
        out["baselines"] = list(self.baselines)
        return out
