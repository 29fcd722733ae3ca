"""What the commands print besides their result lines: progress bars on stderr, JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Literal, Protocol

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


class Progress:
    """A progress bar on stderr, created once the library says how long the work is."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.quiet = quiet
        self._bar: ProgressBar[int] | None = None
        self._stack = ExitStack()

    def start(self, length: int) -> None:
        """Show a bar of `length` steps (nothing when quiet or for a single step)."""
        if not self.quiet and length > 1:
            bar = click.progressbar(length=length, label=self.label, file=sys.stderr)
            self._bar = self._stack.enter_context(bar)

    def advance(self, _item: object = None) -> None:
        """One step done (an ``on_progress`` callback: its argument is ignored)."""
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        """Finish the bar, if one is shown."""
        self._stack.close()
        self._bar = None


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


class TrainDisplay:
    """A progress bar over every fold's steps, showing loss, samples/s and validation Sharpe.

    Folds may train at once (``train --gpus N``) and report in any order, so the bar counts
    each fold's agents' (seeds') own steps: an agent's latest step, all of them once it
    reported its last, and all of them for a fold below the lowest one that reported
    (trained before: folds start in order, in a serial run and a resumed one alike).
    """

    def __init__(self) -> None:
        self._bar: ProgressBar[int] | None = None
        self._stack = ExitStack()
        self._done = 0
        self._text = ""
        self._steps: dict[tuple[int, int], int] = {}  # (fold, seed) -> steps counted

    def __call__(self, report: TrainProgress) -> None:
        if self._bar is None:
            bar: ProgressBar[int] = click.progressbar(
                length=report.n_folds * report.n_seeds * report.total_steps,
                label="training",
                file=sys.stderr,
                item_show_func=lambda _item: self._text,
            )
            self._bar = self._stack.enter_context(bar)
        seed = f" seed {report.seed + 1}/{report.n_seeds}" if report.n_seeds > 1 else ""
        self._text = (
            f"fold {report.fold + 1}/{report.n_folds}{seed} loss {report.loss:.4f} "
            f"{report.samples_per_s:,.0f} samples/s val Sharpe {report.val_sharpe:.2f}"
        )
        total = report.total_steps
        step = total if report.last else min(report.step, total)
        key = (report.fold, report.seed)
        self._steps[key] = max(self._steps.get(key, 0), step)
        lowest = min(fold for fold, _ in self._steps)
        done = lowest * report.n_seeds * total + sum(self._steps.values())
        self._bar.update(max(done - self._done, 0))  # never backwards
        self._done = max(done, self._done)

    def close(self) -> None:
        """Finish the bar, if one is shown."""
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
