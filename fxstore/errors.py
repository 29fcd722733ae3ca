"""Exceptions and warnings raised by fxstore.

Every error a user can cause is an :class:`FxStoreError`; the CLI turns it into one
``Error: ...`` line and exit status 1. Anything else escaping fxstore is a bug.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = [
    "FoldFailedError",
    "FxStoreError",
    "FxStoreWarning",
    "InvalidInputError",
    "NoFrontMonthError",
    "RunBusyError",
    "RunInterruptedError",
    "SchemaError",
    "StoreAccessError",
    "SymbolNotFoundError",
    "TrainingDivergedError",
    "WorkerLostError",
]


class FxStoreError(Exception):
    """Root of every error fxstore raises on purpose."""


class InvalidInputError(FxStoreError):
    """An argument, option, file or record the user supplied is not acceptable."""


class SchemaError(FxStoreError):
    """Data does not have the layout, schema or ordering a stage requires."""


class StoreAccessError(FxStoreError):
    """The operating system refused a store file or folder: disk full, read-only, no permission,
    name too long, a file where a folder should be. The data already there is left as it was."""


class SymbolNotFoundError(FxStoreError):
    """A symbol or instrument the user asked for is not in the data or the store."""


class NoFrontMonthError(FxStoreError):
    """No outright of the requested root can be selected as the front month."""


class RunBusyError(FxStoreError):
    """A run is being written by another live process (its lock is held): wait or stop it."""


class RunInterruptedError(FxStoreError):
    """A training run stopped on request (SIGINT or SIGTERM) at a safe point; its checkpoint
    is saved and it resumes with ``fxstore train --resume``.

    `signum` is the signal that asked it to stop; the CLI exits with 128 + `signum`.
    """

    def __init__(self, message: str, *, run_id: str, signum: int) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.signum = signum

    def __reduce__(self) -> tuple[Callable[..., RunInterruptedError], tuple[str]]:
        """Pickled with its fields (a GPU worker's fold sends it back to the driver)."""
        return functools.partial(RunInterruptedError, run_id=self.run_id, signum=self.signum), (
            str(self),
        )


class TrainingDivergedError(FxStoreError):
    """Training produced a non-finite loss, gradient or weight (lower the learning rate)."""


class FoldFailedError(FxStoreError):
    """A walk-forward fold trained as a task failed (its message names the fold); the
    folds that finished are kept for ``--resume``."""


class WorkerLostError(FxStoreError):
    """A task's worker process (or node) died more often than the executor retries it."""


class FxStoreWarning(UserWarning):
    """Data is damaged but usable: it was kept, counted, and reported."""
