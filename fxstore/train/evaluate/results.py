"""Baseline policies on walk-forward test windows: what a trained agent has to beat.

Every policy trades the fold's test window through
:func:`fxstore.train.env.market.evaluate_positions`
(same costs, rolls and close-out as the environment) and is scored by
:func:`fxstore.train.evaluate.metrics.compute_metrics`. The baselines:

- ``flat``: never trades (PnL 0: the floor every cost-paying policy is measured against).
- ``long``: holds +1 contract from the first to the last row of the window (buy and hold).
- ``random``: a position drawn uniformly from :attr:`EnvConfig.positions` at every row
  (seeded by the seed and the window's first row, so reproducible and different per fold).
- ``ofi-sign``: the sign of the order-flow-imbalance feature at the row's close (+1, -1, or 0
  when it is 0): the naive signal a learner has to improve on.
- ``linear``: a ridge regression of the next bar's move on the features, fitted on the fold's
  training part, its penalty and no-trade band chosen on the validation slice
  (:mod:`fxstore.train.evaluate.references.linear`): what a researcher would try first.
- ``oracle``: on the synthetic market, the planted signal itself traded with the same
  positions and costs (:mod:`fxstore.train.evaluate.references.oracle`): the ceiling of what was
  learnable.
  Without the signal's side files (real data) it is left out and the report says so.

Fitted policies (the agent, ``linear``) also report their in-sample daily Sharpe: the same
policy traded over the fold's training part, next to the out-of-sample one, so overfitting
shows. Totals pool every test window; the table ends with the probabilistic and deflated
Sharpe ratios of the pooled daily returns (:mod:`fxstore.train.evaluate.significance`).

:func:`run_backtest` runs them all on every fold and writes ``runs/<run-id>/``::

    config.json        the BacktestConfig, fxstore version, fxcache key and manifest checksum
    metrics.json       per fold and policy, and totals per policy over every test window
    fold00/equity.png  equity and drawdown of every policy on the fold's test window (when plots)
    equity_all.png     the same over every test window, one after another (when plots)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore import __version__
from fxstore.config import BASELINE_POLICIES, BacktestConfig, EnvConfig
from fxstore.errors import InvalidInputError
from fxstore.store import atomic_write_json, create_run_dir, fold_dir, synth_dir
from fxstore.train.env.data import CachedMarket, open_cache
from fxstore.train.env.market import ContractSpec, Market, contract_spec, evaluate_positions
from fxstore.train.evaluate.metrics import BacktestMetrics, compute_metrics, daily_pnl
from fxstore.train.evaluate.references.linear import fit_linear, linear_positions
from fxstore.train.evaluate.references.oracle import (
    PlantedSignal,
    load_planted_signal,
    oracle_positions,
)
from fxstore.train.evaluate.significance import SharpeSignificance, sharpe_significance
from fxstore.train.evaluate.walkforward import Fold, make_folds
from fxstore.train.gpu.xp import to_host
from fxstore.train.runs.status import (
    Headline,
    RunLock,
    RunStatus,
    StatusRecorder,
    now_iso,
    record_run,
)

__all__ = [
    "BASELINES",
    "BacktestResult",
    "FoldResult",
    "baseline_positions",
    "baseline_results",
    "best_of_significance",
    "evaluate_fold",
    "fold_result",
    "in_sample_sharpe",
    "load_oracle",
    "policy_totals",
    "pooled_significance",
    "reference_notes",
    "run_backtest",
    "with_ts_close",
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
    if policy == "oracle":
        raise InvalidInputError(
            "policy 'oracle' trades the planted signal: use baseline_results with `planted`."
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
    in_sample_sharpe: float = math.nan
    """Daily Sharpe (× √252) of the same policy over the fold's training part; NaN for
    policies that fit nothing (or when undefined)."""
    ts_close: npt.NDArray[np.int64] | None = None
    """int64 ``(n_test_rows,)`` each row's bar close, ns UTC (the plots' time axis); None
    when unknown (a run folder written before it was recorded)."""

    def to_json(self) -> dict[str, object]:
        """The fold, policy and metrics as JSON data (NaN as None)."""
        return {
            "fold": self.fold.index,
            "policy": self.policy,
            "metrics": self.metrics.to_json(),
            "in_sample_sharpe_daily": _json_float(self.in_sample_sharpe),
        }


def with_ts_close(
    results: Sequence[FoldResult], ts_close: npt.NDArray[np.int64]
) -> list[FoldResult]:
    """`results` with each one's bar close times: `ts_close` (every market row) at its fold's
    test rows."""
    out = []
    for result in results:
        lo, hi = result.fold.test
        if hi - lo != result.pnl.size:
            raise InvalidInputError(
                f"fold {result.fold.index}'s {result.policy!r} result has {result.pnl.size} "
                f"rows, its test window {hi - lo}."
            )
        out.append(dataclasses.replace(result, ts_close=np.asarray(ts_close[lo:hi], np.int64)))
    return out


def _json_float(value: float) -> float | None:
    return value if math.isfinite(value) else None


def in_sample_sharpe(
    market: Market,
    fold: Fold,
    positions: npt.ArrayLike,
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
) -> float:
    """Daily Sharpe (× √252) of `positions` held over the fold's training rows."""
    lo, hi = fold.train
    if hi - lo < 2:
        return math.nan
    book = evaluate_positions(market, positions, lo, hi, env_config, spec)  # type: ignore[arg-type]
    metrics = compute_metrics(
        to_host(book.pnl),
        to_host(book.positions),
        book.trading_day,
        bars_per_day=market.bars_per_day,
        capital=capital,
        n_resamples=1,
    )
    return metrics.sharpe_daily


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
    in_sample: float = math.nan,
    ts_close: npt.NDArray[np.generic] | None = None,
) -> FoldResult:
    """Score a booked test window: the metrics of its per-row PnL and positions.

    `in_sample` is the policy's in-sample daily Sharpe (:attr:`FoldResult.in_sample_sharpe`);
    `ts_close` the rows' bar close times (:attr:`FoldResult.ts_close`).
    """
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
    ts_host = None if ts_close is None else to_host(ts_close).astype(np.int64, copy=False)
    return FoldResult(fold, policy, metrics, pnl_host, positions_host, day_host, in_sample, ts_host)


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
    in_sample: float = math.nan,
) -> FoldResult:
    """Book `positions` over the fold's test window and score them.

    Parameters
    ----------
    positions
        ``(n_test_rows,)`` contracts to hold over each test row (a baseline's, or an agent's
        greedy positions from :func:`fxstore.train.env.market.policy_positions`).
    capital, seed
        Dollars the returns are measured on; seed of the Sharpe bootstrap.
    policy
        The name recorded in the result.
    in_sample
        The policy's daily Sharpe over the fold's training part (see :func:`in_sample_sharpe`).
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
        in_sample=in_sample,
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
    significance: tuple[SharpeSignificance, ...] = ()
    """PSR and DSR of pooled out-of-sample daily returns, with the trials they count (the
    agent's in ``train``; the best baseline's, over the policies compared, in ``backtest``)."""
    notes: tuple[str, ...] = ()
    """Lines after the table: the oracle's source or absence, shares of its PnL."""

    def to_json(self) -> dict[str, object]:
        """Per-fold and total metrics as JSON data (NaN as None): ``metrics.json``."""
        by_fold: dict[int, dict[str, object]] = {}
        for result in self.folds:
            entry = by_fold.setdefault(
                result.fold.index,
                {"fold": result.fold.to_json(), "policies": {}, "in_sample_sharpe_daily": {}},
            )
            entry["policies"][result.policy] = result.metrics.to_json()  # type: ignore[index]
            in_sample = entry["in_sample_sharpe_daily"]
            in_sample[result.policy] = _json_float(result.in_sample_sharpe)  # type: ignore[index]
        return {
            "run_dir": str(self.run_dir),
            "symbol": self.symbol,
            "fxcache_key": self.fxcache_key,
            "policies": list(self.policies),
            "folds": list(by_fold.values()),
            "totals": {p: m.to_json() for p, m in self.totals.items()},
            "in_sample_sharpe_daily": {
                p: _json_float(self.mean_in_sample_sharpe(p)) for p in self.totals
            },
            "significance": [s.to_json() for s in self.significance],
            "share_of_oracle": {p: _json_float(self.share_of_oracle(p)) for p in self.totals},
            "notes": list(self.notes),
        }

    def share_of_oracle(self, policy: str) -> float:
        """`policy`'s pooled PnL over the oracle's; NaN without an oracle making money."""
        oracle = self.totals.get("oracle")
        if oracle is None or not oracle.total_pnl > 0 or policy not in self.totals:
            return math.nan
        return self.totals[policy].total_pnl / oracle.total_pnl

    def mean_in_sample_sharpe(self, policy: str) -> float:
        """Mean over folds of `policy`'s in-sample daily Sharpe (NaN when it has none)."""
        values = [r.in_sample_sharpe for r in self.folds if r.policy == policy]
        finite = [v for v in values if math.isfinite(v)]
        return float(np.mean(finite)) if finite else math.nan

    def format_table(self) -> str:
        """A text table: one row per fold and policy, then the totals per policy.

        Columns after ``trades``: PSR, the probability that the true daily Sharpe is above
        0; IS Sharpe(d), the in-sample daily Sharpe of a fitted policy (its fold's training
        part; in the totals, the mean over folds), "-" for policies that fit nothing. Then
        one line per :attr:`significance` entry.
        """
        header = (
            "fold",
            "test span",
            "policy",
            "PnL $",
            "Sharpe(d)",
            "max DD $",
            "trades",
            "PSR",
            "IS Sharpe(d)",
        )
        rows = [header]
        for r in self.folds:
            span = f"{_iso_day(r.fold.test_span[0])}..{_iso_day(r.fold.test_span[1])}"
            rows.append(
                (
                    str(r.fold.index),
                    span,
                    r.policy,
                    *_metric_cells(r.metrics),
                    _in_sample_cell(r.policy, r.in_sample_sharpe),
                )
            )
        if self.folds:
            first, last = self.folds[0].fold.test_span[0], self.folds[-1].fold.test_span[1]
            span = f"{_iso_day(first)}..{_iso_day(last)}"
            for policy, metrics in self.totals.items():
                in_sample = _in_sample_cell(policy, self.mean_in_sample_sharpe(policy))
                rows.append(("all", span, policy, *_metric_cells(metrics), in_sample))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [
            "  ".join(
                c.ljust(w) if i < 3 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            for row in rows
        ]
        lines.insert(1, "-" * len(lines[0]))
        lines += [s.format_line() for s in self.significance]
        return "\n".join([*lines, *self.notes])


#: Policies fitted on the training part, which have an in-sample Sharpe.
_FITTED: Final = ("agent", "linear")


def _in_sample_cell(policy: str, value: float) -> str:
    fitted = policy in _FITTED or policy.startswith("agent-s")
    return _fmt(value, ".2f") if fitted else "-"


def _metric_cells(m: BacktestMetrics) -> tuple[str, str, str, str, str]:
    return (
        _fmt(m.total_pnl, ",.2f"),
        _fmt(m.sharpe_daily, ".2f"),
        _fmt(m.max_drawdown, ",.2f"),
        str(m.n_trades),
        _fmt(m.psr_daily, ".3f"),
    )


def best_of_significance(
    results: Sequence[FoldResult], totals: Mapping[str, BacktestMetrics], *, capital: float
) -> SharpeSignificance | None:
    """PSR/DSR of the policy with the best pooled daily Sharpe, the policies its trials.

    Picking the best row of a table of N policies is N trials; their pooled annualised
    daily Sharpes give the trials' variance. None when no policy has a Sharpe.
    """
    sharpes = {p: m.sharpe_daily for p, m in totals.items() if math.isfinite(m.sharpe_daily)}
    if not sharpes:
        return None
    best = max(sharpes, key=lambda p: sharpes[p])
    variance = float(np.var(list(sharpes.values()), ddof=1)) if len(sharpes) > 1 else 0.0
    return pooled_significance(
        results, best, n_trials=len(totals), trial_variance=variance, capital=capital
    )


def pooled_significance(
    results: Sequence[FoldResult],
    policy: str,
    *,
    n_trials: int,
    trial_variance: float,
    capital: float,
) -> SharpeSignificance:
    """PSR/DSR of `policy`'s daily returns pooled over all its test windows."""
    mine = [r for r in results if r.policy == policy]
    days = daily_pnl(
        np.concatenate([r.pnl for r in mine]), np.concatenate([r.trading_day for r in mine])
    )
    return sharpe_significance(
        policy,
        to_host(days) / capital,
        n_trials=n_trials,
        trial_sharpe_variance_annual=trial_variance,
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
    planted: npt.NDArray[np.float64] | None = None,
) -> list[FoldResult]:
    """Every baseline in `policies` traded on the fold's test window, in that order.

    'linear' is fitted on the fold first and also scored in sample (its training part);
    'oracle' trades `planted` (the planted signal per market row) and is left out when it
    is None.
    """
    results = []
    for policy in policies:
        in_sample = math.nan
        if policy == "oracle":
            if planted is None:
                continue
            positions, _train, _band = oracle_positions(
                planted, market, fold, env_config, spec, capital=capital
            )
        elif policy == "linear":
            model = fit_linear(market, fold, env_config, spec, capital=capital)
            positions = linear_positions(model, market, *fold.test)
            train_positions = linear_positions(model, market, *fold.train)
            in_sample = in_sample_sharpe(
                market, fold, train_positions, env_config, spec, capital=capital
            )
        else:
            positions = baseline_positions(policy, market, *fold.test, env_config, seed=seed)
        results.append(
            evaluate_fold(
                market,
                fold,
                positions,
                env_config,
                spec,
                capital=capital,
                seed=seed,
                policy=policy,
                in_sample=in_sample,
            )
        )
    return results


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


def load_oracle(
    root: Path, symbol: str, signal_dir: str | None, cache: CachedMarket
) -> PlantedSignal:
    """The planted signal for 'oracle' from `signal_dir` or the store's synth folder."""
    folder = Path(signal_dir) if signal_dir is not None else synth_dir(root, symbol)
    return load_planted_signal(folder, cache.ts_close, cache.market.trading_day)


def reference_notes(
    planted: PlantedSignal, policies: Sequence[str], totals: Mapping[str, BacktestMetrics]
) -> tuple[str, ...]:
    """The oracle's source (or why it is absent) and each policy's share of its PnL."""
    if "oracle" not in policies:
        return ()
    if planted.values is None:
        return (f"oracle: absent: {planted.reason}",)
    oracle = totals.get("oracle")
    lines = [f"oracle: {planted.reason}"]
    if oracle is None or not oracle.total_pnl > 0:
        lines.append("share of the oracle's PnL: n/a (the oracle made no money after costs)")
        return tuple(lines)
    for policy in ("agent", "linear"):
        if policy in totals:
            share = totals[policy].total_pnl / oracle.total_pnl
            lines.append(
                f"{policy}'s share of the oracle's PnL: {share:.1%} "
                f"(${totals[policy].total_pnl:,.2f} of ${oracle.total_pnl:,.2f})"
            )
    return tuple(lines)


def write_equity_plots(
    folder: Path, results: Sequence[FoldResult], totals: Mapping[str, BacktestMetrics]
) -> None:
    """One ``fold<NN>/equity.png`` per fold of `results` (every policy on the same axes) and
    ``equity_all.png`` over all folds, its legend from `totals`."""
    from fxstore.train.runs.plots import plot_equity, plot_equity_all

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
    spec = contract_spec(config.symbol, config.env)  # an unknown root fails before the folder
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
            "contract": {
                "root": spec.root,
                "multiplier": spec.multiplier,
                "tick_size": spec.tick_size,
            },
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
        policies=tuple(p for p in config.policies if p != "oracle" or planted.values is not None),
        folds=tuple(results),
        totals=totals,
        significance=() if best is None else (best,),
        notes=reference_notes(planted, config.policies, totals),
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
