"""A training run's bookkeeping around the loop: its folder and status, each fold's results
written as it finishes, and the run's totals at the end.

:func:`fxstore.train.loop.train` reads as the algorithm; what it records goes through here:
:func:`recording_run` makes (or takes over, on resume) the run folder, writes its
``config.json`` and keeps ``status.json`` true however the run ends; :func:`finish_fold`
writes a trained fold and counts it; :func:`interrupted` is the error a stopped run raises,
naming the command that resumes it; :func:`write_run_result` scores the pooled test windows
and writes ``metrics.json``, the equity plot and the run's headline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from fxstore.config import TrainConfig
from fxstore.errors import RunInterruptedError
from fxstore.store import atomic_write_json, fold_dir
from fxstore.train.env.data import CachedMarket
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.references import available, feature_notes
from fxstore.train.evaluate.references.oracle import PlantedSignal
from fxstore.train.evaluate.results import (
    BacktestResult,
    FoldResult,
    choice_notes,
    follow_notes,
    policy_totals,
    pooled_significance,
    reference_notes,
)
from fxstore.train.evaluate.seeds import agent_policies, seed_notes
from fxstore.train.evaluate.significance import SharpeSignificance
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.runs.folder import RunFolder
from fxstore.train.runs.plots import plot_equity_all
from fxstore.train.runs.status import (
    Headline,
    RunStatus,
    StatusRecorder,
    now_iso,
    record_run,
    resume_command,
    signal_name,
)

__all__ = ["finish_fold", "interrupted", "recording_run", "write_run_result"]

logger = logging.getLogger(__name__)


@contextmanager
def recording_run(
    root: Path,
    config: TrainConfig,
    resumed: RunFolder | None,
    folds: Sequence[Fold],
    sizes: Mapping[str, int],
    read: tuple[CachedMarket, ContractSpec],
    on_start: Callable[[str], None] | None,
) -> Iterator[tuple[RunFolder, StatusRecorder]]:
    """The run's folder (`resumed`, or a new one with its ``config.json``: the settings, the
    cache read and the contract facts its PnL is booked at, `read`) and its status recorder,
    for the ``with`` block that trains it.

    A new run that ends, however, with nothing to resume (no finished fold and no
    checkpoint) leaves no folder; any other ends with ``status.json`` saying how."""
    run = resumed if resumed is not None else RunFolder.create(root, "train")
    status = RunStatus(
        run.run_id,
        "train",
        config.symbol,
        run.started() or now_iso(),
        "running",
        folds_done=sum((fold_dir(run.path, f.index) / "results.npz").is_file() for f in folds),
        n_folds=len(folds),
        profile=config.profile,
    )

    def worthless(recorder: StatusRecorder) -> bool:
        if resumed is not None or recorder.status.folds_done:
            return False
        return not run.has_checkpoint()

    with record_run(run.path, run.lock, status, discard=worthless) as recorder:
        if resumed is None:
            run.write_config(config, sizes, *read)
        if on_start is not None:
            on_start(run.run_id)
        yield run, recorder


def interrupted(run: RunFolder, signum: int, where: str) -> RunInterruptedError:
    """The error a run stopped by signal `signum` at `where` raises: how to resume it."""
    return RunInterruptedError(
        f"run {run.run_id!r} stopped on {signal_name(signum)} at {where}, its checkpoint "
        f"saved; to resume it: {resume_command(run.run_id, run.root)}",
        run_id=run.run_id,
        signum=signum,
    )


def finish_fold(
    run: RunFolder,
    fold: Fold,
    done: Mapping[str, FoldResult],
    config: TrainConfig,
    recorder: StatusRecorder,
) -> None:
    """Write a trained fold's results, drop its checkpoints and count it done."""
    run.write_fold(fold, done)
    for k in range(config.seeds):
        run.checkpoint_path(fold.index, k).unlink(missing_ok=True)
    recorder.fold_done()


def write_run_result(
    run: RunFolder,
    recorder: StatusRecorder,
    config: TrainConfig,
    market: Market,
    cache: CachedMarket,
    planted: PlantedSignal,
    folds: Sequence[Fold],
    results: list[FoldResult],
) -> BacktestResult:
    """Pool every fold's test window into the run's totals; write ``metrics.json`` and
    ``equity_all.png``; mark the run complete with the agent's headline."""
    totals = policy_totals(results, market, capital=config.capital, seed=config.seed)
    shown = available(config.baselines, planted.values is not None, market.feature_names)
    ensemble = ("ensemble",) if config.ensemble else ()
    result = BacktestResult(
        run_dir=run.path,
        symbol=config.symbol,
        fxcache_key=cache.key,
        policies=(*agent_policies(config.seeds), *ensemble, *shown),
        folds=tuple(results),
        totals=totals,
        significance=tuple(
            _agent_significance(results, run, folds, config, policy)
            for policy in ("agent", *ensemble)
        ),
        notes=(
            *reference_notes(planted, config.baselines, totals),
            *feature_notes(config.baselines, market.feature_names),
            *seed_notes(totals, agent_policies(config.seeds)),
            *(
                follow_notes(results, (*agent_policies(config.seeds), *ensemble))
                if config.forecast != "off"
                else ()
            ),
            *choice_notes(results),
        ),
    )
    atomic_write_json(run.path / "metrics.json", result.to_json())
    plot_equity_all(run.path / "equity_all.png", results, totals)
    agent = totals.get("agent")
    recorder.complete(
        Headline("agent", agent.total_pnl, agent.sharpe_daily) if agent is not None else None
    )
    logger.info("trained %s on %d folds -> %s", config.symbol, len(folds), run.path)
    return result


def _agent_significance(
    results: list[FoldResult],
    run: RunFolder,
    folds: Sequence[Fold],
    config: TrainConfig,
    policy: str = "agent",
) -> SharpeSignificance:
    """PSR/DSR of `policy`'s (the agent's or the ensemble's) pooled test days, counting every
    candidate it was chosen from.

    Trials: in each fold the kept weights are the best of its validation evaluations or
    standing aside, so a fold chooses among (evaluations x no-trade bands + 1) candidates;
    the count is the largest such number over folds and seeds, times `seeds` (any one could
    be shown), plus the ensemble's no-trade bands when it is traded, times `prior_trials`
    (profiles or settings already tried on the same data). The trials' Sharpe variance is
    that of every finite validation Sharpe kept (annualised per bar, about the annualised
    daily Sharpe of independent bars).
    """
    sharpes: list[float] = []
    candidates = 1
    for fold in folds:
        for k in range(config.seeds):
            evals = run.read_evals(fold.index, k)
            candidates = max(candidates, len(evals) * len(config.no_trade_bands) + 1)
            sharpes += [float(v) for e in evals if isinstance(v := e.get("val_sharpe"), float)]
    variance = float(np.var(sharpes, ddof=1)) if len(sharpes) > 1 else 0.0
    trials = candidates * config.seeds + (len(config.no_trade_bands) if config.ensemble else 0)
    return pooled_significance(
        results,
        policy,
        n_trials=trials * config.prior_trials,
        trial_variance=variance,
        capital=config.capital,
    )
