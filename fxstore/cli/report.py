"""``fxstore report``: one self-contained HTML page of a training run or backtest."""

from __future__ import annotations

from pathlib import Path

import click

from fxstore.cli._options import command, store_option


@command()
@click.argument("run_id")
@store_option
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="HTML file to write [default: <store>/runs/RUN_ID/report.html].",
)
def report(run_id: str, store_root: Path, out: Path | None) -> None:
    """Write the HTML report of run RUN_ID (a folder under <store>/runs/).

    One page that opens offline: the totals and every fold's table (every policy), the
    equity plots embedded, the data the run read (fxcache, bar series version, manifest
    SHA-256 checksums, fxstore versions) and its config. Works for `fxstore train` and
    `fxstore backtest` runs, finished or not.

    \b
    Example:
      fxstore report 20240607T120000Z-train
      fxstore report 20240607T120000Z-backtest --out ~/backtest.html
    """
    from fxstore.train.runs.report import write_report

    click.echo(f"Wrote {write_report(store_root, run_id, out)}")
