"""The ingest pool's processes: forked from a server that imports and warms the day builder.

This module imports nothing heavy, so the CLI can start the server before it imports the
pipeline (numpy, numba, pyarrow: about a second); the server's own imports and warm-up
(about another second) then run alongside the parent's.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import signal
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

__all__ = ["WarningsToParent", "ignore_interrupts", "start_worker_server", "worker_context"]

T = TypeVar("T")
R = TypeVar("R")
#: Warnings a task raised: (category, message), to raise again in the parent.
Caught = list[tuple[type[Warning], str]]


def _catching(fn: Callable[[T], R], item: T) -> tuple[R, Caught]:
    """Run ``fn(item)`` in a worker, keeping the warnings it raises for the parent."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(item)
    return result, [(w.category, str(w.message)) for w in caught]


def _raise_again(result: tuple[R, Caught]) -> R:
    for category, message in result[1]:
        warnings.warn(category(message), stacklevel=3)
    return result[0]


class _Imap(Protocol):
    """What :class:`WarningsToParent` uses of the pool it wraps (a process pool, or
    :class:`fxstore.executor.RayPool`): its results in submission order."""

    def imap(self, fn: Callable[[T], R], items: Iterable[T], /) -> Iterator[R]: ...


class WarningsToParent:
    """A task pool whose tasks' warnings are raised again in this process, as each result
    arrives: a worker's stderr would print them raw (with its source line), past the
    command's own display of warnings."""

    def __init__(self, pool: _Imap) -> None:
        self._pool = pool

    def imap(self, fn: Callable[[T], R], items: Iterable[T], /) -> Iterator[R]:
        for result in self._pool.imap(functools.partial(_catching, fn), items):
            yield _raise_again(result)

    def map(self, fn: Callable[[T], R], items: Iterable[T], /) -> list[R]:
        return list(self.imap(fn, items))


def ignore_interrupts() -> None:
    """A pool process's initializer: Ctrl-C reaches every process of the terminal, but only
    the parent decides what to do (it stops the pool); a worker left to it would print a
    traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_context() -> multiprocessing.context.BaseContext:
    """Processes that start fast and safely: forked from a server that already imported the
    day builder and ran its kernels once (compiled code loaded once, not per worker), or
    spawned where there is no forkserver."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(
            [
                "fxstore.ingest.run.server_signals",
                "fxstore.ingest.run.day_builder",
                "fxstore.ingest.run.warm",
            ]
        )
        return context
    return multiprocessing.get_context("spawn")


def start_worker_server() -> None:
    """Start the pool's server now, so it is ready when the pool starts (a no-op when it
    runs already or where there is no forkserver)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        worker_context()
        multiprocessing.forkserver.ensure_running()
