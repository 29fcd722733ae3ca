"""The ``fxstore`` command line: parse options, build a config, call one library function, report.

No logic lives here. Every FxStoreError becomes one ``Error: ...`` line and exit status 1
(in :class:`_Group`); FxStoreWarnings become ``Warning: ...`` lines on stderr.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from fxstore import __version__
from fxstore.errors import FxStoreError, FxStoreWarning

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _Group(click.Group):
    """A click group that turns FxStoreError into ``Error: <message>`` and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FxStoreError as err:
            raise click.ClickException(str(err)) from err


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
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


def store_option(func: F) -> F:
    """The --store option shared by every command that reads or writes the store."""
    return click.option(
        "--store",
        "store_root",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("data"),
        envvar="FXSTORE_HOME",
        show_default=True,
        show_envvar=True,
        help="Store root.",
    )(func)


def quiet_option(func: F) -> F:
    """The --quiet option: no progress bar."""
    return click.option("-q", "--quiet", is_flag=True, help="No progress bar.")(func)


class _Progress:
    """A progress bar on stderr, created once the library says how long the work is."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.quiet = quiet
        self._bar: Any = None

    def start(self, length: int) -> None:
        if not self.quiet and length > 1:
            self._bar = click.progressbar(length=length, label=self.label, file=sys.stderr)
            self._bar.__enter__()

    def advance(self, _item: object = None) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


@contextmanager
def _progress(label: str, quiet: bool) -> Iterator[_Progress]:
    progress = _Progress(label, quiet)
    try:
        yield progress
    finally:
        progress.close()


def _iso_date(_ctx: click.Context, param: click.Parameter, value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as err:
        raise click.BadParameter(f"must be a date YYYY-MM-DD, was {value!r}.") from err


def synth_options(func: F) -> F:
    """Options of the built-in synthetic market (shared by synth and demo)."""
    from fxstore.config import SynthConfig

    defaults = SynthConfig.__dataclass_fields__
    decorators = [
        click.option("--start", callback=_iso_date, help="First calendar day (YYYY-MM-DD)."),
        click.option("--end", callback=_iso_date, help="Last calendar day (YYYY-MM-DD)."),
        click.option(
            "--events-per-day",
            type=int,
            default=defaults["events_per_day"].default,
            show_default=True,
            help="MBP-10 records per trading day, all instruments together.",
        ),
        click.option(
            "--seed",
            type=int,
            default=defaults["seed"].default,
            show_default=True,
            help="RNG seed.",
        ),
        click.option(
            "--signal",
            "signal_strength",
            type=float,
            default=defaults["signal_strength"].default,
            show_default=True,
            help="Planted signal: how strongly order flow predicts the next move (0 = none, 1).",
        ),
        click.option(
            "--root", default=defaults["root"].default, show_default=True, help="Product root."
        ),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


#: The built-in market's default range: three months around the March 2024 roll.
DEMO_START = dt.date(2024, 2, 1)
DEMO_END = dt.date(2024, 4, 30)
#: The demo market's planted signal: order flow predicts the next move, so there is
#: something for the agent to learn (`--signal 0` for a market with nothing to find).
DEMO_SIGNAL = 1.0


def _synth_config(**options: Any) -> Any:
    from fxstore.config import SynthConfig

    start = options.pop("start") or DEMO_START
    end = options.pop("end") or DEMO_END
    return SynthConfig(start=start, end=end, **options)


def _echo_json(obj: object) -> None:
    click.echo(json.dumps(obj, indent=2, default=str))


def _run_synth(config: Any, out_dir: Path, quiet: bool) -> Any:
    from fxstore.market.calendar import trading_days_between
    from fxstore.synth import generate_market

    with _progress("synth", quiet) as progress:
        progress.start(len(trading_days_between(config.start, config.end)))
        summary = generate_market(config, out_dir, on_progress=progress.advance)
    click.echo(
        f"Wrote {len(summary.files)} DBN files ({summary.n_records:,} records, "
        f"{len(summary.trading_days)} trading days) to {out_dir} in {summary.elapsed_s:.1f} s",
        err=True,
    )
    return summary


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("out_dir", required=False, type=click.Path(file_okay=False, path_type=Path))
@synth_options
@click.option(
    "--split",
    type=click.Choice(["trading-day", "utc-day"]),
    default="trading-day",
    show_default=True,
    help="One file per trading day, or per UTC day as Databento batch downloads split.",
)
@store_option
@quiet_option
def synth(out_dir: Path | None, store_root: Path, quiet: bool, **options: Any) -> None:
    """Write the built-in synthetic CME market as Databento DBN MBP-10 files.

    One glbx-mdp3-YYYYMMDD.mbp-10.dbn.zst per trading day for the parent symbol ES.FUT:
    front, next and deferred outrights, calendar spreads, quarterly rolls, CME sessions.
    OUT_DIR defaults to <store>/synth/<ROOT>.FUT.

    \b
    Example:
      fxstore synth --start 2024-02-01 --end 2024-06-30 --events-per-day 50000 --signal 0.5
    """
    config = _synth_config(**options)
    _run_synth(config, out_dir or _default_synth_dir(store_root, config.root), quiet)


def _default_synth_dir(store_root: Path, root: str) -> Path:
    from fxstore.store import synth_dir

    return synth_dir(store_root, f"{root}.FUT")


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--symbol",
    default=None,
    help="Parent symbol whose front month to show (ES.FUT); default: from the files' metadata.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@quiet_option
def scan(paths: Sequence[Path], symbol: str | None, as_json: bool, quiet: bool) -> None:
    """Show what is in DBN MBP-10 files before anything is built.

    PATHS are .dbn / .dbn.zst files or Databento batch-download folders. Prints the
    dataset, schema, date span, each instrument's records and traded volume per trading
    day, and the front-month schedule.

    \b
    Example:
      fxstore scan data/synth/ES.FUT --symbol ES.FUT
    """
    report = _scan(paths, symbol, quiet)
    if as_json:
        _echo_json(report.to_json())
    else:
        click.echo(report.format_text())


def _scan(paths: Sequence[Path], symbol: str | None, quiet: bool) -> Any:
    from fxstore.ingest import scan_dbn

    with _progress("scan", quiet) as progress:
        return scan_dbn(paths, symbol=symbol, on_start=progress.start, on_progress=progress.advance)


def _bar_config(bar_type: str, threshold: float | None, target: float | None) -> Any:
    from fxstore.config import BarConfig

    extra = {} if target is None else {"target_bars_per_day": target}
    return BarConfig(bar_type=bar_type, threshold=threshold, **extra)  # type: ignore[arg-type]


def _run_ingest(config: Any, paths: Sequence[Path], store_root: Path, quiet: bool) -> Any:
    if config.workers > 1:
        from fxstore.ingest import start_worker_server

        start_worker_server()  # boots while this process imports the pipeline
    from fxstore.ingest import ingest as run_ingest

    with _progress("ingest", quiet) as progress:
        summary = run_ingest(
            config, paths, store_root, on_start=progress.start, on_progress=progress.advance
        )
    if summary.up_to_date:
        click.echo(f"Up to date: {summary.out_dir} ({summary.n_bars:,} bars); --force rebuilds.")
        return summary
    click.echo(
        f"Ingested {summary.n_days} trading days: {summary.n_records:,} records read, "
        f"{summary.n_kept:,} kept, {summary.n_bars:,} bars ({summary.bars_per_day:.1f}/day), "
        f"{summary.days_written} written, {summary.days_skipped} resumed, "
        f"in {summary.elapsed_s:.1f} s -> {summary.out_dir}"
    )
    rolls = [e for e in summary.schedule if e.is_roll]
    for entry in rolls:
        click.echo(f"  roll {entry.trading_day}: {entry.contract} (id {entry.instrument_id})")
    return summary


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--symbol", default="ES.FUT", show_default=True, help="Store key and parent symbol.")
@click.option(
    "--instrument-mode",
    default="front-month",
    show_default=True,
    help="all | id=N | front-month (highest previous-day volume outright, causal).",
)
@click.option(
    "--bar-type",
    type=click.Choice(
        [
            "dollar_imbalance",
            "volume_imbalance",
            "tick_imbalance",
            "dollar",
            "volume",
            "tick",
            "time",
        ]
    ),
    default="dollar_imbalance",
    show_default=True,
    help="López de Prado imbalance bars, or plain bars (these need --threshold).",
)
@click.option(
    "--threshold", type=float, default=None, help="Plain bars: trades/contracts/$/s per bar."
)
@click.option(
    "--target-bars-per-day",
    type=float,
    default=None,
    help="Imbalance bars: bars aimed at per trading day (default 100).",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Processes building days in parallel [default: all cores].",
)
@click.option("--force", is_flag=True, help="Rebuild even when inputs and config are unchanged.")
@store_option
@quiet_option
def ingest(
    paths: Sequence[Path],
    symbol: str,
    instrument_mode: str,
    bar_type: str,
    threshold: float | None,
    target_bars_per_day: float | None,
    workers: int | None,
    force: bool,
    store_root: Path,
    quiet: bool,
) -> None:
    """Build imbalance bars from DBN MBP-10 files into the Parquet bar store.

    Writes bars/<SYMBOL>/<instrument-key>/<bar-key>/<YYYY-MM-DD>.parquet, one file per
    trading day, and a manifest. Re-running with the same inputs and config skips the
    work; a killed run resumes.

    \b
    Example:
      fxstore ingest data/synth/ES.FUT --symbol ES.FUT --instrument-mode front-month
    """
    import os

    from fxstore.config import IngestConfig

    config = IngestConfig(
        symbol=symbol,
        instrument_mode=instrument_mode,
        bars=_bar_config(bar_type, threshold, target_bars_per_day),
        workers=workers if workers is not None else (os.cpu_count() or 1),
        force=force,
    )
    _run_ingest(config, paths, store_root, quiet)


@cli.command(context_settings=CONTEXT_SETTINGS)
@synth_options
@click.option(
    "--profile",
    default="smoke",
    show_default=True,
    help="Training profile (smoke | default | production | a TOML file).",
)
@click.option("--train/--no-train", "with_train", default=True, help="End with `fxstore train`.")
@store_option
@quiet_option
def demo(store_root: Path, quiet: bool, profile: str, with_train: bool, **options: Any) -> None:
    """Run the main job on the built-in synthetic market, from DBN files to a trained agent.

    Generates the default synthetic ES market under <store>/synth/ES.FUT (with a planted
    order-flow signal unless --signal says otherwise), scans it (front month schedule
    included), ingests it into front-month dollar-imbalance bars, precomputes the default
    feature set into the fxcache, and trains the agent walk-forward with the smoke profile,
    printing its out-of-sample results next to the baselines'.

    \b
    Example:
      fxstore demo
      fxstore demo --signal 0      # nothing to learn: the agent must not look clever
    """
    ctx = click.get_current_context()
    if ctx.get_parameter_source("signal_strength") == click.core.ParameterSource.DEFAULT:
        options["signal_strength"] = DEMO_SIGNAL
    config = _synth_config(**options)
    out_dir = _default_synth_dir(store_root, config.root)
    _run_synth(config, out_dir, quiet)
    report = _scan([out_dir], f"{config.root}.FUT", quiet)
    click.echo(report.format_text())
    import os

    from fxstore.config import IngestConfig

    ingest_config = IngestConfig(symbol=f"{config.root}.FUT", workers=os.cpu_count() or 1)
    _run_ingest(ingest_config, [out_dir], store_root, quiet)
    _run_precompute(
        _feature_config(ingest_config.symbol, bar_key=ingest_config.bars.key), store_root
    )
    if with_train:
        from fxstore.cli_train import run_train, train_config

        run_train(train_config(profile, {"symbol": ingest_config.symbol}), store_root, quiet)


def _feature_config(
    symbol: str,
    *,
    instrument_key: str = "mbp10_front_month",
    bar_key: str | None = None,
    features_file: Path | None = None,
    shard_by: str = "month",
    force: bool = False,
) -> Any:
    from fxstore.config import FeatureConfig
    from fxstore.features.definitions import default_featureset, load_featureset

    return FeatureConfig(
        symbol=symbol,
        instrument_key=instrument_key,
        bar_key=bar_key,
        features=load_featureset(features_file) if features_file else default_featureset(),
        shard_by=shard_by,  # type: ignore[arg-type]
        force=force,
    )


def _run_precompute(config: Any, store_root: Path, as_json: bool = False) -> Any:
    from dataclasses import asdict

    from fxstore.features.precompute import precompute as run_precompute

    summary = run_precompute(config, store_root)
    if as_json:
        _echo_json(asdict(summary))
    else:
        click.echo(summary.format_text())
    return summary


def json_option(func: F) -> F:
    """The --json option: print the result as JSON."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(func)


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.option("--symbol", default="ES.FUT", show_default=True, help="Store symbol of the bars.")
@click.option(
    "--instrument-key",
    default="mbp10_front_month",
    show_default=True,
    help="Bar series' instrument key (one continuous series).",
)
@click.option("--bar-key", default=None, help="Bar series' bar key [default: the only one].")
@click.option(
    "--features",
    "features_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Feature-set TOML file picking and parameterising features [default: the default set].",
)
@click.option(
    "--shard-by",
    type=click.Choice(["month", "year", "day"]),
    default="month",
    show_default=True,
    help="One shard per calendar month, year or day of trading_day.",
)
@click.option(
    "--force", is_flag=True, help="Recompute even when bars and feature set are unchanged."
)
@json_option
@store_option
def precompute(
    symbol: str,
    instrument_key: str,
    bar_key: str | None,
    features_file: Path | None,
    shard_by: str,
    force: bool,
    as_json: bool,
    store_root: Path,
) -> None:
    """Compute features from the bar store into the fxcache the trainer memory-maps.

    Reads bars/<SYMBOL>/<instrument-key>/<bar-key>/ and writes
    fxcache/<SYMBOL>/<featureset-hash>/: uncompressed Arrow IPC shards of float32 features
    and targets, and a manifest. Features are point in time; warm-up bars are dropped.
    Re-running with unchanged bars and feature set does nothing.

    \b
    Example:
      fxstore precompute --symbol ES.FUT --features features.toml
    """
    config = _feature_config(
        symbol,
        instrument_key=instrument_key,
        bar_key=bar_key,
        features_file=features_file,
        shard_by=shard_by,
        force=force,
    )
    _run_precompute(config, store_root, as_json)


@cli.command(name="ls", context_settings=CONTEXT_SETTINGS)
@json_option
@store_option
def ls(as_json: bool, store_root: Path) -> None:
    """List what the store holds: bar series and feature caches.

    \b
    Example:
      fxstore ls --store data
    """
    from fxstore.features.catalog import list_store

    listing = list_store(store_root)
    if as_json:
        _echo_json(listing.to_json())
    else:
        click.echo(listing.format_text())


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("symbol")
@click.option("--featureset", default=None, help="Feature-set hash [default: the latest written].")
@json_option
@store_option
def info(symbol: str, featureset: str | None, as_json: bool, store_root: Path) -> None:
    """Show a symbol's feature cache: source bars, rows, feature definitions, shards.

    \b
    Example:
      fxstore info ES.FUT
    """
    from fxstore.features.catalog import format_info
    from fxstore.features.reader import FeatureStore

    manifest = FeatureStore(store_root).manifest(symbol, featureset)
    if as_json:
        _echo_json(dict(manifest.data))
    else:
        click.echo(format_info(manifest))


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="fxstore")


# The training commands (backtest, train) live in their own module; importing it registers
# them on `cli`.
from fxstore import cli_train as _cli_train  # noqa: E402, F401

__all__ = ["cli", "main"]
