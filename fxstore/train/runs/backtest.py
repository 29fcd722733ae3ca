"""``fxstore backtest``: every reference policy on every walk-forward test window, as a run.

:func:`run_backtest` scores the references (:mod:`fxstore.train.evaluate.references`) fold by
fold (:mod:`fxstore.train.evaluate.results`) and writes ``runs/<run-id>/``::

    config.json        the BacktestConfig, fxstore version, fxcache key and manifest checksum
    metrics.json       per fold and policy, and totals per policy over every test window
    fold00/equity.png  equity and drawdown of every policy on the fold's test window (when plots)
    equity_all.png     the same over every test window, one after another (when plots)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fxstore import __version__
from fxstore.config import BacktestConfig
from fxstore.store import atomic_write_json, create_run_dir, fold_dir
from fxstore.train.env.data import CachedMarket, open_cache
from fxstore.train.env.market import ContractSpec, contract_spec
from fxstore.train.evaluate.metrics import BacktestMetrics
from fxstore.train.evaluate.references import available, feature_notes
from fxstore.train.evaluate.references.oracle import PlantedSignal
from fxstore.train.evaluate.results import (
    BacktestResult,
    FoldResult,
    baseline_results,
    best_of_significance,
    choice_notes,
    load_oracle,
    policy_totals,
    reference_notes,
    with_ts_close,
)
from fxstore.train.evaluate.walkforward import Fold, make_folds
from fxstore.train.runs.plots import plot_equity, plot_equity_all
from fxstore.train.runs.status import (
    Headline,
    RunLock,
    RunStatus,
    StatusRecorder,
    now_iso,
    record_run,
)

__all__ = ["run_backtest", "write_equity_plots"]

logger = logging.getLogger(__name__)


def write_equity_plots(
    folder: Path, results: Sequence[FoldResult], totals: Mapping[str, BacktestMetrics]
) -> None:
    """One ``fold<NN>/equity.png`` per fold of `results` (every policy on the same axes) and
    ``equity_all.png`` over all folds, its legend from `totals`."""
    folds = {r.fold.index: r.fold for r in results}
    for index, fold in folds.items():
        mine = {r.policy: r for r in results if r.fold.index == index}
        plot_equity(fold_dir(folder, index) / "equity.png", fold, mine)
    plot_equity_all(folder / "equity_all.png", results, totals)


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
    folds = make_folds(
        cache.market.trading_day, config.walkforward, max_target_horizon_bars=cache.horizon
    )
    spec = contract_spec(config.symbol, config.env, cache.contracts)  # fails before the folder
    planted = load_oracle(root, config.symbol, config.signal_dir, cache)
    folder = create_run_dir(root, "backtest")
    lock = RunLock(folder)
    lock.acquire()
    status = RunStatus(folder.name, "backtest", config.symbol, now_iso(), "running", 0, len(folds))
    # no resume: a half-written run is noise, so any failure removes the folder
    with record_run(folder, lock, status, discard=lambda _recorder: True) as recorder:
        return _backtest_into(folder, config, cache, folds, spec, planted, on_progress, recorder)


def _backtest_into(
    folder: Path,
    config: BacktestConfig,
    cache: CachedMarket,
    folds: Sequence[Fold],
    spec: ContractSpec,
    planted: PlantedSignal,
    on_progress: Callable[[int, int], None] | None,
    recorder: StatusRecorder,
) -> BacktestResult:
    """Run the baselines of :func:`run_backtest` and write the run into `folder`."""
    market = cache.market
    atomic_write_json(
        folder / "config.json",
        {
            "kind": "backtest",
            "config": config.to_json(),
            "contract": spec.to_json(),
            "fxstore_version": __version__,
            "fxcache": cache.to_json(config.symbol),
        },
    )
    results: list[FoldResult] = []
    for fold in folds:
        results += baseline_results(
            market,
            fold,
            config.policies,
            config.env,
            spec,
            capital=config.capital,
            seed=config.seed,
            planted=planted.values,
        )
        recorder.fold_done()
        if on_progress is not None:
            on_progress(fold.index + 1, len(folds))
    results = with_ts_close(results, cache.ts_close)
    totals = policy_totals(results, market, capital=config.capital, seed=config.seed)
    best = best_of_significance(results, totals, capital=config.capital)
    result = BacktestResult(
        run_dir=folder,
        symbol=config.symbol,
        fxcache_key=cache.key,
        policies=available(config.policies, planted.values is not None, market.feature_names),
        folds=tuple(results),
        totals=totals,
        significance=() if best is None else (best,),
        notes=(
            *reference_notes(planted, config.policies, totals),
            *feature_notes(config.policies, market.feature_names),
            *choice_notes(results),
        ),
    )
    atomic_write_json(folder / "metrics.json", result.to_json())
    if config.plots:
        write_equity_plots(folder, results, totals)
    if best is not None:  # the headline of `fxstore runs`: the best policy's totals
        top = totals[best.policy]
        recorder.complete(Headline(best.policy, top.total_pnl, top.sharpe_daily))
    else:
        recorder.complete(None)
    logger.info(
        "backtest of %s: %d folds x %d policies -> %s",
        config.symbol,
        len(folds),
        len(config.policies),
        folder,
    )
    return result
