"""Walk-forward folds as tasks: on Ray (``--executor ray``) or one per local GPU (``--gpus N``).

A fold is independent of the others: a fresh agent, replay and optimiser, seeded from the
run's seed and the fold's index, learning only on the fold's own rows. So a task needs no
more than the run's settings, the store root, the run folder and the fold: it opens the
fxcache itself (on the GPU it was given, one CUDA context per task: Ray sets
CUDA_VISIBLE_DEVICES for a task that asks for ``num_gpus=1``, and :mod:`fxstore.gpus` for
its worker process of each GPU), writes its checkpoints and
evaluations into the run folder as the serial loop does, and returns the fold's results.
The driver holds the run's lock, writes each fold's results as it comes back, and the
totals once all are in, so the run folder ends as a serial run leaves it.

On Ray, folds run at once as far as the cluster has room: one per GPU where the run is on
a GPU, one per CPU otherwise; with ``--gpus N``, one per GPU of the N. One fold that fails
does not stop the others; once they are all back, the run fails naming the fold (the
finished folds are kept: ``--resume`` goes on from them). A stop (SIGINT, SIGTERM) cancels
the Ray tasks in flight, which keep their last checkpoint; a GPU worker's fold saves its
checkpoint at its next step instead.
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fxstore.config import TrainConfig
from fxstore.config.executor import ExecutorConfig
from fxstore.errors import FoldFailedError, FxStoreError, RunInterruptedError
from fxstore.executor import open_ray_pool
from fxstore.gpus import open_gpu_pool, worker_reporter, worker_stop_event
from fxstore.train.evaluate.results import FoldResult
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.runs.folder import RunFolder
from fxstore.train.runs.status import StopRequest

__all__ = ["FoldTask", "task_stop", "train_folds_on_gpus", "train_folds_on_ray"]

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
        return f"fold {self.fold.number} of run {self.run_path.name}"


class _FoldPool(Protocol):
    """What the fold runner uses of :class:`~fxstore.executor.RayPool` and
    :class:`~fxstore.gpus.GpuPool`."""

    workers: int

    def submit_all(
        self,
        fn: Callable[[FoldTask], dict[str, FoldResult]],
        items: Sequence[FoldTask],
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> Iterator[tuple[int, dict[str, FoldResult] | BaseException]]: ...


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
    tasks = _tasks(config, root, run, folds, sizes, n_folds)
    with open_ray_pool(executor, None, num_gpus=1 if on_gpu else 0) as pool:
        logger.info("training %d folds on Ray, %d at once", len(tasks), pool.workers)
        yield from _run_tasks(pool, run_fold, tasks, run, stop, "a Ray task")


def train_folds_on_gpus(
    config: TrainConfig,
    root: Path,
    run: RunFolder,
    folds: Sequence[Fold],
    run_fold: Callable[[FoldTask], dict[str, FoldResult]],
    sizes: dict[str, int],
    n_folds: int,
    stop: StopRequest | None,
    devices: Sequence[str],
    on_progress: Callable[[Any], None] | None = None,
) -> Iterator[tuple[Fold, dict[str, FoldResult]]]:
    """Run `folds` as tasks of `run_fold` in local worker processes, one per entry of
    `devices` (``CUDA_VISIBLE_DEVICES`` values, a GPU named once per worker it hosts:
    :mod:`fxstore.gpus`); yield each (fold,
    results by policy) as it finishes. `on_progress` gets here the progress reports the
    tasks send (:func:`task_reporter`).

    Once `stop` is set, the folds in flight save their checkpoint at their next step and
    this returns when they are back; the caller raises RunInterruptedError at the first
    fold not done.

    Raises
    ------
    FoldFailedError
        As :func:`train_folds_on_ray`.
    """
    if not folds:
        return
    tasks = _tasks(config, root, run, folds, sizes, n_folds)
    with open_gpu_pool(devices[: len(tasks)], on_progress) as pool:
        logger.info("training %d folds on %d GPU workers", len(tasks), pool.workers)
        yield from _run_tasks(pool, run_fold, tasks, run, stop, "a GPU worker's task")


def _tasks(
    config: TrainConfig,
    root: Path,
    run: RunFolder,
    folds: Sequence[Fold],
    sizes: dict[str, int],
    n_folds: int,
) -> list[FoldTask]:
    return [
        FoldTask(config, root.absolute(), run.path.absolute(), fold, sizes, n_folds)
        for fold in folds
    ]


def _run_tasks(
    pool: _FoldPool,
    run_fold: Callable[[FoldTask], dict[str, FoldResult]],
    tasks: Sequence[FoldTask],
    run: RunFolder,
    stop: StopRequest | None,
    how: str,
) -> Iterator[tuple[Fold, dict[str, FoldResult]]]:
    """Yield each task's fold and results as it ends; once all are back, raise for the
    failed ones (see :func:`train_folds_on_ray`)."""
    failed: dict[int, BaseException] = {}

    def stopping() -> bool:  # the caller raises RunInterruptedError at the next fold
        return stop is not None and stop.signum is not None

    for position, value in pool.submit_all(run_fold, tasks, should_stop=stopping):
        fold = tasks[position].fold
        if isinstance(value, RunInterruptedError) and stopping():
            continue  # stopped at our request, its checkpoint saved
        if isinstance(value, BaseException):
            logger.warning("fold %d failed: %s", fold.index, value)
            failed[fold.index] = value
            continue
        yield fold, value
    if stopping():
        return
    if failed:
        raise _failure(failed, run, how)


def _failure(failed: dict[int, BaseException], run: RunFolder, how: str) -> BaseException:
    """The error of the lowest-numbered failed fold, naming it and the others that failed."""
    first = min(failed)
    err = failed[first]
    others = sorted(set(failed) - {first})
    more = f"; folds {', '.join(str(i + 1) for i in others)} failed too" if others else ""
    if isinstance(err, FxStoreError):
        failure = FoldFailedError(
            f"fold {first + 1}: {str(err).rstrip('.')}{more} (the other folds are kept: --resume "
            f"{run.run_id} trains the failed ones again)"
        )
        failure.__cause__ = err
        return failure
    err.add_note(f"in fold {first + 1} (trained as {how}){more}")
    return err


def task_reporter() -> Callable[[Any], None] | None:
    """In a GPU worker (:mod:`fxstore.gpus`): where a fold task sends its progress reports
    (to the driver's display); None anywhere else (a Ray task reports none)."""
    return worker_reporter()


@functools.cache
def task_stop() -> StopRequest | None:
    """In a GPU worker (:mod:`fxstore.gpus`): a StopRequest that is set, as by SIGINT, once
    the driver asks its pool to stop; None anywhere else (a Ray task is cancelled instead)."""
    event = worker_stop_event()
    if event is None:
        return None
    stop = StopRequest()
    if event.is_set():  # asked before the task began: it stops at its first step
        stop.request(signal.SIGINT)
        return stop

    def watch() -> None:
        event.wait()
        stop.request(signal.SIGINT)

    threading.Thread(target=watch, name="fxstore-stop", daemon=True).start()
    return stop
