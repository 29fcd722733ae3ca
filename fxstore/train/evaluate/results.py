"""Results of policies on walk-forward test windows: per fold, pooled, and their table.

Every policy, the agent's seeds and the references (:mod:`fxstore.train.evaluate.references`),
trades the fold's test window through :func:`fxstore.train.env.market.evaluate_positions`
(same costs, rolls and close-out as the environment) and is scored by
:func:`fxstore.train.evaluate.metrics.compute_metrics` into a :class:`FoldResult`.

Fitted policies (the agent, ``linear``) also report their in-sample daily Sharpe: the same
policy traded over the fold's training part, next to the out-of-sample one, so overfitting
shows. Totals pool every test window; the table ends with the probabilistic and deflated
Sharpe ratios of the pooled daily returns (:mod:`fxstore.train.evaluate.significance`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig
from fxstore.errors import InvalidInputError
from fxstore.store import synth_dir
from fxstore.train.env.data import CachedMarket
from fxstore.train.env.market import ContractSpec, Market, evaluate_positions
from fxstore.train.evaluate.metrics import BacktestMetrics, compute_metrics, daily_pnl
from fxstore.train.evaluate.references import REFERENCES, ReferenceInputs
from fxstore.train.evaluate.references.oracle import (
    PlantedSignal,
    load_planted_signal,
)
from fxstore.train.evaluate.references.ridge import LinearModel
from fxstore.train.evaluate.significance import SharpeSignificance, sharpe_significance
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.gpu.xp import to_host

__all__ = [
    "BacktestResult",
    "FoldResult",
    "baseline_results",
    "best_of_significance",
    "choice_notes",
    "evaluate_fold",
    "fold_result",
    "follow_notes",
    "in_sample_sharpe",
    "load_oracle",
    "policy_totals",
    "pooled_significance",
    "reference_notes",
    "with_ts_close",
]

logger = logging.getLogger(__name__)

F64 = npt.NDArray[np.float64]


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
    choice: Mapping[str, float] | None = None
    """What a fitted reference chose on the fold's validation slice (``linear``: horizon,
    penalty, band); None for other policies."""

    def to_json(self) -> dict[str, object]:
        """The fold, policy and metrics as JSON data (NaN as None)."""
        out: dict[str, object] = {
            "fold": self.fold.index,
            "policy": self.policy,
            "metrics": self.metrics.to_json(),
            "in_sample_sharpe_daily": _json_float(self.in_sample_sharpe),
        }
        if self.choice is not None:
            out["choice"] = choice_json(self.choice)
        return out


def choice_json(choice: Mapping[str, float]) -> dict[str, float | None]:
    """A reference's choice as JSON data (inf and NaN as None)."""
    return {k: _json_float(v) for k, v in choice.items()}


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
                f"fold {result.fold.number}'s {result.policy!r} result has {result.pnl.size} "
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
    choice: Mapping[str, float] | None = None,
) -> FoldResult:
    """Score a booked test window: the metrics of its per-row PnL and positions.

    `in_sample` is the policy's in-sample daily Sharpe (:attr:`FoldResult.in_sample_sharpe`);
    `ts_close` the rows' bar close times (:attr:`FoldResult.ts_close`); `choice` what it
    chose on validation (:attr:`FoldResult.choice`).
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
    return FoldResult(
        fold, policy, metrics, pnl_host, positions_host, day_host, in_sample, ts_host, choice
    )


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
    choice: Mapping[str, float] | None = None,
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
    choice
        What the policy chose on the fold's validation slice (:attr:`FoldResult.choice`).
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
        choice=choice,
    )


def _iso_day(day: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=int(day))).isoformat()


def _fmt(value: float, spec: str) -> str:
    return "n/a" if value != value else format(value, spec)  # NaN != NaN


@dataclass(frozen=True, slots=True, eq=False)
class BacktestResult:
    """What a backtest or training run produced (:func:`fxstore.train.runs.backtest.run_backtest`,
    :func:`fxstore.train.loop.train`)."""

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
            if result.choice is not None:
                choices = entry.setdefault("choices", {})
                choices[result.policy] = choice_json(result.choice)  # type: ignore[index]
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
            "share_of_ceiling": {p: _json_float(self.share_of(p, "ceiling")) for p in self.totals},
            "notes": list(self.notes),
        }

    def share_of_oracle(self, policy: str) -> float:
        """`policy`'s pooled PnL over the oracle's; NaN without an oracle making money."""
        return self.share_of(policy, "oracle")

    def share_of(self, policy: str, reference: str) -> float:
        """`policy`'s pooled PnL over `reference`'s (``oracle``, ``ceiling``); NaN without
        that reference, or when it made no money."""
        top = self.totals.get(reference)
        if top is None or not top.total_pnl > 0 or policy not in self.totals:
            return math.nan
        return self.totals[policy].total_pnl / top.total_pnl

    def mean_in_sample_sharpe(self, policy: str) -> float:
        """Mean over folds of `policy`'s in-sample daily Sharpe (NaN when it has none)."""
        values = [r.in_sample_sharpe for r in self.folds if r.policy == policy]
        finite = [v for v in values if math.isfinite(v)]
        return float(np.mean(finite)) if finite else math.nan

    def format_table(self, *, per_fold: bool = True) -> str:
        """A text table: one row per fold and policy (unless not `per_fold`), then the totals
        per policy.

        Sharpe ratios are of daily returns, annualised (x sqrt(252)): "Sharpe ann.". Columns
        after ``trades``: PSR, the probability that the true daily Sharpe is above 0;
        IS Sharpe ann., the in-sample Sharpe of a fitted policy (its fold's training part;
        in the totals, the mean over folds), "-" for policies that fit nothing. Then one
        line per :attr:`significance` entry.
        """
        header = (
            "fold",
            "test span",
            "policy",
            "PnL $",
            SHARPE_HEADER,
            "max DD $",
            "trades",
            "PSR",
            f"IS {SHARPE_HEADER}",
        )
        rows = [header]
        for r in self.folds if per_fold else ():
            span = f"{_iso_day(r.fold.test_span[0])}..{_iso_day(r.fold.test_span[1])}"
            rows.append(
                (
                    str(r.fold.number),
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


#: The column of the Sharpe ratio of daily returns, annualised (x sqrt(252)).
SHARPE_HEADER: Final = "Sharpe ann."


def dollars(value: float) -> str:
    """`value` as money: ``-$817.50``, ``$1,234.00``; "n/a" when not finite."""
    if not math.isfinite(value):
        return "n/a"
    return f"{'-' if value < 0 else ''}${abs(value):,.2f}"


#: Policies fitted on the training part, which have an in-sample Sharpe.
_FITTED: Final = ("agent", "ensemble", "linear", "ceiling")


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
    linear: LinearModel | None = None,
) -> list[FoldResult]:
    """Every reference in `policies` (:data:`REFERENCES`) traded on the fold's test window,
    in that order.

    A fitted reference ('linear') is also scored in sample (its training part); one that
    this market cannot have ('oracle' when `planted`, the planted signal per market row, is
    None) is left out. `linear`: the fold's linear model when it is fitted already.
    """
    inputs = ReferenceInputs(market, fold, env_config, spec, capital, seed, planted, linear)
    results = []
    for policy in policies:
        if policy not in REFERENCES:
            raise InvalidInputError(
                f"unknown policy {policy!r}; choose from {', '.join(REFERENCES)}."
            )
        held = REFERENCES[policy].positions(inputs)
        if held is None:
            continue
        in_sample = math.nan
        if held.train is not None:
            in_sample = in_sample_sharpe(
                market, fold, held.train, env_config, spec, capital=capital
            )
        results.append(
            evaluate_fold(
                market,
                fold,
                held.test,
                env_config,
                spec,
                capital=capital,
                seed=seed,
                policy=policy,
                in_sample=in_sample,
                choice=held.choice,
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


def _format_choice(choice: Mapping[str, float]) -> str:
    band = choice.get("band_sd", math.nan)
    if not math.isfinite(band):
        return "flat (nothing beat standing aside)"
    horizon = choice.get("horizon_bars", math.nan)
    return f"{horizon:.0f} bars, λ {choice.get('ridge_lambda', math.nan):g}, band {band:g} sd"


def choice_notes(results: Sequence[FoldResult]) -> tuple[str, ...]:
    """One report line per fitted reference: what it chose on each fold's validation slice
    (``linear``: the horizon, λ and band, e.g. ``1: 16 bars, λ 0.01, band 0.5 sd``)."""
    by_policy: dict[str, list[str]] = {}
    for result in results:
        if result.choice is not None:
            by_policy.setdefault(result.policy, []).append(
                f"{result.fold.number}: {_format_choice(result.choice)}"
            )
    return tuple(
        f"{policy}'s choice on validation, by fold: {'; '.join(folds)}"
        for policy, folds in by_policy.items()
    )


def follow_notes(results: Sequence[FoldResult], policies: Sequence[str]) -> tuple[str, ...]:
    """How closely each of `policies` (the agents trading a forecast) held ``linear``'s
    positions: their correlation over every test row of every fold. Near 0, a policy does
    not trade the forecast it was handed. None without ``linear``."""

    def pooled(policy: str) -> F64:
        rows = [r.positions for r in results if r.policy == policy]
        return np.concatenate(rows) if rows else np.zeros(0)

    reference = pooled("linear")
    mine = [p for p in policies if any(r.policy == p for r in results)]
    if reference.size < 2 or not mine:
        return ()
    if reference.std() == 0:
        return ("correlation with linear's positions: n/a (linear never changed position)",)
    cells = []
    for policy in mine:
        held = pooled(policy)  # every policy trades every fold's test rows
        if held.std() == 0:
            cells.append(f"{policy} n/a (never changed position)")
        else:
            cells.append(f"{policy} {np.corrcoef(held, reference)[0, 1]:.2f}")
    return (
        f"correlation with linear's positions over {reference.size:,} test bars (near 0: "
        f"the agent does not trade its forecast): {', '.join(cells)}",
    )


def reference_notes(
    planted: PlantedSignal, policies: Sequence[str], totals: Mapping[str, BacktestMetrics]
) -> tuple[str, ...]:
    """The planted signal's source (or why the references that trade it are absent), and each
    policy's share of the oracle's and the ceiling's PnL."""
    planted_refs = [p for p in ("ceiling", "oracle") if p in policies]
    if not planted_refs:
        return ()
    if planted.values is None:
        return tuple(f"{p}: absent: {planted.reason}" for p in planted_refs)
    lines = [f"{' and '.join(planted_refs)}: {planted.reason}"]
    for reference, shared in (
        ("oracle", ("agent", "ensemble", "linear", "ceiling")),
        ("ceiling", ("agent", "ensemble")),
    ):
        top = totals.get(reference)
        if reference not in policies or top is None:
            continue
        if not top.total_pnl > 0:
            lines.append(
                f"share of the {reference}'s PnL: n/a (the {reference} made no money after costs)"
            )
            continue
        for policy in shared:
            if policy in totals:
                share = totals[policy].total_pnl / top.total_pnl
                lines.append(
                    f"{policy}'s share of the {reference}'s PnL: {share:.1%} "
                    f"({dollars(totals[policy].total_pnl)} of {dollars(top.total_pnl)})"
                )
    return tuple(lines)
