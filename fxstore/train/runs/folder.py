"""A training run's folder: config, per-fold results, evaluations, checkpoints, totals.

Layout (``runs/<run-id>/``, DESIGN.md "Store layout")::

    config.json                 the full TrainConfig, resolved sizes, the fxcache read, version
                                and checksums of settings and profile (checked on resume)
    fold00/evals.json           validation evaluations (step, loss, Sharpe), the policy kept
    fold00/checkpoint.npz       while the fold learns: everything needed to resume it
    fold00/evals-seed1.json     the same for each extra seed (``seeds`` > 1), and
    fold00/checkpoint-seed1.npz   its checkpoint
    fold00/results.npz          per-policy test-window PnL, positions, trading days, bar close
                                times (``ts_close``; absent in folders of older versions)
    fold00/metrics.json         per-policy metrics of the fold's test window
    fold00/equity.png           equity curves of the agent and the baselines
    metrics.json                per-fold and total metrics of every policy
    equity_all.png              equity curves over every fold's test window

Every file is written atomically; a fold counts as finished once its ``results.npz`` exists.
"""

from __future__ import annotations

import contextlib
import logging
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.config import TrainConfig
from fxstore.errors import InvalidInputError
from fxstore.store import (
    atomic_path,
    atomic_write_json,
    create_run_dir,
    existing_run_dir,
    fold_dir,
    os_errors,
    read_json,
    remove_stale_temps,
)
from fxstore.train.env.data import CachedMarket
from fxstore.train.env.market import ContractSpec
from fxstore.train.evaluate.results import FoldResult, choice_json, fold_result
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.runs.plots import plot_equity
from fxstore.train.runs.resume import ResumePlan, plan_resume, run_inputs
from fxstore.train.runs.status import RunLock, read_status

__all__ = ["RunFolder", "finished_fold_metrics"]

logger = logging.getLogger(__name__)

_CONFIG: Final = "config.json"
_REDO_FOLD: Final = (
    "the file is damaged: move it aside (the fold is then trained again on --resume)."
)


def finished_fold_metrics(run: Path) -> list[Path]:
    """The ``metrics.json`` of every finished fold of the run folder `run`, in fold order: a
    fold is finished once its ``results.npz`` exists (written after its metrics)."""
    return sorted(p for p in run.glob("fold*/metrics.json") if (p.parent / "results.npz").is_file())


def _check_resumable(
    run_id: str, record: Mapping[str, object], where: Path, profile: str | None
) -> str:
    """Refuse a run that is not a training run, or not of `profile`; return its profile."""
    kind = record.get("kind")
    if kind != "train":
        raise InvalidInputError(
            f"run {run_id!r} is a {kind if isinstance(kind, str) else 'damaged'} run, not a "
            "training run: only `fxstore train` runs resume; `fxstore runs show "
            f"{run_id}` prints its table."
        )
    settings = record.get("config")
    made_with = settings.get("profile") if isinstance(settings, dict) else None
    if not isinstance(made_with, str):
        raise InvalidInputError(
            f"{where}: `config.profile` must be a profile name; the file is damaged or was "
            "edited, so the run cannot resume: start a new run without --resume."
        )
    if profile is not None and profile != made_with:
        raise InvalidInputError(
            f"run {run_id!r} was trained with profile {made_with!r}, not {profile!r}: a resumed "
            "run keeps its own settings, so drop --profile (or start a new run without "
            "--resume)."
        )
    return made_with


def _read_results(path: Path) -> dict[str, npt.NDArray[np.generic]]:
    """The arrays of a fold's ``results.npz``; InvalidInputError if damaged or truncated."""
    with os_errors(path, "read"):
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (ValueError, EOFError, zipfile.BadZipFile) as err:
            raise InvalidInputError(f"{path}: cannot read it ({err}); {_REDO_FOLD}") from err
    if "trading_day" not in arrays:
        raise InvalidInputError(f"{path}: has no 'trading_day'; {_REDO_FOLD}")
    return arrays


def _choice(arrays: Mapping[str, npt.NDArray[np.generic]], policy: str) -> dict[str, float] | None:
    """What `policy` chose on validation (``<policy>/choice/<name>`` arrays), or None."""
    prefix = f"{policy}/choice/"
    found = {k.removeprefix(prefix): float(v) for k, v in arrays.items() if k.startswith(prefix)}
    return found or None


class RunFolder:
    """One run's folder under ``runs/``; every write is atomic."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run_id = path.name
        self.lock = RunLock(path)
        """Held while this process writes the run."""

    @property
    def root(self) -> Path:
        """The store root the run belongs to."""
        return self.path.parent.parent

    @classmethod
    def create(cls, root: Path, kind: str) -> RunFolder:
        """A fresh run folder, its lock held (release with ``run.lock.release()``)."""
        run = cls(create_run_dir(root, kind))
        run.lock.acquire()
        return run

    @classmethod
    def resume(cls, root: Path, run_id: str, *, profile: str | None = None) -> RunFolder:
        """The training run `run_id`, its lock held and its killed writes' temporary files
        removed.

        `profile`: the profile name the caller expects the run to have (None: any).

        Raises
        ------
        InvalidInputError
            No such run; a backtest, not a training run; made with another profile; nothing
            to resume (no checkpoint and no finished fold).
        RunBusyError
            A live process is writing the run.
        """
        if not run_id:
            raise InvalidInputError("`resume` must be a run id under runs/, was ''.")
        path = existing_run_dir(root, run_id, _CONFIG, "start a new one without --resume.")
        made_with = _check_resumable(run_id, read_json(path / _CONFIG), path / _CONFIG, profile)
        run = cls(path)
        run.lock.acquire()
        try:
            for folder in (path, *sorted(p for p in path.glob("fold*") if p.is_dir())):
                remove_stale_temps(folder)
            if not run.has_progress():
                raise InvalidInputError(
                    f"run {run_id!r} has no checkpoint and no finished fold in {path}: it "
                    "stopped before its first checkpoint, so there is nothing to resume: start "
                    f"it anew with `fxstore train --profile {made_with} --store {root}` (and "
                    "delete its folder)."
                )
        except BaseException:
            run.lock.release()
            raise
        return run

    def has_progress(self) -> bool:
        """Whether any fold finished or left a checkpoint."""
        return any(
            any(folder.glob("results.npz")) or any(folder.glob("checkpoint*.npz"))
            for folder in self.path.glob("fold*")
        )

    def has_checkpoint(self) -> bool:
        """Whether any fold holds a checkpoint."""
        return any(self.path.glob("fold*/checkpoint*.npz"))

    def started(self) -> str | None:
        """When the run started, from its ``status.json`` (None without one)."""
        status = read_status(self.path)
        return status.started if status is not None else None

    def fold_dir(self, index: int) -> Path:
        folder = fold_dir(self.path, index)
        with os_errors(folder, "create"):
            folder.mkdir(exist_ok=True)
        return folder

    def checkpoint_path(self, index: int, seed_index: int = 0) -> Path:
        """The fold's checkpoint (``checkpoint-seed<k>.npz`` for the k-th extra seed)."""
        name = "checkpoint.npz" if seed_index == 0 else f"checkpoint-seed{seed_index}.npz"
        return self.fold_dir(index) / name

    def _evals_path(self, index: int, seed_index: int) -> Path:
        name = "evals.json" if seed_index == 0 else f"evals-seed{seed_index}.json"
        return self.fold_dir(index) / name

    def write_config(
        self,
        config: TrainConfig,
        sizes: Mapping[str, int],
        cache: CachedMarket,
        spec: ContractSpec,
    ) -> None:
        """Write ``config.json`` (with the contract spec its PnL is booked at); if that
        fails, the (still empty) run folder is removed."""
        try:
            atomic_write_json(
                self.path / _CONFIG,
                {
                    "kind": "train",
                    "config": config.to_json(),
                    "resolved": dict(sizes),
                    "fxcache": cache.to_json(config.symbol),
                    "contract": spec.to_json(),
                    **run_inputs(config, cache),
                },
            )
        except BaseException:
            with contextlib.suppress(OSError):
                self.path.rmdir()  # only if empty: nothing but this run's own folder
            raise

    def plan_resume(self, root: Path) -> ResumePlan:
        """The run's settings, once every input it depends on is found unchanged
        (:func:`~fxstore.train.runs.resume.plan_resume`)."""
        where = self.path / _CONFIG
        return plan_resume(self.run_id, read_json(where), where, root)

    def read_sizes(self) -> dict[str, int]:
        """The sizes the run resolved when it started (n_envs, batch_size, replay_size)."""
        where = self.path / _CONFIG
        sizes = read_json(where).get("resolved")
        keys = ("n_envs", "batch_size", "replay_size")
        if not isinstance(sizes, dict) or not all(isinstance(sizes.get(k), int) for k in keys):
            raise InvalidInputError(
                f"{where}: `resolved` must hold integer {', '.join(keys)}; the run cannot resume."
            )
        return {k: int(sizes[k]) for k in keys}

    def write_evals(
        self,
        index: int,
        evals: list[dict[str, float | None]],
        chosen: str,
        best_step: int | None,
        seed_index: int = 0,
    ) -> None:
        """The fold's validation evaluations and which policy traded its test window:
        "best" (the weights of `best_step`), "flat" (none beat standing aside) or "last"."""
        atomic_write_json(
            self._evals_path(index, seed_index),
            {"evals": evals, "chosen": chosen, "best_step": best_step},
        )

    def write_fold(self, fold: Fold, results: Mapping[str, FoldResult]) -> None:
        folder = self.fold_dir(fold.index)
        arrays: dict[str, npt.NDArray[np.generic]] = {}
        for policy, result in results.items():
            arrays[f"{policy}/pnl"] = result.pnl
            arrays[f"{policy}/positions"] = result.positions
            arrays[f"{policy}/in_sample_sharpe"] = np.asarray(result.in_sample_sharpe)
            for name, value in (result.choice or {}).items():
                arrays[f"{policy}/choice/{name}"] = np.asarray(value, dtype=np.float64)
        first = next(iter(results.values()))
        arrays["trading_day"] = first.trading_day
        if first.ts_close is not None:
            arrays["ts_close"] = first.ts_close
        atomic_write_json(
            folder / "metrics.json",
            {
                "fold": fold.to_json(),
                "policies": {p: r.metrics.to_json() for p, r in results.items()},
                "in_sample_sharpe_daily": {
                    p: r.in_sample_sharpe if np.isfinite(r.in_sample_sharpe) else None
                    for p, r in results.items()
                },
                "choices": {
                    p: choice_json(r.choice) for p, r in results.items() if r.choice is not None
                },
            },
        )
        plot_equity(folder / "equity.png", fold, results)
        with atomic_path(folder / "results.npz") as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]

    def read_fold(
        self, fold: Fold, bars_per_day: float, capital: float, seed: int
    ) -> dict[str, FoldResult] | None:
        path = fold_dir(self.path, fold.index) / "results.npz"  # reading makes no folder
        if not path.is_file():
            return None
        arrays = _read_results(path)
        day = arrays.pop("trading_day")
        ts_close = arrays.pop("ts_close", None)  # absent in folders of older versions
        policies = sorted({k.split("/", 1)[0] for k in arrays})
        missing = [
            f"{p}/{n}" for p in policies for n in ("pnl", "positions") if f"{p}/{n}" not in arrays
        ]
        if missing:
            raise InvalidInputError(f"{path}: has no {missing[0]!r}; {_REDO_FOLD}")
        return {
            p: fold_result(
                fold,
                p,
                arrays[f"{p}/pnl"],
                arrays[f"{p}/positions"],
                day,
                bars_per_day=bars_per_day,
                capital=capital,
                seed=seed,
                in_sample=float(arrays.get(f"{p}/in_sample_sharpe", np.nan)),
                ts_close=ts_close,
                choice=_choice(arrays, p),
            )
            for p in policies
        }

    def read_evals(self, index: int, seed_index: int = 0) -> list[dict[str, float | None]]:
        """The validation evaluations of fold `index` (empty when it has none)."""
        path = self._evals_path(index, seed_index)
        if not path.is_file():
            return []
        evals = read_json(path).get("evals")
        return list(evals) if isinstance(evals, list) else []
