"""Frozen configuration dataclasses, one module per stage, passed explicitly as the first argument.

Each field carries a docstring (the attribute docstring under it); the CLI reuses these as
help text. Derived values are properties; validation happens in ``__post_init__`` with the
shared checks of :mod:`fxstore.config._validate`.

- :mod:`~fxstore.config.synth`: :class:`SynthConfig` (the built-in synthetic market).
- :mod:`~fxstore.config.ingest`: :class:`IngestConfig`, :class:`BarConfig` (DBN -> bars).
- :mod:`~fxstore.config.features`: :class:`FeatureConfig` (bars -> fxcache).
- :mod:`~fxstore.config.env`: :class:`EnvConfig` (positions, costs, rolls, reward).
- :mod:`~fxstore.config.walkforward`: :class:`WalkForwardConfig` (folds).
- :mod:`~fxstore.config.backtest`: :class:`BacktestConfig` (baselines on the test windows).
- :mod:`~fxstore.config.train`: :class:`AgentConfig`, :class:`TrainConfig` (the agent's run).

This package imports no stage package (ingest, features, train, synth): stages import it.
Defaults that a stage owns are left None here and resolved by that stage (e.g.
``FeatureConfig.features``).
"""

from __future__ import annotations

from fxstore.config.backtest import BASELINE_POLICIES, BacktestConfig
from fxstore.config.env import EnvConfig, RewardMode, RollMode
from fxstore.config.features import FeatureConfig, ShardBy
from fxstore.config.ingest import (
    IMBALANCE_BAR_TYPES,
    BarConfig,
    BarType,
    IngestConfig,
    InstrumentSelection,
    RollConfig,
    RollRule,
    depth_symbol,
    parse_roll_months,
)
from fxstore.config.synth import SYNTH_FIRST_DAY, SYNTH_LAST_DAY, SplitMode, SynthConfig
from fxstore.config.train import (
    AgentConfig,
    DeviceChoice,
    ForecastMode,
    ForecastModel,
    TrainConfig,
)
from fxstore.config.walkforward import WalkForwardConfig

__all__ = [
    "BASELINE_POLICIES",
    "IMBALANCE_BAR_TYPES",
    "SYNTH_FIRST_DAY",
    "SYNTH_LAST_DAY",
    "AgentConfig",
    "BacktestConfig",
    "BarConfig",
    "BarType",
    "DeviceChoice",
    "EnvConfig",
    "FeatureConfig",
    "ForecastMode",
    "ForecastModel",
    "IngestConfig",
    "InstrumentSelection",
    "RewardMode",
    "RollConfig",
    "RollMode",
    "RollRule",
    "ShardBy",
    "SplitMode",
    "SynthConfig",
    "TrainConfig",
    "WalkForwardConfig",
    "depth_symbol",
    "parse_roll_months",
]
