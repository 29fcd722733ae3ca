"""What the commands print besides their result lines: progress bars on stderr, JSON."""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Final, Literal, Protocol

import click

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

    from fxstore.train.loop import Progress as TrainProgress


#: How a step prints its result: as text, as JSON (--json), or not at all (a step of a
#: command that prints one result for all its steps, as ``demo --json`` does).
Output = Literal["text", "json", "none"]


def echo_json(obj: object) -> None:
    """Print `obj` as indented JSON (dates, paths and other values as their str)."""
    click.echo(json.dumps(obj, indent=2, default=str))


class Report(Protocol):
    """A result a command prints: as text, or as JSON with --json."""

    def format_text(self) -> str: ...
    def to_json(self) -> dict[str, object]: ...


def echo_report(report: Report, as_json: bool) -> None:
    """Print `report` as JSON (--json) or as its text."""
    if as_json:
        echo_json(report.to_json())
    else:
        click.echo(report.format_text())


#: Seconds between two heartbeat lines of a progress display whose stderr is no terminal
#: (a log file, CI): it says how far the work is instead of a bar redrawn in place.
HEARTBEAT_S: Final = 30.0


def format_duration(seconds: float) -> str:
    """``1h 02m``, ``3m 05s`` or ``42s``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def eta_text(done: float, total: float, elapsed_s: float) -> str:
    """The time left at the rate so far: ``ETA 3m 05s`` (``ETA -`` before the first step)."""
    if done <= 0 or total <= 0:
        return "ETA -"
    return f"ETA {format_duration(elapsed_s * max(total - done, 0) / done)}"


def _is_terminal() -> bool:
    return sys.stderr.isatty()


class _Heartbeat:
    """Prints `text()` on stderr every HEARTBEAT_S seconds until closed (a daemon thread)."""

    def __init__(self, text: Callable[[], str]) -> None:
        self._text = text
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            click.echo(self._text(), err=True)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


class Progress:
    """A progress bar on stderr, created once the library says how long the work is.

    On a terminal: a bar with its steps, percentage and a labelled ETA. Otherwise (a log):
    a line ``<label>: 12/87 (14%), ETA 1m 05s`` every HEARTBEAT_S seconds.
    """

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.quiet = quiet
        self._bar: ProgressBar[int] | None = None
        self._heartbeat: _Heartbeat | None = None
        self._stack = ExitStack()
        self._done = 0
        self._total = 0
        self._started = time.monotonic()

    def _eta(self) -> str:
        return eta_text(self._done, self._total, time.monotonic() - self._started)

    def status(self) -> str:
        """``<label>: 12/87 (14%), ETA 1m 05s``."""
        share = self._done / self._total if self._total else 0.0
        return f"{self.label}: {self._done}/{self._total} ({share:.0%}), {self._eta()}"

    def start(self, length: int) -> None:
        """Show a bar of `length` steps (nothing when quiet or for a single step)."""
        self._total, self._done, self._started = length, 0, time.monotonic()
        if self.quiet or length <= 1:
            return
        if not _is_terminal():
            self._heartbeat = _Heartbeat(self.status)
            self._stack.callback(self._heartbeat.close)
            return
        bar: ProgressBar[int] = click.progressbar(
            length=length,
            label=self.label,
            file=sys.stderr,
            show_eta=False,
            show_pos=True,
            item_show_func=lambda _item: self._eta(),
        )
        self._bar = self._stack.enter_context(bar)

    def advance(self, _item: object = None) -> None:
        """One step done (an ``on_progress`` callback: its argument is ignored)."""
        self._done += 1
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        """Finish the bar (on a terminal, its line ends and the cursor shows again)."""
        self._stack.close()
        self._bar = None
        self._heartbeat = None


@contextmanager
def progress(label: str, quiet: bool) -> Iterator[Progress]:
    """A :class:`Progress` that is closed when the block ends."""
    bar = Progress(label, quiet)
    try:
        yield bar
    finally:
        bar.close()


def fold_progress(bar: Progress) -> Callable[[int, int], None]:
    """Drive `bar` from ``on_progress(folds_done, n_folds)``."""

    def advance(done: int, total: int) -> None:
        if done == 1:
            bar.start(total)
        bar.advance()

    return advance


def _number(value: float, spec: str, missing: str) -> str:
    return format(value, spec) if math.isfinite(value) else missing


def train_status(report: TrainProgress) -> str:
    """What a training report says: fold (counted from 1, as the results' table counts),
    seed, loss, samples/s and validation Sharpe; values not there yet say so."""
    seed = f" seed {report.seed + 1}/{report.n_seeds}" if report.n_seeds > 1 else ""
    loss = _number(report.loss, ".4f", "- (no update yet)")
    sharpe = _number(report.val_sharpe, ".2f", "- (not validated yet)")
    return (
        f"fold {report.fold + 1}/{report.n_folds}{seed} loss {loss} "
        f"{report.samples_per_s:,.0f} samples/s val Sharpe {sharpe}"
    )


class TrainDisplay:
    """A progress display over every fold's steps, showing loss, samples/s, validation
    Sharpe and a labelled ETA: a bar on a terminal, a heartbeat line in a log.

    Folds may train at once (``train --gpus N``) and report in any order, so the bar counts
    each fold's agents' (seeds') own steps: an agent's latest step, all of them once it
    reported its last, and all of them for a fold below the lowest one that reported
    (trained before: folds start in order, in a serial run and a resumed one alike).
    """

    def __init__(self) -> None:
        self._bar: ProgressBar[int] | None = None
        self._heartbeat: _Heartbeat | None = None
        self._stack = ExitStack()
        self._done = 0
        self._total = 0
        self._started = time.monotonic()
        self._text = ""
        self._steps: dict[tuple[int, int], int] = {}  # (fold, seed) -> steps counted

    @property
    def steps_done(self) -> int:
        """The agents' steps counted so far, over every fold (never backwards)."""
        return self._done

    @property
    def steps_total(self) -> int:
        """Every agent's steps of every fold: folds x seeds x steps."""
        return self._total

    def _eta(self) -> str:
        return eta_text(self._done, self._total, time.monotonic() - self._started)

    def status(self) -> str:
        """``training: 40% <the last report>, ETA 2m 10s``."""
        share = self._done / self._total if self._total else 0.0
        return f"training: {share:.0%} {self._text}, {self._eta()}"

    def _open(self, report: TrainProgress) -> None:
        self._total = report.n_folds * report.n_seeds * report.total_steps
        self._started = time.monotonic()
        if not _is_terminal():
            self._heartbeat = _Heartbeat(self.status)
            self._stack.callback(self._heartbeat.close)
            return
        bar: ProgressBar[int] = click.progressbar(
            length=self._total,
            label="training",
            file=sys.stderr,
            show_eta=False,
            item_show_func=lambda _item: f"{self._text}, {self._eta()}",
        )
        self._bar = self._stack.enter_context(bar)

    def __call__(self, report: TrainProgress) -> None:
        if self._bar is None and self._heartbeat is None:
            self._open(report)
        self._text = train_status(report)
        total = report.total_steps
        step = total if report.last else min(report.step, total)
        key = (report.fold, report.seed)
        self._steps[key] = max(self._steps.get(key, 0), step)
        lowest = min(fold for fold, _ in self._steps)
        done = lowest * report.n_seeds * total + sum(self._steps.values())
        if self._bar is not None:
            self._bar.update(max(done - self._done, 0))  # never backwards
        self._done = max(done, self._done)

    def close(self) -> None:
        """Finish the bar (the cursor shows again) or stop the heartbeat."""
        self._stack.close()


@contextmanager
def training_display(quiet: bool) -> Iterator[Callable[[TrainProgress], None] | None]:
    """A :class:`TrainDisplay` for ``on_progress`` (None when quiet), closed at the end."""
    if quiet:
        yield None
        return
    display = TrainDisplay()
    try:
        yield display
    finally:
        display.close()
