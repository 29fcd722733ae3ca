"""The training commands: ``backtest`` (baseline policies) and ``train`` (the agent)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict

import click

from fxstore.cli._options import (
    FROM_PROFILE,
    command,
    cost_options,
    default_of,
    executor_config,
    executor_options,
    featureset_option,
    given,
    json_option,
    multiplier_option,
    override,
    profile_option,
    quiet_option,
    seed_option,
    store_option,
    symbol_option,
    walkforward_options,
)
from fxstore.cli._output import Output, echo_json, fold_progress, progress, training_display
from fxstore.config import BacktestConfig, TrainConfig
from fxstore.config.executor import ExecutorConfig
from fxstore.errors import InvalidInputError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from fxstore.config import DeviceChoice, ForecastMode, ForecastModel, RollMode
    from fxstore.train.evaluate.results import BacktestResult
    from fxstore.train.runs.status import StopRequest

#: The profile ``train`` uses when --profile is not given.
DEFAULT_PROFILE: Final = "default"
#: The TrainConfig section of each TrainSettings key that is not a top-level field.
_SECTION_OF: Final = {
    "hidden": "agent",
    "lr": "agent",
    "commission_per_contract": "env",
    "slippage_ticks": "env",
    "train_days": "walkforward",
    "test_days": "walkforward",
    "embargo_days": "walkforward",
    "validation_fraction": "walkforward",
    "min_train_days": "walkforward",
    "anchored": "walkforward",
}
#: Where a bad setting came from, in its error line (as a profile file names its path).
_WHERE: Final = "the command line"
#: The option of each TrainSettings key whose option is not its name with dashes.
_OPTION_OF: Final = {"commission_per_contract": "--commission"}


@command()
@symbol_option("Store symbol of the fxcache", default_from=BacktestConfig)
@profile_option(default=DEFAULT_PROFILE)
@featureset_option()
@click.option(
    "--policy",
    "policies",
    multiple=True,
    help="Reference to run: flat, long, random, ofi-sign, linear, ceiling or oracle; repeatable "
    "[default: all].",
)
@walkforward_options(default_from=FROM_PROFILE)
@cost_options(default_from=FROM_PROFILE)
@click.option(
    "--roll",
    type=click.Choice(["roll", "close"]),
    default=None,
    help="At a contract roll: carry the position into the new contract, or close it "
    f"[default: {FROM_PROFILE}].",
)
@multiplier_option
@click.option("--tick-size", type=float, help="Points per tick [default: by root].")
@click.option(
    "--capital",
    type=float,
    default=default_of(BacktestConfig, "capital"),
    show_default=True,
    help="Dollars.",
)
@seed_option("Seed of 'random'", default_from=FROM_PROFILE)
@click.option(
    "--signal-dir",
    default=None,
    help="Folder of the planted signal's side files for 'oracle' "
    "[default: <store>/synth/<symbol>].",
)
@click.option("--no-plots", is_flag=True, help="Do not write the equity-curve PNGs.")
@json_option
@store_option
@quiet_option
def backtest(
    symbol: str | None,
    profile: str | None,
    featureset: str | None,
    policies: Sequence[str],
    train_days: int | None,
    test_days: int | None,
    embargo_days: int | None,
    validation_fraction: float | None,
    min_train_days: int | None,
    anchored: bool | None,
    commission_per_contract: float | None,
    slippage_ticks: float | None,
    roll: RollMode | None,
    multiplier: float | None,
    tick_size: float | None,
    capital: float,
    seed: int | None,
    signal_dir: str | None,
    no_plots: bool,
    as_json: bool,
    store_root: Path,
    quiet: bool,
) -> None:
    """Run baseline policies on every walk-forward test window of a symbol's fxcache.

    Trades flat, long (+1 contract), random, ofi-sign (the sign of the order-flow
    imbalance), linear (a ridge model fitted on each training window, tuned on its
    validation slice) and, on the synthetic market, ceiling (the planted signal's projection on
    the fold's features, fitted on its training rows: what these features could have traded)
    and oracle (the planted signal itself: what was learnable at all) with the environment's
    costs and roll rules, and writes runs/<run-id>/ with config.json, metrics.json and one
    equity-curve PNG per fold. The table gives PSR (probability that the true daily Sharpe
    is above 0), the in-sample Sharpe of fitted policies, and the deflated Sharpe of the
    best policy over all tried.

    Positions, costs, walk-forward folds and seed come from the training profile (--profile,
    as ``train`` reads it), so the baselines of ``backtest --profile P`` and ``train
    --profile P`` are the same numbers on the same folds.

    \b
    Example:
      fxstore backtest --symbol ES.FUT --policy flat --policy ofi-sign --test-days 10
    """
    from fxstore.train.profiles import load_profile

    base = load_profile(profile or DEFAULT_PROFILE)
    config = override(
        BacktestConfig(seed=base.seed),
        symbol=symbol,
        featureset=featureset,
        policies=tuple(policies) or None,
        env=override(
            base.env,
            commission_per_contract=commission_per_contract,
            slippage_ticks=slippage_ticks,
            roll=roll,
            multiplier=multiplier,
            tick_size=tick_size,
        ),
        walkforward=override(
            base.walkforward,
            train_days=train_days,
            test_days=test_days,
            embargo_days=embargo_days,
            validation_fraction=validation_fraction,
            min_train_days=min_train_days,
            anchored=anchored,
        ),
        capital=capital,
        seed=seed,
        signal_dir=signal_dir,
        plots=not no_plots,
    )
    run_backtest(config, store_root, quiet, as_json=as_json)


def run_backtest(
    config: BacktestConfig, store_root: Path, quiet: bool, *, as_json: bool = False
) -> BacktestResult:
    """Run the baselines with a progress bar, then print the results (as a table or JSON)."""
    from fxstore.train.runs.backtest import run_backtest as run
    from fxstore.train.runs.status import report_command

    say_cache(store_root, config.symbol, config.featureset)
    with progress("backtest", quiet) as bar:
        result = run(config, store_root, on_progress=fold_progress(bar))
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(result.format_table())
        click.echo(f"Wrote {_committed(result.run_dir, store_root)}")
        click.echo(f"its report: {report_command(result.run_dir.name, store_root)}")
    return result


def say_cache(store_root: Path, symbol: str, featureset: str | None) -> None:
    """Say on stderr which fxcache a run without --featureset reads, and why that one."""
    from fxstore.fxcache import choose_folder

    if featureset is None:
        choice = choose_folder(store_root, symbol)
        click.echo(f"fxcache {symbol}/{choice.key}: {choice.reason}", err=True)


class TrainSettings(TypedDict, total=False):
    """The TrainConfig settings ``train`` takes from the command line; None: the profile's."""

    symbol: str | None
    featureset: str | None
    device: DeviceChoice | None
    env_steps: int | None
    n_envs: int | None
    batch_size: int | None
    replay_size: int | None
    max_folds: int | None
    hidden: int | None
    lr: float | None
    train_days: int | None
    test_days: int | None
    embargo_days: int | None
    validation_fraction: float | None
    min_train_days: int | None
    anchored: bool | None
    commission_per_contract: float | None
    slippage_ticks: float | None
    seed: int | None
    seeds: int | None
    ensemble: bool | None
    concurrent_seeds: bool | None
    forecast: ForecastMode | None
    forecast_model: ForecastModel | None
    horizon_discount: bool | None
    reward_forecast: float | None
    prior_trials: int | None
    signal_dir: str | None


def train_config(profile: str, **settings: Unpack[TrainSettings]) -> TrainConfig:
    """The profile's TrainConfig with every setting given (not None) in place of its own.

    A bad value fails naming its option: "`--hidden` must be > 0, was 0."
    """
    from fxstore.train.profiles import load_profile

    base = load_profile(profile)
    changes = given(**settings)
    try:
        return _with_settings(base, changes)
    except InvalidInputError as err:
        raise InvalidInputError(_option_message(str(err), changes)) from err


def _with_settings(base: TrainConfig, changes: dict[str, object]) -> TrainConfig:
    from fxstore.train.profiles import replace_settings

    top: dict[str, object] = {}
    sections: dict[str, dict[str, object]] = {}
    for name, value in changes.items():
        if name in _SECTION_OF:
            sections.setdefault(_SECTION_OF[name], {})[name] = value
        else:
            top[name] = value
    for section in ("env", "agent", "walkforward"):  # checked in a profile's order
        if section in sections:
            part = getattr(base, section)
            top[section] = replace_settings(
                part, sections[section], where=_WHERE, section=f"[{section}]"
            )
    return replace_settings(base, top, where=_WHERE, section="the top level") if top else base


def _option_message(message: str, changes: dict[str, object]) -> str:
    """A setting's error as the command line gave it: its option, not its config field."""
    message = re.sub(rf"^{_WHERE}: (\[\w+\]|the top level): ", "", message)
    for name in changes:
        option = _OPTION_OF.get(name, f"--{name.replace('_', '-')}")
        message = message.replace(f"`{name}`", f"`{option}`")
    return message


def run_train(
    config: TrainConfig,
    store_root: Path,
    quiet: bool,
    *,
    resume: str | None = None,
    profile: str | None = None,
    output: Output = "text",
    per_fold: bool = True,
    executor: ExecutorConfig | None = None,
    gpus: tuple[str, ...] = (),
) -> BacktestResult:
    """Train with a progress display, then print the results (as a table, without the
    per-fold rows unless `per_fold`, or JSON).

    Prints the run id and how to resume it first (stderr). SIGINT or SIGTERM stops the run
    at its next safe point (checkpoint saved) and exits 128 + the signal (130, 143); a
    second Ctrl-C stops it at once.
    """
    from fxstore.errors import RunInterruptedError
    from fxstore.train.loop import train as run
    from fxstore.train.runs.status import StopRequest, report_command, resume_command

    stop = StopRequest()
    started: list[str] = []

    def announce(run_id: str) -> None:
        started.append(run_id)
        click.echo(f"run {run_id}; to resume it: {resume_command(run_id, store_root)}", err=True)

    if resume is None:
        say_cache(store_root, config.symbol, config.featureset)
    try:
        with _stop_on_signals(stop), training_display(quiet) as show:
            result = run(
                config,
                store_root,
                resume=resume,
                profile=profile,
                on_progress=show,
                on_start=announce,
                stop=stop,
                executor=executor,
                gpus=gpus,
            )
    except RunInterruptedError as err:
        click.echo(f"Interrupted: {err}", err=True)
        raise click.exceptions.Exit(128 + err.signum) from err
    except KeyboardInterrupt as err:
        click.echo(f"Stopped at once: {_after_abort(started, store_root)}", err=True)
        raise click.exceptions.Exit(128 + signal.SIGINT) from err
    if output == "json":
        echo_json(result.to_json())
    elif output == "text":
        click.echo(result.format_table(per_fold=per_fold))
        each = "" if per_fold else f" (each fold: fxstore runs show {result.run_dir.name})"
        click.echo(f"run folder: {_committed(result.run_dir, store_root)}{each}")
        click.echo(f"its report: {report_command(result.run_dir.name, store_root)}")
    return result


def _committed(run_dir: Path, store_root: Path) -> str:
    """The run folder `run_dir` as the store names it, once the store holds it (an s3://
    store's bucket: pushed now, so that success is told after it)."""
    from fxstore.remote import commit, location

    commit(store_root)
    return location(run_dir)


def _after_abort(started: list[str], store_root: Path) -> str:
    """What is left of a run stopped at once, and how to continue it."""
    from fxstore.store import run_dir
    from fxstore.train.runs.status import resume_command

    if not started or not run_dir(store_root, started[0]).is_dir():
        return "no run was kept (it had no checkpoint yet)."
    return (
        f"run {started[0]} continues from its last checkpoint: "
        f"{resume_command(started[0], store_root)}"
    )


@contextlib.contextmanager
def _stop_on_signals(stop: StopRequest) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM ask `stop` for a stop at the next safe point;
    a second SIGINT raises KeyboardInterrupt at once."""

    def handle(signum: int, _frame: object) -> None:
        first = stop.signum is None
        if not first and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.request(signum)  # before the message: a second Ctrl-C during it stops at once
        if first:
            click.echo(
                f"\n{signal.Signals(signum).name}: stopping at the next safe point "
                "(Ctrl-C again to stop at once)",
                err=True,
            )

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@command()
@symbol_option(
    "Store symbol of the fxcache",
    default_from=f"{default_of(TrainConfig, 'symbol')} unless the profile sets one",
)
@profile_option(default=DEFAULT_PROFILE)
@featureset_option()
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default=None,
    help=f"Where to train [default: {FROM_PROFILE}].",
)
@click.option(
    "--env-steps",
    type=int,
    default=None,
    help=f"Environment steps per fold [default: {FROM_PROFILE}].",
)
@click.option(
    "--n-envs", type=int, default=None, help=f"Parallel environments [default: {FROM_PROFILE}]."
)
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help=f"Transitions per update [default: {FROM_PROFILE}].",
)
@click.option(
    "--replay-size",
    type=int,
    default=None,
    help=f"Replay capacity (transitions) [default: {FROM_PROFILE}].",
)
@click.option(
    "--max-folds",
    type=int,
    default=None,
    help=f"Train the first N folds only [default: {FROM_PROFILE}].",
)
@click.option(
    "--hidden",
    type=int,
    default=None,
    help=f"Width of the hidden layers [default: {FROM_PROFILE}].",
)
@click.option(
    "--lr", type=float, default=None, help=f"Adam learning rate [default: {FROM_PROFILE}]."
)
@walkforward_options(default_from=FROM_PROFILE)
@cost_options(default_from=FROM_PROFILE)
@seed_option("Seed of everything random", default_from=FROM_PROFILE)
@click.option(
    "--seeds",
    type=int,
    default=None,
    help="Agents trained per fold, each from its own seed; reports mean ± std [default: 1].",
)
@click.option(
    "--ensemble/--no-ensemble",
    default=None,
    help="With --seeds N > 1, also trade the seeds' average action values, reported as "
    f"'ensemble' beside them [default: {FROM_PROFILE}].",
)
@click.option(
    "--concurrent-seeds/--no-concurrent-seeds",
    default=None,
    help="With --seeds N > 1, train a fold's seeds side by side, a step each in turn (on a "
    "GPU each on its own CUDA stream): the same results, sooner where one seed leaves the "
    f"GPU room; every seed's replay is in memory at once [default: {FROM_PROFILE}].",
)
@click.option(
    "--forecast",
    type=click.Choice(["off", "input", "only"]),
    default=None,
    help="The fold's linear forecast (fitted on its training rows, horizon and penalty chosen "
    "on validation) as the agent's input: 'input' beside the features, 'only' in their "
    f"place [default: {FROM_PROFILE}].",
)
@click.option(
    "--forecast-model",
    type=click.Choice(["linear", "blend"]),
    default=None,
    help="Which forecast --forecast hands the agent: 'linear', the linear reference's model; "
    "'blend', every target horizon's ridge averaged, each penalty chosen by "
    f"cross-validation on the training rows [default: {FROM_PROFILE}].",
)
@click.option(
    "--horizon-discount/--no-horizon-discount",
    default=None,
    help="Set each fold's discount and n-step from the horizon of its linear model (chosen "
    f"on validation): a reward that many bars ahead counts half [default: {FROM_PROFILE}].",
)
@click.option(
    "--reward-forecast",
    type=float,
    default=None,
    metavar="W",
    help="Share (0..1) of each training reward that is the move the fold's forecast expects "
    "instead of the move that happened; validation and test book the real moves "
    f"[default: {FROM_PROFILE}].",
)
@click.option(
    "--prior-trials",
    type=int,
    default=None,
    help="Runs already tried on this data (profiles, settings): counted as trials by the "
    "deflated Sharpe [default: 1].",
)
@click.option(
    "--signal-dir",
    default=None,
    help="Folder of the planted signal's side files for 'oracle' "
    "[default: <store>/synth/<symbol>].",
)
@click.option("--resume", default=None, help="Run id under runs/ to continue.")
@executor_options("the walk-forward folds (one GPU each where there are GPUs)")
@click.option(
    "--gpus",
    "n_gpus",
    type=int,
    metavar="N",
    default=None,
    help="Train N folds at once on this machine, one per GPU (the first N that "
    "CUDA_VISIBLE_DEVICES or nvidia-smi shows), each in its own process; the output is the "
    "same. 1: fold after fold, as without it. Not with --device cpu, nor with --executor "
    "ray (Ray gives each fold one GPU and runs as many at once as the cluster has).",
)
@json_option
@store_option
@quiet_option
def train(
    profile: str | None,
    resume: str | None,
    executor_kind: str,
    ray_address: str | None,
    ray_timeout: float,
    n_gpus: int | None,
    as_json: bool,
    store_root: Path,
    quiet: bool,
    **settings: Unpack[TrainSettings],
) -> None:
    """Train the C51 double-DQN agent walk-forward on a symbol's fxcache.

    For each walk-forward fold: learn on the training window from parallel environments,
    stop early on the validation slice, then trade the unseen test window next to the
    baselines (flat, long, random, ofi-sign, linear, and ceiling and oracle on the synthetic
    market)
    with the same costs. Prints the agent's in-sample Sharpe, its share of the oracle's
    PnL, and the PSR and deflated Sharpe of its pooled test days over the trials made.
    Writes runs/<run-id>/: config, per-fold metrics and evaluations, equity curves,
    checkpoints.

    \b
    Example:
      fxstore train --symbol ES.FUT --profile smoke
      fxstore train --resume 20261201T073000Z-train
      fxstore train --symbol ES.FUT --gpus 2
    """
    flags = [f"--{name.replace('_', '-')}" for name in given(**settings)]
    if resume and flags:
        raise click.UsageError(
            f"--resume continues a run with the settings in its config.json; drop "
            f"{', '.join(flags)}."
        )
    config = train_config(profile or DEFAULT_PROFILE, **settings)
    expected = config.profile if resume and profile is not None else None
    runs_on = executor_config(executor_kind, ray_address, ray_timeout)
    gpus = _gpu_devices(n_gpus, config.device, executor_kind) if n_gpus is not None else ()
    run_train(
        config,
        store_root,
        quiet,
        resume=resume,
        profile=expected,
        output="json" if as_json else "text",
        executor=runs_on,
        gpus=gpus,
    )


def _gpu_devices(n_gpus: int, device: str, executor_kind: str) -> tuple[str, ...]:
    """The CUDA_VISIBLE_DEVICES value of each GPU worker of ``--gpus N`` (checked here,
    before anything is written)."""
    from fxstore import gpus

    visible = gpus.visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"))
    return gpus.check_gpus(n_gpus, visible, device=device, executor_kind=executor_kind)
