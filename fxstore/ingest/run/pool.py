"""The ingest pool's processes: forked from a server that imports and warms the day builder.

This module imports nothing heavy, so the CLI can start the server before it imports the
pipeline (numpy, numba, pyarrow: about a second); the server's own imports and warm-up
(about another second) then run alongside the parent's.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import multiprocessing.forkserver
import signal

__all__ = ["ignore_interrupts", "start_worker_server", "worker_context"]


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
