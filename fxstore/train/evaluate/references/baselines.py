"""The plain baselines: ``flat``, ``long``, ``random`` and ``ofi-sign``.

- ``flat``: never trades (PnL 0: the floor every cost-paying policy is measured against).
- ``long``: holds +1 contract from the first to the last row of the window (buy and hold).
- ``random``: a position drawn uniformly from :attr:`EnvConfig.positions` at every row
  (seeded by the seed and the window's first row, so reproducible and different per fold).
- ``ofi-sign``: the sign of the order-flow-imbalance feature at the row's close (+1, -1, or 0
  when it is 0): the naive signal a learner has to improve on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.config import BASELINE_POLICIES, EnvConfig
from fxstore.errors import InvalidInputError
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.references.base import ReferenceInputs, ReferencePositions
from fxstore.train.evaluate.references.linear import fit_linear, linear_positions
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.gpu.xp import to_host

__all__ = ["BASELINES", "BASELINE_REFERENCES", "baseline_positions"]

BASELINES: Final[tuple[str, ...]] = BASELINE_POLICIES
F64 = npt.NDArray[np.float64]


def baseline_positions(
    policy: str,
    market: Market,
    lo: int,
    hi: int,
    env_config: EnvConfig,
    *,
    seed: int,
    feature: str = "ofi_all",
    fold: Fold | None = None,
    spec: ContractSpec | None = None,
    capital: float = 100_000.0,
) -> F64:
    """The positions baseline `policy` holds over rows ``[lo, hi)`` of `market`.

    Parameters
    ----------
    policy
        One of :data:`BASELINES` (see the module docstring).
    lo, hi
        The window, e.g. a fold's test rows.
    env_config
        Its `positions` are what 'random' draws from.
    seed
        Seed of 'random' (mixed with `lo`, so windows differ and reruns agree).
    feature
        The feature whose sign 'ofi-sign' follows (``f_`` prefix optional).
    fold, spec, capital
        For 'linear' (required): the fold whose training part it is fitted on and whose
        validation slice picks its penalty and band, with these costs and capital.

    Returns
    -------
    numpy float64 ``(hi - lo,)``: contracts held over each row, for
    :func:`fxstore.train.env.market.evaluate_positions` (which closes out on the last row).

    Raises
    ------
    InvalidInputError
        Unknown `policy` (the message lists the choices), a bad window, or an unknown feature.
    """
    if policy not in BASELINES:
        raise InvalidInputError(f"unknown policy {policy!r}; choose from {', '.join(BASELINES)}.")
    if not 0 <= lo < hi <= market.n_rows:
        raise InvalidInputError(
            f"window [{lo}, {hi}) must lie in the market's {market.n_rows} rows."
        )
    n = hi - lo
    if policy in ("oracle", "ceiling"):
        raise InvalidInputError(
            f"policy {policy!r} trades the planted signal: use baseline_results with `planted`."
        )
    if policy == "linear":
        if fold is None or spec is None:
            raise InvalidInputError("policy 'linear' is fitted per fold: pass `fold` and `spec`.")
        model = fit_linear(market, fold, env_config, spec, capital=capital)
        return linear_positions(model, market, lo, hi)
    if policy == "flat":
        return np.zeros(n)
    if policy == "long":
        return np.ones(n)
    if policy == "random":
        rng = np.random.default_rng([seed, lo])
        return rng.choice(np.asarray(env_config.positions, dtype=np.float64), size=n)
    signal = to_host(market.feature(feature)[lo:hi]).astype(np.float64)
    return np.sign(np.nan_to_num(signal, nan=0.0))


@dataclass(frozen=True, slots=True)
class _Baseline:
    """A baseline that holds :func:`baseline_positions` over the test window."""

    name: str
    needs_planted: bool = False

    def positions(self, inputs: ReferenceInputs) -> ReferencePositions:
        test = baseline_positions(
            self.name, inputs.market, *inputs.fold.test, inputs.env, seed=inputs.seed
        )
        return ReferencePositions(test)


BASELINE_REFERENCES: Final = tuple(_Baseline(n) for n in ("flat", "long", "random", "ofi-sign"))
