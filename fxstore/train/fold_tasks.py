"""Walk-forward folds as Ray tasks (``fxstore train --executor ray``).

A fold is independent of the others: a fresh agent, replay and optimiser, seeded from the
run's seed and the fold's index, learning only on the fold's own rows. So a task needs no
more than the run's settings, the store root, the run folder and the fold: it opens the
fxcache itself (on the GPU Ray gives it, one CUDA context per task: Ray sets
CUDA_VISIBLE_DEVICES for a task that asks for ``num_gpus=1``), writes its checkpoints and
evaluations into the run folder as the serial loop does, and returns the fold's results.
The driver holds the run's lock, writes each fold's results as it comes back, and the
totals once all are in, so the run folder ends as a serial run leaves it.

Folds run at once as far as the cluster has room: one per GPU where the run is on a GPU,
one per CPU otherwise. One fold that fails does not stop the others; once they are all
back, the run fails naming the fold (the finished folds are kept: ``--resume`` goes on
from them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fxstore.config import TrainConfig
from fxstore.config.executor import ExecutorConfig
from fxstore.errors import FoldFailedError, FxStoreError
from fxstore.executor import open_ray_pool
from fxstore.train.backtest import FoldResult
from fxstore.train.runs import RunFolder
from fxstore.train.status import StopRequest
from fxstore.train.walkforward import Fold

__all__ = ["FoldTask", "train_folds_on_ray"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FoldTask:
    """One fold of a run, as a Ray task gets it."""

    config: TrainConfig
    #: The store root and the run folder, absolute (a task may run in another folder).
    root: Path
    run_path: Path
    fold: Fold
    #: n_envs, batch_size, replay_size as the run resolved them.
    sizes: dict[str, int]
    n_folds: int

    def describe(self) -> str:
        return f"fold {self.fold.index} of run {self.run_path.name}"


def train_folds_on_ray(
    config: TrainConfig,
    root: Path,
    run: RunFolder,
    folds: Sequence[Fold],
    run_fold: Callable[[FoldTask], dict[str, FoldResult]],
    sizes: dict[str, int],
    n_folds: int,
    stop: StopRequest | None,
    executor: ExecutorConfig,
    *,
    on_gpu: bool,
) -> Iterator[tuple[Fold, dict[str, FoldResult]]]:
    """Run `folds` as Ray tasks of `run_fold` (:func:`fxstore.train.loop.run_fold_task`:
    the serial loop's own code); yield each (fold, results by policy) as it finishes.

    `on_gpu`: the run trains on a GPU, so each task asks Ray for one (and as many run at
    once as the cluster has GPUs); else one CPU each.

    Once `stop` is set (a signal), the folds in flight are cancelled (each keeps its last
    checkpoint, so ``--resume`` continues it) and this returns; the caller then raises
    RunInterruptedError at the first fold not done.

    Raises
    ------
    FoldFailedError
        Once every fold is back, for the lowest-numbered fold that failed with a user error
        (its message, the fold's index, and how many others failed); a fold that failed
        with any other exception re-raises it, noted with its fold index.
    """
    if not folds:
        return
    tasks = [
        FoldTask(config, root.absolute(), run.path.absolute(), fold, sizes, n_folds)
        for fold in folds
    ]
    failed: dict[int, BaseException] = {}
    num_gpus = 1 if on_gpu else 0
    with open_ray_pool(executor, None, num_gpus=num_gpus) as pool:
        logger.info("training %d folds on Ray, %d at once", len(tasks), pool.workers)

        def stopping() -> bool:  # the caller raises RunInterruptedError at the next fold
            return stop is not None and stop.signum is not None

        for position, value in pool.submit_all(run_fold, tasks, should_stop=stopping):
            fold = folds[position]
            if isinstance(value, BaseException):
                logger.warning("fold %d failed: %s", fold.index, value)
                failed[fold.index] = value
                continue
            yield fold, value
        if stopping():
            return
    if failed:
        first = min(failed)
        err = failed[first]
        others = sorted(set(failed) - {first})
        more = f"; folds {', '.join(map(str, others))} failed too" if others else ""
        if isinstance(err, FxStoreError):
            raise FoldFailedError(
                f"fold {first}: {err}{more} (the other folds are kept: --resume "
                f"{run.run_id} trains the failed ones again)"
            ) from err
        err.add_note(f"in fold {first} (trained as a Ray task){more}")
        raise err
