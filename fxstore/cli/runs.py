"""The ``runs`` command: the training runs and backtests of a store, and one run's table."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import click

from fxstore.cli._options import CONTEXT_SETTINGS, json_option, store_option
from fxstore.cli._output import echo_json

if TYPE_CHECKING:
    from fxstore.train.runs.status import RunStatus

_HEADER = ("run", "kind", "symbol", "started", "status", "folds", "policy", "PnL $", "Sharpe ann.")


def _row(status: RunStatus) -> tuple[str, ...]:
    total = "?" if status.n_folds is None else str(status.n_folds)
    head = status.headline
    pnl = sharpe = policy = "-"
    if head is not None:
        policy = head.policy
        pnl = f"{head.total_pnl:,.2f}" if math.isfinite(head.total_pnl) else "n/a"
        sharpe = f"{head.sharpe_daily:.2f}" if math.isfinite(head.sharpe_daily) else "n/a"
    return (
        status.run_id,
        status.kind,
        status.symbol,
        status.started,
        status.state,
        f"{status.folds_done}/{total}",
        policy,
        pnl,
        sharpe,
    )


def _table(statuses: list[RunStatus]) -> str:
    rows = [_HEADER, *(_row(s) for s in statuses)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
    lines = [
        "  ".join(
            cell.rjust(w) if i >= 7 else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(line.rstrip() for line in lines)


@click.group(invoke_without_command=True, context_settings=CONTEXT_SETTINGS)
@json_option
@store_option
@click.pass_context
def runs(ctx: click.Context, as_json: bool, store_root: Path) -> None:
    """List the training runs and backtests under the store's runs/ folder.

    One line per run: its id, kind (train or backtest), symbol, when it started, its status
    (running; complete; interrupted: stopped or killed, resume a training run with `fxstore
    train --resume ID`; failed), folds done of total, and the headline policy's pooled PnL
    and daily Sharpe (the agent's, or a backtest's best baseline).

    \b
    Example:
      fxstore runs
      fxstore runs show 20261201T073000Z-train
    """
    if ctx.invoked_subcommand is not None:
        return
    from fxstore.train.runs.catalog import list_run_statuses

    statuses = list_run_statuses(store_root)
    if as_json:
        echo_json([s.to_json() for s in statuses])
    elif not statuses:
        click.echo(
            f"No runs in {store_root / 'runs'}; `fxstore train` or `fxstore backtest` makes one."
        )
    else:
        click.echo(_table(statuses))


@runs.command(context_settings=CONTEXT_SETTINGS)
@click.argument("run_id")
@json_option
@store_option
def show(run_id: str, as_json: bool, store_root: Path) -> None:
    """Print the per-fold and totals table of run RUN_ID again, as train or backtest did.

    A training run that is not complete shows the folds it finished.

    \b
    Example:
      fxstore runs show 20261201T073000Z-train
    """
    from fxstore.train.runs.catalog import read_run_result, run_status

    status = run_status(store_root, run_id)
    result = read_run_result(store_root, run_id)
    if as_json:
        echo_json({"status": status.to_json(), "result": result.to_json()})
        return
    click.echo(result.format_table())
    total = "?" if status.n_folds is None else str(status.n_folds)
    click.echo(f"{status.state}: {status.folds_done}/{total} folds; run folder: {result.run_dir}")
