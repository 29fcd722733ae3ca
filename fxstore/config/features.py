"""Configuration of precompute: which bar series becomes which fxcache (:mod:`fxstore.features`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

from fxstore.config._validate import validate_choice
from fxstore.config.executor import ExecutorConfig
from fxstore.store import validate_key

if TYPE_CHECKING:  # for the annotation only: the feature-set type belongs to features/
    from fxstore.features.definitions import FeatureSet

ShardBy = Literal["month", "year", "day"]


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

    features: FeatureSet | None = None
    """The features, targets and settings; None: the default feature set
    (:func:`fxstore.features.definitions.resolve_featureset` decides, when precompute runs)."""

    shard_by: ShardBy = "month"
    """One shard per calendar 'month' (YYYY-MM.arrow), 'year' or 'day' of trading_day."""

    force: bool = False
    """Recompute even when the bars and the feature set are unchanged."""

    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    """Where the cache is built: in this process, or as one Ray task (the output is the same)."""

    def __post_init__(self) -> None:
        validate_key(self.symbol, "symbol")
        validate_key(self.instrument_key, "instrument-key")
        if self.bar_key is not None:
            validate_key(self.bar_key, "bar-key")
        validate_choice("shard_by", self.shard_by, get_args(ShardBy))
