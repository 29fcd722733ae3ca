"""Baseline policies on walk-forward test windows: what a trained agent has to beat.

Every policy trades the fold's test window through :func:`fxstore.train.env.evaluate_positions`
(same costs, rolls and close-out as the environment) and is scored by
:func:`fxstore.train.metrics.compute_metrics`. The baselines:

- ``flat``: never trades (PnL 0: the floor every cost-paying policy is measured against).
- ``long``: holds +1 contract from the first to the last row of the window (buy and hold).
- ``random``: a position drawn uniformly from :attr:`EnvConfig.positions` at every row
  (seeded by the seed and the window's first row, so reproducible and different per fold).
- ``ofi-sign``: the sign of the order-flow-imbalance feature at the row's close (+1, -1, or 0
  when it is 0): the naive signal a learner has to improve on.

:func:`run_backtest` runs them all on every fold and writes ``runs/<run-id>/``::

    config.json        the BacktestConfig, fxstore version, fxcache key and manifest checksum
    metrics.json       per fold and policy, and totals per policy over every test window
    fold00/equity.png  equity curves of every policy on the fold's test window (when plots)
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore import __version__
from fxstore.config import BASELINE_POLICIES, BacktestConfig, EnvConfig
from fxstore.errors import InvalidInputError
from fxstore.store import atomic_write_json, create_run_dir, fold_dir
from fxstore.train.data import open_cache
from fxstore.train.env import ContractSpec, Market, contract_spec, evaluate_positions
from fxstore.train.metrics import BacktestMetrics, compute_metrics, to_host
from fxstore.train.walkforward import Fold, make_folds

__all__ = [
    "BASELINES",
    "BacktestResult",
    "FoldResult",
    "baseline_positions",
    "baseline_results",
    "evaluate_fold",
    "fold_result",
    "policy_totals",
    "run_backtest",
    "write_equity_plots",
]

logger = logging.getLogger(__name__)

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

    Returns
    -------
    numpy float64 ``(hi - lo,)``: contracts held over each row, for
    :func:`fxstore.train.env.evaluate_positions` (which closes out on the last row).

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
    if policy == "flat":
        return np.zeros(n)
    if policy == "long":
        return np.ones(n)
    if policy == "random":
        rng = np.random.default_rng([seed, lo])
        return rng.choice(np.asarray(env_config.positions, dtype=np.float64), size=n)
    signal = to_host(market.feature(feature)[lo:hi]).astype(np.float64)
    return np.sign(np.nan_to_num(signal, nan=0.0))


@dataclass(frozen=True, slots=True, eq=False)
class FoldResult:
    """One policy's book of one fold's test window (host arrays, for reports and plots)."""

    fold: Fold
    policy: str
    """Policy name ("agent" or a baseline)."""
    metrics: BacktestMetrics
    pnl: F64
    """float64 ``(n_test_rows,)`` dollars booked per row, net of costs."""
    positions: F64
    """float64 ``(n_test_rows,)`` contracts held over each row (0 on the last)."""
    trading_day: npt.NDArray[np.int32]
    """int32 ``(n_test_rows,)`` trading day of each row, days since 1970-01-01."""

    def to_json(self) -> dict[str, object]:
        """The fold, policy and metrics as JSON data (NaN as None)."""
        return {"fold": self.fold.index, "policy": self.policy, "metrics": self.metrics.to_json()}


def fold_result(
    fold: Fold,
    policy: str,
    pnl: npt.NDArray[np.generic],
    positions: npt.NDArray[np.generic],
    trading_day: npt.NDArray[np.generic],
    *,
    bars_per_day: float,
    capital: float,
    seed: int,
) -> FoldResult:
    """Score a booked test window: the metrics of its per-row PnL and positions."""
    pnl_host = to_host(pnl).astype(np.float64, copy=False)
    positions_host = to_host(positions).astype(np.float64, copy=False)
    day_host = to_host(trading_day).astype(np.int32, copy=False)
    metrics = compute_metrics(
        pnl_host,
        positions_host,
        day_host,
        bars_per_day=bars_per_day,
        capital=capital,
        seed=seed,
    )
    return FoldResult(fold, policy, metrics, pnl_host, positions_host, day_host)


def evaluate_fold(
    market: Market,
    fold: Fold,
    positions: npt.ArrayLike,
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
    seed: int,
    policy: str = "agent",
) -> FoldResult:
    """Book `positions` over the fold's test window and score them.

    Parameters
    ----------
    positions
        ``(n_test_rows,)`` contracts to hold over each test row (a baseline's, or an agent's
        greedy positions from :func:`fxstore.train.env.policy_positions`).
    capital, seed
        Dollars the returns are measured on; seed of the Sharpe bootstrap.
    policy
        The name recorded in the result.
    """
    lo, hi = fold.test
    book = evaluate_positions(market, positions, lo, hi, env_config, spec)  # type: ignore[arg-type]
    return fold_result(
        fold,
        policy,
        book.pnl,
        book.positions,
        book.trading_day,
        bars_per_day=market.bars_per_day,
        capital=capital,
        seed=seed,
    )


def _iso_day(day: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=int(day))).isoformat()


def _fmt(value: float, spec: str) -> str:
    return "n/a" if value != value else format(value, spec)  # NaN != NaN


@dataclass(frozen=True, slots=True, eq=False)
class BacktestResult:
    """What :func:`run_backtest` produced."""

    run_dir: Path
    """The run folder, ``<root>/runs/<run-id>``."""
    symbol: str
    fxcache_key: str
    """Feature-set hash of the fxcache traded."""
    policies: tuple[str, ...]
    folds: tuple[FoldResult, ...]
    """Every (fold, policy) result, fold by fold, policies in `policies` order."""
    totals: Mapping[str, BacktestMetrics]
    """Policy -> metrics over every test window concatenated."""

    def to_json(self) -> dict[str, object]:
        """Per-fold and total metrics as JSON data (NaN as None): ``metrics.json``."""
        by_fold: dict[int, dict[str, object]] = {}
        for result in self.folds:
            entry = by_fold.setdefault(
                result.fold.index, {"fold": result.fold.to_json(), "policies": {}}
            )
            entry["policies"][result.policy] = result.metrics.to_json()  # type: ignore[index]
        return {
            "run_dir": str(self.run_dir),
            "symbol": self.symbol,
            "fxcache_key": self.fxcache_key,
            "policies": list(self.policies),
            "folds": list(by_fold.values()),
            "totals": {p: m.to_json() for p, m in self.totals.items()},
        }

    def format_table(self) -> str:
        """A text table: one row per fold and policy, then the totals per policy."""
        header = ("fold", "test span", "policy", "PnL $", "Sharpe(d)", "max DD $", "trades")
        rows = [header]
        for r in self.folds:
            span = f"{_iso_day(r.fold.test_span[0])}..{_iso_day(r.fold.test_span[1])}"
            rows.append((str(r.fold.index), span, r.policy, *_metric_cells(r.metrics)))
        if self.folds:
            first, last = self.folds[0].fold.test_span[0], self.folds[-1].fold.test_span[1]
            span = f"{_iso_day(first)}..{_iso_day(last)}"
            for policy, metrics in self.totals.items():
                rows.append(("all", span, policy, *_metric_cells(metrics)))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            "  ".join(
                c.ljust(w) if i < 3 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            for row in rows
        ]
        lines.insert(1, "-" * len(lines[0]))
        return "\n".join(lines)


def _metric_cells(m: BacktestMetrics) -> tuple[str, str, str, str]:
    return (
        _fmt(m.total_pnl, ",.2f"),
        _fmt(m.sharpe_daily, ".2f"),
        _fmt(m.max_drawdown, ",.2f"),
        str(m.n_trades),
    )


def baseline_results(
    market: Market,
    fold: Fold,
    policies: Sequence[str],
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
    seed: int,
) -> list[FoldResult]:
    """Every baseline in `policies` traded on the fold's test window, in that order."""
    return [
        evaluate_fold(
            market,
            fold,
            baseline_positions(policy, market, *fold.test, env_config, seed=seed),
            env_config,
            spec,
            capital=capital,
            seed=seed,
            policy=policy,
        )
        for policy in policies
    ]


def policy_totals(
    results: Sequence[FoldResult], market: Market, *, capital: float, seed: int
) -> dict[str, BacktestMetrics]:
    """Policy -> metrics over all its test windows concatenated (each window ends flat)."""
    totals = {}
    for policy in dict.fromkeys(r.policy for r in results):
        mine = [r for r in results if r.policy == policy]
        totals[policy] = compute_metrics(
            np.concatenate([r.pnl for r in mine]),
            np.concatenate([r.positions for r in mine]),
            np.concatenate([r.trading_day for r in mine]),
            bars_per_day=market.bars_per_day,
            capital=capital,
            seed=seed,
        )
    return totals


def write_equity_plots(folder: Path, results: Sequence[FoldResult]) -> None:
    """One ``fold<NN>/equity.png`` per fold of `results`: every policy on the same axes."""
    from fxstore.train.plots import plot_equity

    folds = {r.fold.index: r.fold for r in results}
    for index, fold in folds.items():
        mine = {r.policy: r for r in results if r.fold.index == index}
        plot_equity(fold_dir(folder, index) / "equity.png", fold, mine)


def run_backtest(
    config: BacktestConfig,
    root: Path,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> BacktestResult:
    """Run every baseline policy on every walk-forward test window of a symbol's fxcache.

    Parameters
    ----------
    config
        Symbol, policies, costs, folds, capital, seed, plots.
    root
        Store root, the folder holding ``fxcache/``; the run folder goes to ``runs/``.
    on_progress
        Called as ``on_progress(folds_done, n_folds)`` after each fold.

    Returns
    -------
    BacktestResult
        The run folder, every (fold, policy) result and the totals per policy.

    Raises
    ------
    SymbolNotFoundError
        `config.symbol` has no fxcache (the message lists those that have one).
    InvalidInputError
        Too few trading days for one fold, an unknown contract root, a bad fxcache.
    """
    root = Path(root)
    cache = open_cache(root, config.symbol, config.featureset)
    market = cache.market
    folds = make_folds(
        market.trading_day, config.walkforward, max_target_horizon_bars=cache.horizon
    )
    spec = contract_spec(config.symbol, config.env)  # an unknown root fails before the folder
    folder = create_run_dir(root, "backtest")
    atomic_write_json(
        folder / "config.json",
        {
            "kind": "backtest",
            "config": config.to_json(),
            "contract": {
                "root": spec.root,
                "multiplier": spec.multiplier,
                "tick_size": spec.tick_size,
            },
            "fxstore_version": __version__,
            "fxcache": cache.to_json(config.symbol),
        },
    )
    results = []
    for fold in folds:
        results += baseline_results(
            market,
            fold,
            config.policies,
            config.env,
            spec,
            capital=config.capital,
            seed=config.seed,
        )
        if on_progress is not None:
            on_progress(fold.index + 1, len(folds))
    result = BacktestResult(
        run_dir=folder,
        symbol=config.symbol,
        fxcache_key=cache.key,
        policies=config.policies,
        folds=tuple(results),
        totals=policy_totals(results, market, capital=config.capital, seed=config.seed),
    )
    atomic_write_json(folder / "metrics.json", result.to_json())
    if config.plots:
        write_equity_plots(folder, results)
    logger.info(
        "backtest of %s: %d folds x %d policies -> %s",
        config.symbol,
        len(folds),
        len(config.policies),
        folder,
    )
    return result
