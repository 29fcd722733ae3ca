"""A run's ``status.json`` and lock: whether it is running, complete, interrupted or failed.

``train`` and ``backtest`` hold an OS lock on ``runs/<run-id>/.lock`` while they write the
run, and keep ``status.json`` up to date (atomically) as folds finish::

    {"format": "fxstore-run-status/1", "run_id": ..., "kind": "train", "symbol": "ES.FUT",
     "profile": "smoke", "started": "2026-12-01T07:30:00Z", "updated": ...,
     "state": "running", "folds_done": 1, "n_folds": 2, "pid": 4242,
     "headline": {"policy": "agent", "total_pnl": 1250.0, "sharpe_daily": 1.3},
     "message": null}

The lock is released when the process ends, however it ends, so a run whose file still says
"running" while nobody holds its lock was killed: it reads as "interrupted". A second process
that wants to write the run (``--resume``) is refused while the lock is held.

A stop request (:class:`StopRequest`, set by the CLI's SIGINT/SIGTERM handler) is how a run is
asked to stop at its next safe point (the next training step, or between folds).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import logging
import os
import shutil
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Final, Literal, get_args

from fxstore.errors import FxStoreError, InvalidInputError, RunBusyError, RunInterruptedError
from fxstore.store import LOCK, atomic_write_json, os_errors, read_json

__all__ = [
    "STATUS",
    "Headline",
    "RunLock",
    "RunState",
    "RunStatus",
    "StatusRecorder",
    "StopRequest",
    "is_locked",
    "read_status",
    "record_run",
    "report_command",
    "resume_command",
    "signal_name",
    "write_status",
]

logger = logging.getLogger(__name__)

RunState = Literal["running", "complete", "interrupted", "failed"]
STATUS: Final = "status.json"
_FORMAT: Final = "fxstore-run-status/1"


def now_iso() -> str:
    """The current UTC time, to the second, as ``2026-12-01T07:30:00Z``."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def resume_command(run_id: str, root: Path) -> str:
    """The command line that resumes training run `run_id` of the store at `root`."""
    from fxstore.remote import store_options

    return f"fxstore train --resume {run_id} {store_options(root)}"


def report_command(run_id: str, root: Path) -> str:
    """The command line that writes run `run_id`'s HTML report (``fxstore report``)."""
    from fxstore.remote import store_options

    return f"fxstore report {run_id} {store_options(root)}"


def signal_name(signum: int) -> str:
    """``SIGINT`` for 2, ``SIGTERM`` for 15 (the number for an unnamed signal)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass(frozen=True, slots=True)
class Headline:
    """The numbers ``fxstore runs`` shows for a run: one policy's pooled test-window totals."""

    policy: str
    """"agent" for a training run; the policy with the best daily Sharpe for a backtest."""
    total_pnl: float
    """Dollars, net of costs, over every test window."""
    sharpe_daily: float
    """Daily Sharpe × √252 of the pooled test days (NaN when undefined)."""


@dataclass(frozen=True, slots=True)
class RunStatus:
    """One run as ``fxstore runs`` lists it."""

    run_id: str
    kind: str
    """"train" or "backtest"."""
    symbol: str
    started: str
    """UTC time the run started, ``YYYY-MM-DDTHH:MM:SSZ``."""
    state: RunState
    folds_done: int
    n_folds: int | None
    """Folds the run will have when complete; None when not known (a run from before
    ``status.json``)."""
    profile: str | None = None
    """The training profile (None for a backtest)."""
    headline: Headline | None = None
    """Totals of the headline policy; None until the run is complete."""
    message: str | None = None
    """Why it failed, or how it stopped."""

    def to_json(self) -> dict[str, object]:
        """The fields as JSON data (NaN as None), as ``status.json`` and ``--json`` hold them."""
        headline = None
        if self.headline is not None:
            sharpe = self.headline.sharpe_daily
            headline = {
                "policy": self.headline.policy,
                "total_pnl": self.headline.total_pnl,
                "sharpe_daily": sharpe if sharpe == sharpe else None,  # NaN != NaN
            }
        return {
            "format": _FORMAT,
            "run_id": self.run_id,
            "kind": self.kind,
            "symbol": self.symbol,
            "profile": self.profile,
            "started": self.started,
            "state": self.state,
            "folds_done": self.folds_done,
            "n_folds": self.n_folds,
            "headline": headline,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object], where: Path) -> RunStatus:
        """Read what :meth:`to_json` wrote; InvalidInputError naming `where` if it is damaged."""
        try:
            state = data["state"]
            if state not in get_args(RunState):
                raise ValueError(f"state {state!r}")
            head = data.get("headline")
            headline = None
            if isinstance(head, dict):
                sharpe = head.get("sharpe_daily")
                headline = Headline(
                    str(head["policy"]),
                    float(head["total_pnl"]),
                    float(sharpe) if isinstance(sharpe, int | float) else float("nan"),
                )
            n_folds = data.get("n_folds")
            profile, message = data.get("profile"), data.get("message")
            return cls(
                run_id=str(data["run_id"]),
                kind=str(data["kind"]),
                symbol=str(data["symbol"]),
                started=str(data["started"]),
                state=state,  # type: ignore[arg-type]
                folds_done=int(data["folds_done"]),  # type: ignore[call-overload]
                n_folds=int(n_folds) if isinstance(n_folds, int) else None,
                profile=str(profile) if profile is not None else None,
                headline=headline,
                message=str(message) if message is not None else None,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidInputError(
                f"{where}: not a run status ({err}); it is damaged or was edited: delete it "
                "(the run then lists from its other files)."
            ) from err


def write_status(folder: Path, status: RunStatus) -> None:
    """Write `status` to ``<folder>/status.json`` atomically, with this process's pid."""
    atomic_write_json(
        folder / STATUS, status.to_json() | {"updated": now_iso(), "pid": os.getpid()}
    )


def read_status(folder: Path) -> RunStatus | None:
    """The run's status (a "running" one whose lock nobody holds reads "interrupted");
    None when the folder has no ``status.json``."""
    path = folder / STATUS
    if not path.is_file():
        return None
    status = RunStatus.from_json(read_json(path), path)
    if status.state == "running" and not is_locked(folder):
        return replace(status, state="interrupted", message="its process ended without a word")
    return status


def is_locked(folder: Path) -> bool:
    """Whether a live process holds the lock of run folder `folder`."""
    path = folder / LOCK
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return False
    with os_errors(path, "read"), fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False


class RunLock:
    """The exclusive lock a process holds on a run folder while it writes the run.

    An OS file lock (flock) on ``.lock``: released when the process ends, so a killed run
    never leaves a stale lock. Two opens in one process conflict as two processes do.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fh: IO[bytes] | None = None

    def acquire(self) -> None:
        """Take the lock, or raise RunBusyError at once when another writer holds it."""
        path = self.folder / LOCK
        with os_errors(path, "create the lock file"):
            fh = open(path, "a+b")  # noqa: SIM115 - kept open while the lock is held
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            fh.close()
            pid = _status_pid(self.folder)
            raise RunBusyError(
                f"run {self.folder.name!r} is being written by a live process"
                f"{f' (pid {pid})' if pid else ''}: wait for it to finish, or stop it (Ctrl-C), "
                "before resuming it."
            ) from err
        self._fh = fh

    def release(self) -> None:
        """Let go of the lock (nothing when not held)."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()


def _status_pid(folder: Path) -> int | None:
    try:
        pid = read_json(folder / STATUS).get("pid")
    except FxStoreError:  # only decorates a message; the lock is what counts
        return None
    return pid if isinstance(pid, int) else None


class StopRequest:
    """Asks a run to stop at its next safe point; set from a signal handler.

    The run checks :attr:`signum` between training steps and folds; when set, it saves a
    checkpoint and raises :class:`~fxstore.errors.RunInterruptedError`.
    """

    def __init__(self) -> None:
        self.signum: int | None = None

    def request(self, signum: int) -> None:
        """Ask for a stop, on behalf of signal `signum` (the first request is kept)."""
        if self.signum is None:
            self.signum = signum


class StatusRecorder:
    """Keeps one run's ``status.json`` up to date while its process writes the run."""

    def __init__(self, folder: Path, status: RunStatus) -> None:
        self.folder = folder
        self.status = status

    def write_first(self) -> None:
        """Write the status as it starts."""
        write_status(self.folder, self.status)

    def update(self, **changes: object) -> None:
        """Change fields of the status and write it."""
        self.status = replace(self.status, **changes)  # type: ignore[arg-type]
        write_status(self.folder, self.status)

    def fold_done(self) -> None:
        """One more fold finished."""
        self.update(folds_done=self.status.folds_done + 1)

    def complete(self, headline: Headline | None) -> None:
        """The run finished every fold."""
        self.update(state="complete", headline=headline, message=None)


@contextlib.contextmanager
def record_run(
    folder: Path,
    lock: RunLock,
    status: RunStatus,
    *,
    discard: Callable[[StatusRecorder], bool],
) -> Iterator[StatusRecorder]:
    """Write `status` ("running"), yield its recorder; release `lock` at the end.

    When the block raises, the run is marked "interrupted" (a stop request or Ctrl-C) or
    "failed" (any other error, its message kept), unless ``discard(recorder)`` says the
    run is worth nothing (nothing in it to resume or read): then its folder is deleted.
    """
    recorder = StatusRecorder(folder, status)
    try:
        recorder.write_first()
        yield recorder
    except BaseException as err:
        if discard(recorder):
            shutil.rmtree(folder, ignore_errors=True)
        else:
            stopped = isinstance(err, RunInterruptedError | KeyboardInterrupt)
            message = str(err) or type(err).__name__
            try:
                recorder.update(state="interrupted" if stopped else "failed", message=message)
            except FxStoreError as status_err:  # keep the error that ended the run
                logger.warning("could not record how run %s ended: %s", folder.name, status_err)
        raise
    finally:
        lock.release()
