"""The ``fxstore`` command line: parse options, build a config, call one library function, report.

No logic lives here. Every FxStoreError becomes one ``Error: ...`` line and exit status 1
(in :class:`_Group`); FxStoreWarnings become ``Warning: ...`` lines on stderr.

- :mod:`~fxstore.cli.data`: ``synth``, ``scan``, ``ingest`` (DBN files and bars).
- :mod:`~fxstore.cli.fetch`: ``fetch`` (buy data from Databento's historical API).
- :mod:`~fxstore.cli.features`: ``precompute``, ``ls``, ``info``, ``gc``, ``features`` (the
  store and its feature sets).
- :mod:`~fxstore.cli.train`: ``backtest``, ``train`` (baselines and the agent).
- :mod:`~fxstore.cli.runs`: ``runs`` (the runs of a store, one run's table).
- :mod:`~fxstore.cli.demo`: ``demo`` (all of it on the synthetic market).
- :mod:`~fxstore.cli.report`: ``report`` (a run's HTML page).
- :mod:`~fxstore.cli._options`: the options the commands share, each defined once.
- :mod:`~fxstore.cli._output`: progress bars and JSON output.

The command modules never import this one: it adds their commands to the group.
"""

from __future__ import annotations

import logging
import signal
import threading
import warnings
from collections.abc import Sequence
from typing import TextIO

import click

from fxstore import __version__
from fxstore.cli import data, demo, features, fetch, report, runs, train, verify
from fxstore.cli._options import CONTEXT_SETTINGS
from fxstore.errors import FxStoreError, FxStoreWarning

__all__ = ["cli", "main"]


class _Group(click.Group):
    """A click group that turns FxStoreError (and an unknown command) into ``Error: <message>``
    and exit status 1."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, but an unknown command name is a user error like any other: exit 1."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as err:
            raise click.ClickException(
                f"{err.format_message()} `fxstore --help` lists the commands."
            ) from err

    def invoke(self, ctx: click.Context) -> object:
        is_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _terminate) if is_main else None
        try:
            return super().invoke(ctx)
        except FxStoreError as err:
            raise click.ClickException(str(err)) from err
        except KeyboardInterrupt as err:
            # Ctrl-C or SIGTERM in a command without safe points of its own (train has):
            # every file is written whole or not at all (temp file, then rename).
            signum = signal.SIGTERM if isinstance(err, _Terminated) else signal.SIGINT
            click.echo(
                f"\n{signal.Signals(signum).name}: stopped; nothing is left half-written. Run "
                "the same command again (synth and ingest resume where they stopped).",
                err=True,
            )
            raise click.exceptions.Exit(128 + signum) from None
        finally:
            if is_main:
                signal.signal(signal.SIGTERM, previous)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command runs so that it unwinds as on Ctrl-C."""


def _terminate(_signum: int, _frame: object) -> None:
    raise _Terminated


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    if issubclass(category, FxStoreWarning):
        click.echo(f"Warning: {message}", err=True)
    else:
        click.echo(warnings.formatwarning(message, category, filename, lineno, line), err=True)


@click.group(cls=_Group, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="fxstore")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """Turn Databento MBP-10 order books into bars, GPU-ready features and a trading agent.

    \b
    Start with the built-in synthetic market:
      fxstore demo
    or your own Databento batch download:
      fxstore scan ~/databento/GLBX-20240101-XXXX/
    """
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(
        level=max(level, logging.DEBUG), format="%(levelname)s %(name)s: %(message)s"
    )
    warnings.showwarning = _show_warning
    warnings.simplefilter("always", FxStoreWarning)


for _command in (
    data.synth,
    data.scan,
    data.ingest,
    fetch.fetch,
    data.rolls,
    demo.demo,
    features.precompute,
    features.ls,
    features.info,
    features.gc,
    features.features,
    train.backtest,
    train.train,
    report.report,
    runs.runs,
    verify.verify,
):
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="fxstore")
