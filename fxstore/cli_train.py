"""The training commands of the ``fxstore`` CLI: ``backtest`` and ``train``.

Registered on :data:`fxstore.cli.cli` when that module is imported; like the rest of the CLI,
they parse options, build a config, call one library function and report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from fxstore.cli import (
    CONTEXT_SETTINGS,
    F,
    _echo_json,
    _Progress,
    _progress,
    cli,
    json_option,
    quiet_option,
    store_option,
)

__all__ = ["run_train", "train_config"]


def backtest_options(func: F) -> F:
    """Options of ``fxstore backtest``; defaults come from the config dataclasses."""
    from fxstore.config import EnvConfig, WalkForwardConfig

    env, folds = EnvConfig.__dataclass_fields__, WalkForwardConfig.__dataclass_fields__
    decorators = [
        click.option(
            "--symbol", default="ES.FUT", show_default=True, help="Store symbol of the fxcache."
        ),
        click.option("--featureset", help="Feature-set hash [default: the only one]."),
        click.option(
            "--policy",
            "policies",
            multiple=True,
            help="Baseline to run: flat, long, random or ofi-sign; repeatable [default: all four].",
        ),
        click.option(
            "--train-days",
            type=int,
            default=folds["train_days"].default,
            show_default=True,
            help="Trading days in a training window (placed, not fitted: it positions the tests).",
        ),
        click.option(
            "--test-days",
            type=int,
            default=folds["test_days"].default,
            show_default=True,
            help="Trading days in each test window.",
        ),
        click.option(
            "--anchored/--rolling",
            default=folds["anchored"].default,
            show_default=True,
            help="Training windows grow from the first day, or roll forward train-days long.",
        ),
        click.option(
            "--commission",
            type=float,
            default=env["commission_per_contract"].default,
            show_default=True,
            help="Dollars per contract per side.",
        ),
        click.option(
            "--slippage-ticks",
            type=float,
            default=env["slippage_ticks"].default,
            show_default=True,
            help="Ticks per contract traded beyond half the spread.",
        ),
        click.option(
            "--roll",
            type=click.Choice(["roll", "close"]),
            default=env["roll"].default,
            show_default=True,
            help="At a contract roll: carry the position into the new contract, or close it.",
        ),
        click.option("--multiplier", type=float, help="$ per point [default: by contract root]."),
        click.option("--tick-size", type=float, help="Points per tick [default: by root]."),
        click.option(
            "--capital", type=float, default=100_000.0, show_default=True, help="Dollars."
        ),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of 'random'."),
        click.option("--no-plots", is_flag=True, help="Do not write the equity-curve PNGs."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


@cli.command(context_settings=CONTEXT_SETTINGS)
@backtest_options
@json_option
@store_option
@quiet_option
def backtest(
    symbol: str,
    featureset: str | None,
    policies: Sequence[str],
    train_days: int,
    test_days: int,
    anchored: bool,
    commission: float,
    slippage_ticks: float,
    roll: str,
    multiplier: float | None,
    tick_size: float | None,
    capital: float,
    seed: int,
    no_plots: bool,
    as_json: bool,
    store_root: Path,
    quiet: bool,
) -> None:
    """Run baseline policies on every walk-forward test window of a symbol's fxcache.

    Trades flat, long (+1 contract), random and ofi-sign (the sign of the order-flow
    imbalance) with the environment's costs and roll rules, and writes
    runs/<run-id>/ with config.json, metrics.json and one equity-curve PNG per fold.

    \b
    Example:
      fxstore backtest --symbol ES.FUT --policy flat --policy ofi-sign --test-days 10
    """
    from fxstore.config import BacktestConfig, EnvConfig, WalkForwardConfig
    from fxstore.train.backtest import BASELINES, run_backtest

    config = BacktestConfig(
        symbol=symbol,
        featureset=featureset,
        policies=tuple(policies) or BASELINES,
        env=EnvConfig(
            commission_per_contract=commission,
            slippage_ticks=slippage_ticks,
            roll=roll,  # type: ignore[arg-type]
            multiplier=multiplier,
            tick_size=tick_size,
        ),
        walkforward=WalkForwardConfig(
            train_days=train_days, test_days=test_days, anchored=anchored
        ),
        capital=capital,
        seed=seed,
        plots=not no_plots,
    )
    with _progress("backtest", quiet) as progress:
        result = run_backtest(config, store_root, on_progress=_fold_progress(progress))
    if as_json:
        _echo_json(result.to_json())
    else:
        click.echo(result.format_table())
        click.echo(f"Wrote {result.run_dir}")


def _fold_progress(progress: _Progress) -> Callable[[int, int], None]:
    """Drive the bar from ``on_progress(folds_done, n_folds)``."""

    def advance(done: int, total: int) -> None:
        if done == 1:
            progress.start(total)
        progress.advance()

    return advance


def _train_overrides(**options: Any) -> dict[str, Any]:
    """CLI options that were given (not None), as TrainConfig fields and sections."""
    sections: dict[str, dict[str, Any]] = {"env": {}, "agent": {}, "walkforward": {}}
    top: dict[str, Any] = {}
    where = {
        "hidden": "agent",
        "lr": "agent",
        "commission_per_contract": "env",
        "slippage_ticks": "env",
        "train_days": "walkforward",
        "test_days": "walkforward",
    }
    for name, value in options.items():
        if value is None:
            continue
        if name in where:
            sections[where[name]][name] = value
        else:
            top[name] = value
    return {**top, **{k: v for k, v in sections.items() if v}}


class _TrainDisplay:
    """A progress bar over every fold's steps, showing loss, samples/s and validation Sharpe."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._done = 0
        self._text = ""

    def __call__(self, report: Any) -> None:
        if self._bar is None:
            self._bar = click.progressbar(
                length=report.n_folds * report.total_steps,
                label="training",
                file=sys.stderr,
                item_show_func=lambda _item: self._text,
            )
            self._bar.__enter__()
        self._text = (
            f"fold {report.fold + 1}/{report.n_folds} loss {report.loss:.4f} "
            f"{report.samples_per_s:,.0f} samples/s val Sharpe {report.val_sharpe:.2f}"
        )
        done = report.fold * report.total_steps + report.step
        self._bar.update(max(done - self._done, 0))
        self._done = done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.option("--symbol", default=None, help="Store symbol of the fxcache [default: ES.FUT].")
@click.option(
    "--profile",
    default="default",
    show_default=True,
    help="smoke | default | production, or a TOML file of TrainConfig settings.",
)
@click.option("--featureset", default=None, help="Feature-set hash [default: the only one].")
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default=None, help="Where to train."
)
@click.option("--env-steps", type=int, default=None, help="Environment steps per fold.")
@click.option("--n-envs", type=int, default=None, help="Parallel environments.")
@click.option("--batch-size", type=int, default=None, help="Transitions per update.")
@click.option("--replay-size", type=int, default=None, help="Replay capacity (transitions).")
@click.option("--max-folds", type=int, default=None, help="Train the first N folds only.")
@click.option("--hidden", type=int, default=None, help="Width of the hidden layers.")
@click.option("--lr", type=float, default=None, help="Adam learning rate.")
@click.option("--train-days", type=int, default=None, help="Trading days per training window.")
@click.option("--test-days", type=int, default=None, help="Trading days per test window.")
@click.option(
    "--commission", "commission_per_contract", type=float, default=None, help="$ per contract."
)
@click.option("--slippage-ticks", type=float, default=None, help="Ticks paid per contract.")
@click.option("--seed", type=int, default=None, help="Seed of everything random.")
@click.option("--resume", default=None, help="Run id under runs/ to continue.")
@json_option
@store_option
@quiet_option
def train(
    profile: str, resume: str | None, as_json: bool, store_root: Path, quiet: bool, **options: Any
) -> None:
    """Train the C51 double-DQN agent walk-forward on a symbol's fxcache.

    For each walk-forward fold: learn on the training window from parallel environments,
    stop early on the validation slice, then trade the unseen test window next to the
    baselines (flat, long, random, ofi-sign) with the same costs. Writes runs/<run-id>/:
    config, per-fold metrics and evaluations, equity curves, checkpoints.

    \b
    Example:
      fxstore train --symbol ES.FUT --profile smoke
      fxstore train --resume 20261201T073000Z-train
    """
    given = [f"--{k.replace('_', '-')}" for k, v in options.items() if v is not None]
    if resume and (given or profile != "default"):
        raise click.UsageError(
            f"--resume continues a run with the settings in its config.json; drop "
            f"{', '.join(given or ['--profile'])}."
        )
    run_train(train_config(profile, options), store_root, quiet, resume=resume, as_json=as_json)


def run_train(
    config: Any, store_root: Path, quiet: bool, *, resume: str | None = None, as_json: bool = False
) -> Any:
    from fxstore.train.loop import train as run_train

    with _training_display(quiet) as show:
        result = run_train(config, store_root, resume=resume, on_progress=show)
    if as_json:
        _echo_json(result.to_json())
    else:
        click.echo(result.format_table())
        click.echo(f"run folder: {result.run_dir}")
    return result


def train_config(profile: str, options: dict[str, Any]) -> Any:
    from fxstore.train.profiles import config_from_json, load_profile

    base = load_profile(profile)
    overrides = _train_overrides(**options)
    if not overrides:
        return base
    data: dict[str, Any] = base.to_json()
    for key, value in overrides.items():
        if isinstance(value, dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return config_from_json(data, where="the command line")


@contextmanager
def _training_display(quiet: bool) -> Iterator[Callable[[Any], None] | None]:
    if quiet:
        yield None
        return
    display = _TrainDisplay()
    try:
        yield display
    finally:
        display.close()
