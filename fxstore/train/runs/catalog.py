"""The runs under a store's ``runs/`` folder: what ``fxstore runs`` lists and shows.

A run's status comes from its ``status.json`` (:mod:`fxstore.train.runs.status`); a run from
before status files is read from its ``config.json`` (kind, symbol) and ``metrics.json``
(complete when present). Its table is rebuilt from the ``metrics.json`` that train or
backtest wrote and printed by the same :meth:`BacktestResult.format_table`; a training run
that is not complete shows the folds it finished (``fold<NN>/metrics.json``), no totals.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import numpy as np

from fxstore.errors import InvalidInputError
from fxstore.store import existing_run_dir, list_runs, read_json
from fxstore.train.evaluate.metrics import BacktestMetrics
from fxstore.train.evaluate.results import BacktestResult, FoldResult
from fxstore.train.evaluate.significance import SharpeSignificance
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.runs.folder import finished_fold_metrics
from fxstore.train.runs.status import Headline, RunStatus, read_status

__all__ = ["list_run_statuses", "read_run_result", "run_status"]

logger = logging.getLogger(__name__)

_CONFIG: Final = "config.json"
_METRICS: Final = "metrics.json"
_REMAKE: Final = "it is damaged or was edited"


def list_run_statuses(root: Path) -> list[RunStatus]:
    """Every run under ``<root>/runs`` (a folder holding ``config.json``), oldest first."""
    return [run_status(root, run_id) for run_id in list_runs(root, _CONFIG)]


def run_status(root: Path, run_id: str) -> RunStatus:
    """The status of run `run_id`; InvalidInputError when there is no such run."""
    folder = _run_folder(root, run_id)
    status = read_status(folder)
    return status if status is not None else _legacy_status(folder)


def _run_folder(root: Path, run_id: str) -> Path:
    return existing_run_dir(root, run_id, _CONFIG, "`fxstore runs` lists them.")


def _legacy_status(folder: Path) -> RunStatus:
    """A run written before ``status.json``: complete when its ``metrics.json`` exists."""
    record = read_json(folder / _CONFIG)
    kind = str(record.get("kind", "train"))
    config = record.get("config")
    symbol = config.get("symbol") if isinstance(config, dict) else None
    profile = config.get("profile") if isinstance(config, dict) and kind == "train" else None
    started = dt.datetime.fromtimestamp((folder / _CONFIG).stat().st_mtime, dt.UTC)
    done = len(list(folder.glob("fold*/results.npz")))
    headline = None
    if (folder / _METRICS).is_file():
        totals = read_json(folder / _METRICS).get("totals")
        if isinstance(totals, dict) and totals:
            policy = "agent" if "agent" in totals else str(next(iter(totals)))
            headline = _headline(policy, totals[policy])
    return RunStatus(
        folder.name,
        kind,
        str(symbol),
        started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "complete" if (folder / _METRICS).is_file() else "interrupted",
        folds_done=done,
        n_folds=None,
        profile=str(profile) if profile is not None else None,
        headline=headline,
    )


def _headline(policy: str, metrics: object) -> Headline | None:
    if not isinstance(metrics, dict):
        return None
    pnl, sharpe = metrics.get("total_pnl"), metrics.get("sharpe_daily")
    return Headline(policy, _num(pnl), _num(sharpe))


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def read_run_result(root: Path, run_id: str) -> BacktestResult:
    """The results of run `run_id` as train or backtest returned them, for its table.

    The per-policy arrays (PnL, positions) are not read: the table needs only metrics.

    Raises
    ------
    InvalidInputError
        No such run, or its metrics files are damaged.
    """
    folder = _run_folder(root, run_id)
    path = folder / _METRICS
    if path.is_file():
        return _result_from_json(folder, read_json(path), path)
    record = read_json(folder / _CONFIG)
    config = record.get("config")
    symbol = config.get("symbol") if isinstance(config, dict) else None
    facts = record.get("fxcache")
    key = facts.get("key") if isinstance(facts, dict) else None
    folds: list[FoldResult] = []
    for fold_path in finished_fold_metrics(folder):
        folds += _fold_results(read_json(fold_path), fold_path)
    policies = tuple(dict.fromkeys(r.policy for r in folds))
    return BacktestResult(folder, str(symbol), str(key), policies, tuple(folds), {})


def _result_from_json(folder: Path, data: Mapping[str, object], where: Path) -> BacktestResult:
    try:
        folds: list[FoldResult] = []
        for entry in data["folds"]:  # type: ignore[attr-defined]
            folds += _fold_results(entry, where)
        policies = tuple(str(p) for p in data["policies"])  # type: ignore[attr-defined]
        # the JSON's keys are sorted: put rows back in the report's policy order
        order = {p: i for i, p in enumerate(policies)}
        folds.sort(key=lambda r: (r.fold.index, order.get(r.policy, len(order))))
        totals = {
            p: _metrics(m)
            for p, m in sorted(
                data["totals"].items(),  # type: ignore[attr-defined]
                key=lambda item: order.get(item[0], len(order)),
            )
        }
        return BacktestResult(
            run_dir=folder,
            symbol=str(data["symbol"]),
            fxcache_key=str(data["fxcache_key"]),
            policies=policies,
            folds=tuple(folds),
            totals=totals,
            significance=tuple(_significance(s) for s in data.get("significance") or ()),  # type: ignore[attr-defined]
            notes=tuple(str(n) for n in data.get("notes") or ()),  # type: ignore[attr-defined]
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise InvalidInputError(f"{where}: not a run's metrics ({err}); {_REMAKE}.") from err


def _fold_results(entry: object, where: Path) -> list[FoldResult]:
    """The FoldResults of one fold's metrics (no arrays: the table needs none)."""
    try:
        fold_json = entry["fold"]  # type: ignore[index]
        fold = Fold(
            index=int(fold_json["index"]),
            train=tuple(fold_json["train"]),
            validation=tuple(fold_json["validation"]),
            test=tuple(fold_json["test"]),
            train_span=tuple(fold_json["train_span"]),
            validation_span=(
                tuple(fold_json["validation_span"]) if fold_json["validation_span"] else None
            ),
            test_span=tuple(fold_json["test_span"]),
        )
        in_sample = entry.get("in_sample_sharpe_daily") or {}  # type: ignore[attr-defined]
        empty = np.zeros(0)
        return [
            FoldResult(
                fold,
                policy,
                _metrics(metrics),
                empty,
                empty,
                np.zeros(0, dtype=np.int32),
                _num(in_sample.get(policy)),
            )
            for policy, metrics in entry["policies"].items()  # type: ignore[index]
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise InvalidInputError(f"{where}: not a run's metrics ({err}); {_REMAKE}.") from err


def _metrics(data: Mapping[str, object]) -> BacktestMetrics:
    """BacktestMetrics from its JSON (None back to NaN, the interval back to a tuple)."""
    values: dict[str, object] = {}
    for name in BacktestMetrics.__dataclass_fields__:
        value = data[name]
        if name == "sharpe_daily_ci":
            value = tuple(_num(v) for v in value)  # type: ignore[attr-defined]
        elif name in ("n_bars", "n_days", "n_trades"):
            value = int(value)  # type: ignore[call-overload]
        else:
            value = _num(value)
        values[name] = value
    return BacktestMetrics(**values)  # type: ignore[arg-type]


def _significance(data: Mapping[str, object]) -> SharpeSignificance:
    values: dict[str, object] = {}
    for name in SharpeSignificance.__dataclass_fields__:
        value = data[name]
        if name == "policy":
            values[name] = str(value)
        elif name in ("n_days", "n_trials"):
            values[name] = int(value)  # type: ignore[call-overload]
        else:
            values[name] = _num(value)
    return SharpeSignificance(**values)  # type: ignore[arg-type]
