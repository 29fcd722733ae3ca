"""The GPUs of this machine, and a local pool with one worker process per GPU (``--gpus``).

Each worker is a fresh (spawned) Python process whose ``CUDA_VISIBLE_DEVICES`` names its one
GPU before anything imports CuPy, so it makes its own CUDA context there and registers its
own pinned, device-mapped fxcache; nothing CUDA made in the parent is inherited. Counting
the GPUs makes no CUDA context either: it reads ``CUDA_VISIBLE_DEVICES`` and ``nvidia-smi
-L``.

:class:`GpuPool` offers :meth:`GpuPool.submit_all` as :class:`fxstore.executor.RayPool`
does (each task's result or exception as it ends, so one failure never stops the others),
and a stop that reaches the tasks in flight: a worker ignores SIGINT (a Ctrl-C in the
terminal reaches every process of the group; the parent decides) and sees
:func:`worker_stop_event` set once the parent asks the pool to stop. A task reports
progress through :func:`worker_reporter`; the parent hands each report to the pool's
``on_report`` while it waits for the tasks (so ``train --gpus N`` shows every fold's
progress as the serial run does).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
import os
import queue
import signal
import subprocess
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Final, TypeVar

from fxstore.errors import FxStoreWarning, InvalidInputError, WorkerLostError
from fxstore.executor import call_with_warnings

__all__ = [
    "GpuPool",
    "check_gpus",
    "open_gpu_pool",
    "visible_gpus",
    "worker_reporter",
    "worker_stop_event",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: How long `nvidia-smi -L` may take before the GPUs count as unknown.
_NVIDIA_SMI_TIMEOUT_S: Final = 20

#: Set in a pool's worker by its initializer: the event the parent sets to ask for a stop.
_stop_event: multiprocessing.synchronize.Event | None = None
#: Set likewise: the queue a task's progress reports go to, for the parent.
_reports: multiprocessing.queues.Queue[Any] | None = None


def visible_gpus(cuda_visible_devices: str | None) -> tuple[str, ...]:
    """The GPUs this process may use, each as the ``CUDA_VISIBLE_DEVICES`` value that shows a
    worker that GPU alone.

    `cuda_visible_devices` is this process's ``CUDA_VISIBLE_DEVICES`` (None: not set). As
    CUDA reads it, the list ends at its first entry that names no GPU ("" or "-1" hide them
    all); without it, every GPU that ``nvidia-smi -L`` lists counts ("0", "1", ...), and
    none where there is no ``nvidia-smi``.
    """
    listed = _nvidia_smi_gpus()
    if cuda_visible_devices is None:
        return tuple(str(i) for i in range(len(listed or ())))
    found: list[str] = []
    for raw in cuda_visible_devices.split(","):
        entry = raw.strip()
        if not entry or entry.startswith("-") or not _exists(entry, listed):
            break
        found.append(entry)
    return tuple(found)


def _nvidia_smi_gpus() -> list[str] | None:
    """The lines of ``nvidia-smi -L`` that name a GPU or MIG device, or None where it does not
    run (then the entries of CUDA_VISIBLE_DEVICES are taken as they are)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"],
            capture_output=True,
            text=True,
            check=True,
            timeout=_NVIDIA_SMI_TIMEOUT_S,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip().startswith(("GPU ", "MIG "))]


def _exists(entry: str, listed: list[str] | None) -> bool:
    """Whether the CUDA_VISIBLE_DEVICES `entry` (an index, or a GPU-/MIG- UUID or its prefix)
    names a device that ``nvidia-smi -L`` lists (True when it could not be asked)."""
    if listed is None:
        return True
    if entry.isdigit():
        return int(entry) < sum(line.startswith("GPU ") for line in listed)
    return any(f"UUID: {entry}" in line for line in listed)


def check_gpus(
    n: int, visible: Sequence[str], *, device: str, executor_kind: str
) -> tuple[str, ...]:
    """The ``CUDA_VISIBLE_DEVICES`` value of each of `n` GPU workers (``--gpus N``), the
    first `n` of `visible`.

    Raises
    ------
    InvalidInputError
        `n` < 1; the run is on the CPU (`device` "cpu"); the Ray executor (which gives each
        fold one GPU itself); more GPUs than are visible; or CuPy is not installed.
    """
    if n < 1:
        raise InvalidInputError(f"--gpus must be >= 1, was {n}.")
    if device == "cpu":
        raise InvalidInputError(
            f"--gpus {n} trains folds on GPUs, but the device is 'cpu'; pass --device cuda "
            "(or auto), or leave out --gpus."
        )
    if executor_kind == "ray":
        raise InvalidInputError(
            f"--gpus {n} is for the local executor; with --executor ray each fold asks Ray "
            "for one GPU and as many run at once as the cluster has: leave out --gpus."
        )
    if n > len(visible):
        seen = f"{len(visible)} GPU{'s are' if len(visible) != 1 else ' is'} visible"
        if visible:
            seen += f" ({', '.join(visible)})"
        fix = f"pass --gpus {len(visible)} or fewer" if visible else "leave out --gpus"
        raise InvalidInputError(
            f"--gpus {n}: {seen} to this process (CUDA_VISIBLE_DEVICES, nvidia-smi -L); {fix}."
        )
    import importlib.util

    if importlib.util.find_spec("cupy") is None:  # found, not imported: no CUDA context here
        raise InvalidInputError(
            f"--gpus {n} needs CuPy, which is not installed; install fxstore[gpu]."
        )
    return tuple(visible[:n])


def worker_stop_event() -> multiprocessing.synchronize.Event | None:
    """In a :class:`GpuPool` worker: the event set once the parent asks the pool to stop
    (the task saves its checkpoint and returns); None in any other process."""
    return _stop_event


def worker_reporter() -> Callable[[Any], None] | None:
    """In a :class:`GpuPool` worker: a call that sends a (picklable) progress report to the
    parent, which hands it to the pool's ``on_report``; None in any other process."""
    reports = _reports
    return None if reports is None else reports.put


def _start_worker(
    device: str,
    stop: multiprocessing.synchronize.Event,
    reports: multiprocessing.queues.Queue[Any],
) -> None:
    """A pool worker's first act, before any task (and so CuPy) is unpickled: show it its GPU."""
    global _stop_event, _reports
    os.environ["CUDA_VISIBLE_DEVICES"] = device
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the tasks (see stop)
    _stop_event, _reports = stop, reports


class GpuPool:
    """One spawned worker process per entry of `devices` (a GPU named twice gets two),
    each running one task at a time.

    A worker that dies (killed, out of memory) fails its task with WorkerLostError and is
    replaced by a fresh one on the same GPU. `on_report` gets, in this process, every report
    a task sent with :func:`worker_reporter`, while :meth:`submit_all` waits.
    """

    def __init__(
        self, devices: Sequence[str], on_report: Callable[[Any], None] | None = None
    ) -> None:
        self.devices = tuple(devices)
        self.workers = len(self.devices)
        self._context = multiprocessing.get_context("spawn")  # nothing CUDA is inherited
        self._stop = self._context.Event()
        self._reports: multiprocessing.queues.Queue[Any] = self._context.Queue()
        self._on_report = on_report
        self._slots = [self._new_worker(d) for d in self.devices]

    def _new_worker(self, device: str) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            1,
            mp_context=self._context,
            initializer=_start_worker,
            initargs=(device, self._stop, self._reports),
        )

    def _drain_reports(self) -> None:
        """Hand the reports the tasks sent so far to `on_report` (dropped without one)."""
        while True:
            try:
                report = self._reports.get_nowait()
            except queue.Empty:
                return
            if self._on_report is not None:
                self._on_report(report)

    def stop(self) -> None:
        """Ask the tasks in flight to stop at their next safe point; start no more."""
        self._stop.set()

    def close(self) -> None:
        """Stop the tasks in flight and wait for the workers to end."""
        self.stop()
        for worker in self._slots:
            worker.shutdown(wait=True, cancel_futures=True)
        self._drain_reports()
        self._reports.close()
        self._reports.cancel_join_thread()  # nothing of ours is left in it to flush

    def submit_all(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> Iterator[tuple[int, R | BaseException]]:
        """Run every item (one per GPU at once); yield (position, result or exception) as
        each task ends, so one failure never stops the others.

        `should_stop` is asked about twice a second: once it says so, the tasks in flight
        are asked to stop (:func:`worker_stop_event`), and those that come back are yielded;
        no more start.
        """
        waiting = list(enumerate(items))
        # each task in flight: its worker's slot and its position in `items`
        running: dict[Future[tuple[R, list[FxStoreWarning]]], tuple[int, int]] = {}
        while waiting or running:
            free = sorted(set(range(self.workers)) - {slot for slot, _ in running.values()})
            for slot in free:
                if not waiting or self._stop.is_set():
                    break
                position, item = waiting.pop(0)
                future = self._slots[slot].submit(call_with_warnings, fn, item)
                running[future] = (slot, position)
            if not running:
                return
            done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
            self._drain_reports()
            for future in sorted(done, key=lambda f: running[f][1]):
                slot, position = running.pop(future)
                outcome = self._result(future, slot)
                yield position, outcome
            if should_stop is not None and should_stop():
                self.stop()

    def _result(
        self, future: Future[tuple[R, list[FxStoreWarning]]], slot: int
    ) -> R | BaseException:
        """The task's value (its warnings shown here), or its exception."""
        try:
            value, caught = future.result()
        except BrokenProcessPool as err:  # its process died: a fresh one for the next task
            self._slots[slot].shutdown(wait=False)
            self._slots[slot] = self._new_worker(self.devices[slot])
            return WorkerLostError(
                f"its worker process on GPU {self.devices[slot]} died ({err}); check the "
                "machine's memory (dmesg) and the worker's output above, then run again"
            )
        except Exception as err:  # reported per task by the caller
            return err
        for warning in caught:  # as the Ray pool shows its workers'
            warnings.warn(warning, stacklevel=2)
        return value


@contextlib.contextmanager
def open_gpu_pool(
    devices: Sequence[str], on_report: Callable[[Any], None] | None = None
) -> Iterator[GpuPool]:
    """A :class:`GpuPool` on `devices` (``CUDA_VISIBLE_DEVICES`` values) for the block; at its
    end (or an error) the tasks in flight are stopped at a safe point and the workers end."""
    pool = GpuPool(devices, on_report)
    try:
        yield pool
    finally:
        pool.close()
