"""Several seeds per fold: the agent's results as a mean and a spread, not one lucky draw.

With ``seeds = N`` each fold trains N agents, reported as policies ``agent`` (the first seed,
the run's `seed`), ``agent-s1`` .. ``agent-s{N-1}``. Over the seeds' pooled out-of-sample
totals the report gives mean ± sample standard deviation (ddof 1; n/a for one seed) of the
PnL, the daily Sharpe and the share of the oracle's PnL.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fxstore.train.evaluate.metrics import BacktestMetrics

__all__ = ["SeedSummary", "agent_policies", "mean_std", "seed_notes", "summarize_seeds"]

logger = logging.getLogger(__name__)


def agent_policies(n_seeds: int) -> tuple[str, ...]:
    """The policy names of `n_seeds` agents: ``agent``, ``agent-s1``, ..."""
    return ("agent", *(f"agent-s{k}" for k in range(1, n_seeds)))


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof 1) of the finite `values`; the std is NaN
    for one value, both are NaN for none."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan, math.nan
    std = float(np.std(finite, ddof=1)) if len(finite) > 1 else math.nan
    return float(np.mean(finite)), std


@dataclass(frozen=True, slots=True)
class SeedSummary:
    """Mean and sample standard deviation over seeds (NaN-valued entries left out)."""

    n_seeds: int
    pnl: tuple[float, float]
    """Pooled out-of-sample PnL in dollars: (mean, std)."""
    sharpe_daily: tuple[float, float]
    share_of_oracle: tuple[float, float]
    """PnL / the oracle's PnL; NaN without an oracle that made money."""

    def format_line(self) -> str:
        def f(pair: tuple[float, float], spec: str) -> str:
            mean, std = pair
            if not math.isfinite(mean):
                return "n/a"
            spread = format(std, spec) if math.isfinite(std) else "n/a"
            return f"{format(mean, spec)} ± {spread}"

        return (
            f"agent over {self.n_seeds} seeds (mean ± std): PnL $ {f(self.pnl, ',.2f')}, "
            f"Sharpe ann. {f(self.sharpe_daily, '.2f')}, "
            f"share of the oracle {f(self.share_of_oracle, '.1%')}"
        )


def summarize_seeds(totals: Mapping[str, BacktestMetrics], policies: Sequence[str]) -> SeedSummary:
    """Mean ± std over the seeds' `policies` of their pooled totals (and the oracle's share)."""
    oracle = totals.get("oracle")
    oracle_pnl = oracle.total_pnl if oracle is not None else math.nan
    mine = [totals[p] for p in policies if p in totals]
    shares = [m.total_pnl / oracle_pnl if oracle_pnl > 0 else math.nan for m in mine]
    return SeedSummary(
        n_seeds=len(mine),
        pnl=mean_std([m.total_pnl for m in mine]),
        sharpe_daily=mean_std([m.sharpe_daily for m in mine]),
        share_of_oracle=mean_std(shares),
    )


def seed_notes(totals: Mapping[str, BacktestMetrics], policies: Sequence[str]) -> tuple[str, ...]:
    """The report line of :func:`summarize_seeds`; none for a single seed."""
    if len(policies) < 2:
        return ()
    return (summarize_seeds(totals, policies).format_line(),)
