"""Where parallel work units run: the local process pool, or a Ray cluster (``--executor ray``).

A work unit (an ingest group of files or trading day, a walk-forward fold) is a picklable
task object handed to a module-level function; the function reads its inputs and writes its
files itself and returns a small description. The driver keeps what must be serial (the
front-month decisions in trading-day order, the manifest commit). Both executors give the
same results in the same order, so the output is byte-identical whichever runs it.
(``train --gpus N`` runs folds on local worker processes, one per GPU: :mod:`fxstore.gpus`.)

Ray is an optional dependency (``pip install 'fxstore[ray]'``), imported only here and only
when a Ray executor is opened. :class:`RayPool` offers what the stages use of
``multiprocessing.Pool`` (``imap`` and ``map``, results in submission order, the earliest
failing task's own exception raised), plus :meth:`RayPool.submit_all` for work whose
failures are reported per task while the others keep going (training folds).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from fxstore.config.executor import EXECUTOR_KINDS, ExecutorConfig, ExecutorKind
from fxstore.errors import FxStoreError, FxStoreWarning, InvalidInputError, WorkerLostError
from fxstore.reaper import start_reaper

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "EXECUTOR_KINDS",
    "ExecutorConfig",
    "ExecutorKind",
    "RayPool",
    "TaskPool",
    "WorkerLostError",
    "check_reachable",
    "open_local_pool",
    "open_ray_pool",
    "require_ray",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: How often Ray runs a task again when its worker process (or node) died under it.
MAX_RETRIES: Final = 3

INSTALL_HINT: Final = "install it with `pip install 'fxstore[ray]'`"


class TaskPool(Protocol):
    """What the stages use of a process pool: ordered results, the first error raised."""

    def map(self, fn: Callable[[T], R], items: Iterable[T], /) -> list[R]: ...

    def imap(self, fn: Callable[[T], R], items: Iterable[T], /) -> Iterator[R]: ...


@contextlib.contextmanager
def open_local_pool(processes: int) -> Iterator[TaskPool]:
    """A pool of `processes` local worker processes for the block (ingest's and synth's).

    They fork from a server that imported the ingest kernels
    (:func:`fxstore.ingest.run.pool.worker_context`) and ignore Ctrl-C (the parent stops
    the pool); their tasks' warnings are raised again here as each result arrives. Leaving
    the block stops the workers, those still running included.
    """
    from fxstore.ingest.run.pool import WarningsToParent, ignore_interrupts, worker_context

    with worker_context().Pool(processes, initializer=ignore_interrupts) as pool:
        yield WarningsToParent(pool)


def require_ray() -> ModuleType:
    """The ``ray`` module, or a one-line InvalidInputError saying how to install it."""
    try:
        import ray
    except ImportError as err:
        raise InvalidInputError(
            f"--executor ray needs Ray, which is not installed ({err}); {INSTALL_HINT}, "
            "or leave out --executor to use the local pool."
        ) from err
    return ray


def describe_task(item: object) -> str:
    """What a task is, for error lines: its own ``describe()``, else its repr."""
    describe = getattr(item, "describe", None)
    return str(describe()) if callable(describe) else repr(item)


class RayPool:
    """Runs tasks as Ray tasks, at most `workers` at once, results in submission order.

    Each task asks for one CPU (and `num_gpus` GPUs) and is retried up to
    :data:`MAX_RETRIES` times when its worker dies; an exception the task itself raises is
    not retried, and comes back as that exception (an FxStoreError keeps its one-line
    message, naming the day and file as in the local pool).
    """

    def __init__(self, ray: ModuleType, workers: int, *, num_gpus: float = 0) -> None:
        self._ray = ray
        self.workers = max(1, workers)
        self._num_gpus = num_gpus
        self._remote: dict[Callable[..., Any], Any] = {}

    def _remote_of(self, fn: Callable[[T], R]) -> Any:
        """`fn` as a Ray task that brings its FxStoreWarnings back
        (:func:`call_with_warnings`)."""
        if fn not in self._remote:
            task = self._ray.remote(num_cpus=1, num_gpus=self._num_gpus, max_retries=MAX_RETRIES)
            self._remote[fn] = _BoundTask(task(call_with_warnings), fn)
        return self._remote[fn]

    def _result(self, ref: Any, item: object) -> Any:
        """The task's value, or its exception: an FxStoreError as the task raised it."""
        ray = self._ray
        try:
            value, caught = ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            if isinstance(err.cause, FxStoreError):  # a user error: its one line, as raised
                raise err.cause.with_traceback(None) from None
            raise  # a bug: Ray's error is of the same class and shows the task's traceback
        except (
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.NodeDiedError,
            ray.exceptions.OutOfMemoryError,
        ) as err:
            raise WorkerLostError(
                f"{describe_task(item)}: its Ray worker died {MAX_RETRIES + 1} times "
                f"({type(err).__name__}); check the workers' memory and logs "
                "(`ray logs`), then run again: finished work is kept."
            ) from err
        for warning in caught:  # as the local pool's workers show theirs
            warnings.warn(warning, stacklevel=2)
        return value

    def imap(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """The results of `fn` over `items`, in order, as each is due; tasks still in flight
        when the caller stops (an error, a closed generator) are cancelled."""
        ray = self._ray
        queue = list(items)
        remote = self._remote_of(fn)
        refs: list[Any] = []
        running: set[Any] = set()

        def fill() -> None:
            while len(refs) < len(queue) and len(running) < self.workers:
                ref = remote.remote(queue[len(refs)])
                refs.append(ref)
                running.add(ref)

        try:
            for i, item in enumerate(queue):
                fill()
                while refs[i] in running:
                    done, _ = ray.wait(list(running), num_returns=1, fetch_local=False)
                    running.difference_update(done)
                    fill()
                yield self._result(refs[i], item)
                refs[i] = None  # its value is handed on: let Ray free it
        finally:
            for ref in running:
                ray.cancel(ref)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """The results of `fn` over `items`, in order."""
        return list(self.imap(fn, items))

    def submit_all(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> Iterator[tuple[int, R | BaseException]]:
        """Run every item (`workers` at once); yield (position, result or exception) as each
        task ends, so one failure never stops the others.

        `should_stop` is asked about twice a second: once it says so, the tasks in flight
        are cancelled and no more start (the caller says what was left undone).
        """
        remote = self._remote_of(fn)
        waiting = list(enumerate(items))
        running: dict[Any, int] = {}
        try:
            while waiting or running:
                while waiting and len(running) < self.workers:
                    position, item = waiting.pop(0)
                    running[remote.remote(item)] = position
                ready, _ = self._ray.wait(list(running), num_returns=1, timeout=0.5)
                for ref in ready:
                    position = running.pop(ref)
                    try:
                        value: R | BaseException = self._result(ref, items[position])
                    except Exception as err:  # reported per task by the caller
                        value = err
                    yield position, value
                if should_stop is not None and should_stop():
                    return
        finally:
            for ref in running:
                self._ray.cancel(ref)


def call_with_warnings(fn: Callable[[T], R], item: T) -> tuple[R, list[FxStoreWarning]]:
    """Run `fn(item)` in a worker (Ray's, or :mod:`fxstore.gpus`'); its value and the
    FxStoreWarnings it raised, for the driver to show (a worker's stderr would cut through
    the progress bar; Ray does not forward it here)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FxStoreWarning)
        value = fn(item)
    kept = [w.message for w in caught if isinstance(w.message, FxStoreWarning)]
    return value, kept


@dataclass(frozen=True, slots=True)
class _BoundTask:
    """A Ray task of :func:`call_with_warnings` bound to one function: ``.remote(item)``."""

    task: Any
    fn: Callable[..., Any]

    def remote(self, item: object) -> Any:
        return self.task.remote(self.fn, item)


def _cluster_slots(ray: ModuleType, num_gpus: float) -> int:
    """Tasks the cluster runs at once: one per CPU, or per GPU for tasks that need one."""
    resources = ray.cluster_resources()
    if num_gpus:
        return max(1, int(resources.get("GPU", 0) // num_gpus))
    return max(1, int(resources.get("CPU", 1)))


def check_reachable(address: str, timeout_s: float) -> None:
    """Fail with one line unless something answers at the cluster address `address`
    (``HOST:PORT`` or ``ray://HOST:PORT``) within `timeout_s` seconds; "auto" and other
    forms are left to Ray, which answers those at once.

    Ray itself waits minutes on an address where nothing answers, retrying with a warning
    every few seconds.

    Raises
    ------
    InvalidInputError
        Nothing accepts a connection at the address in time.
    """
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as err:
        reason = "no answer" if isinstance(err, TimeoutError) else err.strerror or str(err)
        raise InvalidInputError(
            f"Ray cluster at {address}: cannot connect within {timeout_s:g} s ({reason}); "
            "check --ray-address (`ray status` on the head node shows it) or raise "
            "--ray-timeout."
        ) from err


#: Ray's variable for how many times a driver tries a cluster's GCS (about 30 s each on
#: a port that answers but is no GCS; 20 times by default).
_GCS_ATTEMPTS_ENV: Final = "RAY_gcs_server_port_wait_time_s"


@contextlib.contextmanager
def _one_gcs_attempt(joining: bool) -> Iterator[None]:
    """Within the block, a driver joining a cluster tries its GCS once (unless the user set
    Ray's variable): an address that answers but is no Ray cluster fails in about 30 s,
    not ten minutes."""
    if not joining or _GCS_ATTEMPTS_ENV in os.environ:
        yield
        return
    os.environ[_GCS_ATTEMPTS_ENV] = "1"
    try:
        yield
    finally:
        os.environ.pop(_GCS_ATTEMPTS_ENV, None)


@contextlib.contextmanager
def open_ray_pool(
    config: ExecutorConfig, workers: int | None, *, num_gpus: float = 0
) -> Iterator[RayPool]:
    """A :class:`RayPool` on the cluster of `config` (joined for the block, left after it).

    `workers` is the number of tasks in flight (None: one per CPU of the cluster, or one
    per GPU when each task asks for `num_gpus`). A Ray
    instance this process already started is used as it is and left running; one this
    block started (or joined) is shut down at its end. A Ray instance started on this
    machine goes with this process even when it is killed (:mod:`fxstore.reaper`).

    Raises
    ------
    InvalidInputError
        Ray is not installed, or the cluster at `config.address` cannot be reached (within
        `config.connect_timeout_s`).
    """
    ray = require_ray()
    started = False
    reaper = None
    if not ray.is_initialized():
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,  # worker output would cut through the progress bar
            "logging_level": logging.ERROR,
        }
        if config.address is None and workers is not None:
            options["num_cpus"] = workers
        if config.address is not None:
            check_reachable(config.address, config.connect_timeout_s)
        try:
            with _one_gcs_attempt(config.address is not None):
                # "local": a new instance, never one another program left running here
                # (ray.init() alone would join the last cluster started on this machine)
                ray.init(address=config.address or "local", **options)
        except (ConnectionError, RuntimeError, ValueError) as err:
            where = config.address or "this machine"
            raise InvalidInputError(
                f"Ray cluster at {where}: could not start or join it ({err}); check "
                "--ray-address (`ray status` on the head node shows it)."
            ) from err
        started = True
    try:
        if started and config.address is None:
            reaper = start_reaper(ray.get_runtime_context().get_node_id())
        yield RayPool(
            ray,
            workers if workers is not None else _cluster_slots(ray, num_gpus),
            num_gpus=num_gpus,
        )
    finally:
        if started:
            ray.shutdown()
        if reaper is not None:
            reaper.communicate()  # closes its pipe: it kills what shutdown left, and exits
