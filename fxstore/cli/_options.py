"""The options the commands share: each flag is defined here once, with one default.

A flag that sets a config field and is shared by commands whose configs start from
different places (the config's defaults, or a training profile) defaults to None, "not
given": the command keeps its base config's value (:func:`override`), and the help names
that value (``[default: 1.25]`` or ``[default: the profile's]``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar, cast

import click

from fxstore.config import EnvConfig, SynthConfig, WalkForwardConfig, depth_symbol
from fxstore.config.executor import EXECUTOR_KINDS, RAY_TIMEOUT_S, ExecutorConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

F = TypeVar("F", bound=Callable[..., object])
D = TypeVar("D", bound="DataclassInstance")

CONTEXT_SETTINGS: Final = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
#: The built-in market's default range (synth and demo): four months around the March 2024
#: roll, 87 trading days: enough for one fold of the default training profile (81 days).
DEMO_START: Final = dt.date(2024, 2, 1)
DEMO_END: Final = dt.date(2024, 5, 31)
#: What help shows as the default of an option that a training profile fills.
FROM_PROFILE: Final = "the profile's"


def command(name: str | None = None) -> Callable[[Callable[..., None]], click.Command]:
    """A click command with the CLI's context settings (``-h``, 100 columns)."""
    return click.command(name, context_settings=CONTEXT_SETTINGS)


def given(**values: object) -> dict[str, object]:
    """The options given on the command line: every value that is not None."""
    return {name: value for name, value in values.items() if value is not None}


def override(base: D, **values: object) -> D:
    """`base` with every option that was given replaced (the config validates it again)."""
    changes = given(**values)
    return dataclasses.replace(base, **changes) if changes else base


def default_of(default_from: type[DataclassInstance] | str, name: str) -> object:
    """The default of field `name` of the dataclass `default_from`; a str is returned as is."""
    if isinstance(default_from, str):
        return default_from
    return next(f.default for f in dataclasses.fields(default_from) if f.name == name)


def _help(meaning: str, default_from: type[DataclassInstance] | str, name: str) -> str:
    return f"{meaning} [default: {default_of(default_from, name)}]."


def _stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator applying `decorators` so that they list in help in the order given."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


#: Where :func:`store_option` keeps ``--s3-endpoint`` and ``--cache-dir`` for a command's
#: other S3 reads (``s3://`` DBN inputs): ``click.Context.meta[REMOTE_META]``.
REMOTE_META: Final = "fxstore.remote"


#: The store areas a command reads or writes (of an s3:// store only those are mirrored);
#: a command not named here mirrors all of them.
_AREAS_OF: Final = {
    "ingest": ("bars", "synth"),
    "precompute": ("bars", "fxcache"),
    "train": ("fxcache", "runs", "synth"),
    "backtest": ("fxcache", "runs", "synth"),
    "runs": ("runs",),
    "fetch": ("raw", "bars", "synth"),
}


#: The commands that read only manifests (of an s3:// store only those are pulled; `verify`
#: checks the objects in the bucket, and pulls everything only to --repair; `fetch` too,
#: unless it goes on to --ingest).
_READS_MANIFESTS: Final = frozenset({"ls", "info", "rolls", "gc", "verify"})


def remote_settings() -> tuple[str | None, Path | None]:
    """The ``--s3-endpoint`` and ``--cache-dir`` of the running command."""
    found = click.get_current_context().meta.get(REMOTE_META, (None, None))
    return found[0], found[1]


def store_option(func: F) -> F:
    """--store (a local folder or ``s3://bucket/prefix``), --s3-endpoint and --cache-dir.

    The command receives `store_root` as the local root to work on: the folder itself, or
    for a URL the local mirror of the store (pulled before the command, what it committed
    pushed after it with conditional commits: :func:`fxstore.remote.open_store`).
    """

    @functools.wraps(func)
    def run_on_store(
        *args: object,
        store_root: str,
        s3_endpoint: str | None,
        cache_dir: Path | None,
        **kw: object,
    ) -> object:
        from fxstore.remote import open_store

        ctx = click.get_current_context()
        ctx.meta[REMOTE_META] = (s3_endpoint, cache_dir)
        name = ctx.command.name or ""
        areas = _AREAS_OF.get(name, ("bars", "fxcache", "runs", "synth"))
        lazy = (name in _READS_MANIFESTS and not kw.get("repair")) or (
            name == "fetch" and not kw.get("then_ingest")
        )
        symbol = kw.get("symbol") if name != "fetch" else None  # fetch's are Databento's
        symbols: tuple[str, ...] | None = (symbol,) if isinstance(symbol, str) else None
        depth = kw.get("depth")
        if symbols is not None and isinstance(depth, int) and depth > 1:  # ingest --depth
            symbols = (*symbols, depth_symbol(symbols[0], depth))
        with open_store(
            store_root,
            endpoint=s3_endpoint,
            cache_dir=cache_dir,
            areas=areas,
            lazy=lazy,
            symbols=symbols,
        ) as root:
            return func(*args, store_root=root, **kw)

    options = (
        click.option(
            "--store",
            "store_root",
            default="data",
            envvar="FXSTORE_HOME",
            show_default=True,
            show_envvar=True,
            help="Store root: a folder, or s3://BUCKET/PREFIX (AWS credentials from the usual "
            "variables).",
        ),
        click.option(
            "--s3-endpoint",
            default=None,
            envvar="AWS_ENDPOINT_URL",
            help="URL of an S3-compatible server (MinIO, Ceph, ...) for s3:// stores and "
            "inputs [default: AWS].",
        ),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Local cache of an s3:// store (its mirror) and of s3:// inputs "
            "[default: the user's cache folder/fxstore].",
        ),
    )
    return cast(F, _stack(*options)(run_on_store))


def executor_options(unit: str) -> Callable[[F], F]:
    """--executor and --ray-address: where the work units (`unit`) run."""
    return _stack(
        click.option(
            "--executor",
            "executor_kind",
            type=click.Choice(EXECUTOR_KINDS),
            default="local",
            show_default=True,
            help=f"Run {unit} in the local process pool, or as tasks on a Ray cluster "
            "(pip install 'fxstore[ray]'); the output is the same.",
        ),
        click.option(
            "--ray-address",
            default=None,
            help="With --executor ray: the cluster to join (auto, ray://HOST:10001, "
            "HOST:6379) [default: a Ray instance on this machine, for the run].",
        ),
        click.option(
            "--ray-timeout",
            type=float,
            default=RAY_TIMEOUT_S,
            show_default=True,
            help="With --ray-address: seconds to wait for the cluster to answer.",
        ),
    )


def executor_config(
    executor_kind: str, ray_address: str | None, ray_timeout: float = RAY_TIMEOUT_S
) -> ExecutorConfig:
    """The executor of the options (checks that --ray-address goes with --executor ray)."""
    return ExecutorConfig(
        kind="ray" if executor_kind == "ray" else "local",
        address=ray_address,
        connect_timeout_s=ray_timeout,
    )


def quiet_option(func: F) -> F:
    """The --quiet option: no progress bar."""
    return click.option("-q", "--quiet", is_flag=True, help="No progress bar.")(func)


def json_option(func: F) -> F:
    """The --json option: print the result as JSON."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(func)


def symbol_option(meaning: str, *, default_from: type[DataclassInstance] | str) -> Callable[[F], F]:
    """--symbol: a store symbol or parent symbol (`meaning`), None when not given."""
    return click.option("--symbol", default=None, help=_help(meaning, default_from, "symbol"))


def definitions_option(func: F) -> F:
    """--definitions: Databento definition files or folders for the instrument master."""
    return click.option(
        "--definitions",
        "definitions",
        multiple=True,
        type=click.Path(path_type=Path),
        help="Databento definition file or folder for contract facts (repeatable) [default: "
        "any definition file among PATHS, then fxstore's table of CME roots].",
    )(func)


def multiplier_option(func: F) -> F:
    """--multiplier: dollars per price point for every contract, overriding the instrument
    master (Databento definitions, then fxstore's table of CME roots); None when not given."""
    return click.option(
        "--multiplier",
        type=float,
        default=None,
        help="Dollars per price point of every contract, overriding the instrument master "
        "[default: each contract's own].",
    )(func)


def featureset_option(*, default_from: str = "the only one") -> Callable[[F], F]:
    """--featureset: a feature-set hash under ``fxcache/<symbol>/``, None when not given."""
    return click.option(
        "--featureset", default=None, help=_help("Feature-set hash", default_from, "featureset")
    )


def features_file_option(purpose: str) -> Callable[[F], F]:
    """--features NAME|FILE.toml: a built-in set's name or a feature-set file
    (``features_file``), None for the default set."""
    return click.option(
        "--features",
        "features_file",
        default=None,
        metavar="NAME|FILE",
        help=f"Feature set {purpose}: a TOML file, or a built-in set's name (default, "
        "classic) [default: the default set].",
    )


def seed_option(meaning: str, *, default_from: type[DataclassInstance] | str) -> Callable[[F], F]:
    """--seed: the config's `seed`, None when not given."""
    return click.option("--seed", type=int, default=None, help=_help(meaning, default_from, "seed"))


def profile_option(*, default: str) -> Callable[[F], F]:
    """--profile: a training profile, None when not given (the command's `default` then)."""
    return click.option(
        "--profile",
        default=None,
        help="smoke | default | production, or a TOML file of TrainConfig settings "
        f"[default: {default}].",
    )


def cost_options(*, default_from: type[EnvConfig] | str) -> Callable[[F], F]:
    """--commission and --slippage-ticks: the trading costs of an :class:`EnvConfig`."""
    return _stack(
        click.option(
            "--commission",
            "commission_per_contract",
            type=float,
            default=None,
            help=_help("Dollars per contract per side", default_from, "commission_per_contract"),
        ),
        click.option(
            "--slippage-ticks",
            type=float,
            default=None,
            help=_help(
                "Ticks per contract traded beyond half the spread", default_from, "slippage_ticks"
            ),
        ),
    )


def walkforward_options(*, default_from: type[WalkForwardConfig] | str) -> Callable[[F], F]:
    """The walk-forward options of a :class:`WalkForwardConfig`, each None when not given.

    --train-days, --test-days, --embargo-days, --validation-fraction, --min-train-days and
    --anchored/--rolling; `default_from` names where the values not given come from.
    """

    def meaning(text: str, name: str) -> str:
        return _help(text, default_from, name)

    anchored = default_of(default_from, "anchored")
    shown = anchored if isinstance(default_from, str) else ("anchored" if anchored else "rolling")
    return _stack(
        click.option(
            "--train-days",
            type=int,
            default=None,
            help=meaning("Trading days in a training window", "train_days"),
        ),
        click.option(
            "--test-days",
            type=int,
            default=None,
            help=meaning("Trading days in each test window", "test_days"),
        ),
        click.option(
            "--embargo-days",
            type=int,
            default=None,
            help="Least whole trading days in each gap before a validation or test slice "
            + (
                "[default: as few as hold the longest target horizon]."
                if default_of(default_from, "embargo_days") is None
                else meaning("", "embargo_days").lstrip()
            ),
        ),
        click.option(
            "--validation-fraction",
            type=float,
            default=None,
            help=meaning(
                "Share of each training window kept at its end for early stopping (0: none)",
                "validation_fraction",
            ),
        ),
        click.option(
            "--min-train-days",
            type=int,
            default=None,
            help=meaning(
                "Least trading days left to fit on once the validation slice and its purge are cut",
                "min_train_days",
            ),
        ),
        click.option(
            "--anchored/--rolling",
            default=None,
            help="Training windows grow from the first day, or roll forward train-days long "
            f"[default: {shown}].",
        ),
    )


def _iso_date(_ctx: click.Context, _param: click.Parameter, value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as err:
        raise click.BadParameter(f"must be a date YYYY-MM-DD, was {value!r}.") from err


def synth_options(*, signal_ic: float | None) -> Callable[[F], F]:
    """Options of the built-in synthetic market (shared by synth and demo).

    `signal_ic` is the planted signal's IC the command uses when neither --signal nor
    --signal-ic is given (None: no signal, ``SynthConfig``'s strength 0).
    """
    strength = default_of(SynthConfig, "signal_strength")
    return _stack(
        click.option(
            "--start",
            callback=_iso_date,
            help=f"First calendar day (YYYY-MM-DD) [default: {DEMO_START}].",
        ),
        click.option(
            "--end",
            callback=_iso_date,
            help=f"Last calendar day (YYYY-MM-DD) [default: {DEMO_END}].",
        ),
        click.option(
            "--events-per-day",
            type=int,
            default=default_of(SynthConfig, "events_per_day"),
            show_default=True,
            help="MBP-10 records per trading day, all instruments together.",
        ),
        seed_option("RNG seed", default_from=SynthConfig),
        click.option(
            "--signal",
            "signal_strength",
            type=float,
            default=None,
            help="Planted signal strength in [0, 1]: how strongly a latent factor tilts "
            "order flow and the next moves (0 = none). Strength 1 is an information "
            "coefficient of about 0.38, 0.25 about 0.10; prefer --signal-ic, in IC units "
            + (f"[default: {strength}]." if signal_ic is None else "[default: from --signal-ic]."),
        ),
        click.option(
            "--signal-ic",
            type=float,
            default=None,
            help="Planted signal as an information coefficient, in place of --signal: the "
            "correlation of the signal at a bar's close with the next bar's return (default "
            "ingest bars). Real order-flow signals: 0.02-0.1; the signal persists for about "
            "ten bars (half-life) "
            + (
                "[default: none, --signal decides]."
                if signal_ic is None
                else f"[default: {signal_ic}, unless --signal is given]."
            ),
        ),
        click.option(
            "--root",
            default=default_of(SynthConfig, "root"),
            show_default=True,
            help="Product root.",
        ),
    )
