"""Configuration of ``fxstore backtest``: baseline policies on walk-forward test windows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from fxstore.config._validate import validate_at_least, validate_bool, validate_number
from fxstore.config.env import EnvConfig
from fxstore.config.walkforward import WalkForwardConfig
from fxstore.errors import InvalidInputError
from fxstore.store import validate_key

#: The baseline policies of ``fxstore backtest`` (see :mod:`fxstore.train.evaluate.results`);
#: 'linear' is fitted per fold on the training window
#: (:mod:`fxstore.train.evaluate.references.linear`);
#: 'oracle' trades the synthetic market's planted signal
#: (:mod:`fxstore.train.evaluate.references.oracle`).
BASELINE_POLICIES: Final = (
    "flat",
    "long",
    "random",
    "ofi-sign",
    "linear",
    "ceiling",
    "oracle",
)


@dataclass(frozen=True, slots=True)
class BacktestConfig:
    """What ``fxstore backtest`` runs: baseline policies on every walk-forward test window.

    Every policy trades the same test windows with the same costs (:mod:`fxstore.train.env.market`
    accounting); nothing is fitted, so the training windows only place the test windows
    exactly where a trained agent's would be, except for 'linear', which is fitted on each
    fold's training part and tuned on its validation slice.
    """

    symbol: str = "ES.FUT"
    """Store symbol of the fxcache, continuous (e.g. "ES.FUT")."""

    featureset: str | None = None
    """Feature-set hash under ``fxcache/<symbol>/``; None when there is one."""

    policies: tuple[str, ...] = BASELINE_POLICIES
    """Baseline policies to run, in report order: 'flat', 'long', 'random', 'ofi-sign',
    'linear' (a ridge model fitted on each fold's training window), 'ceiling' (the planted
    signal's projection on the features, fitted on each fold's training window) and 'oracle'
    (the planted signal itself); the last two only on a synthetic market (left out, and
    said so, where there is no planted signal)."""

    signal_dir: str | None = None
    """Folder of the planted signal's side files for 'oracle'; None: the store's synthetic
    market folder ``<root>/synth/<symbol>``."""

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
        validate_number("capital", self.capital, above=0.0)
        validate_at_least("seed", self.seed, 0, integral=True)
        validate_bool("plots", self.plots)
        if self.signal_dir is not None and not isinstance(self.signal_dir, str):
            raise InvalidInputError(f"`signal_dir` must be a path string, was {self.signal_dir!r}.")

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
            "signal_dir": self.signal_dir,
        }
