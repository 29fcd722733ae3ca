"""Commands that make and read DBN data: ``synth``, ``scan`` and ``ingest``."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from fxstore.cli._options import (
    DEMO_END,
    DEMO_START,
    command,
    default_of,
    definitions_option,
    executor_config,
    executor_options,
    json_option,
    multiplier_option,
    override,
    quiet_option,
    remote_settings,
    store_option,
    symbol_option,
    synth_options,
)
from fxstore.cli._output import Output, echo_json, progress
from fxstore.config import (
    BarConfig,
    IngestConfig,
    InstrumentSelection,
    RollConfig,
    SynthConfig,
    parse_roll_months,
)
from fxstore.errors import InvalidInputError
from fxstore.remote import InputObject, fetch_inputs, is_url, list_input_objects

if TYPE_CHECKING:
    from fxstore.config import BarType, SplitMode
    from fxstore.config.ingest import AdjustDirection, AdjustMethod, RollOffsetUnit, RollRule
    from fxstore.ingest import IngestSummary, RollsReport, ScanReport
    from fxstore.synth import SynthSummary

#: The choices of --bar-type, in the order help lists them.
BAR_TYPES: Final = (
    "dollar_imbalance",
    "volume_imbalance",
    "tick_imbalance",
    "dollar",
    "volume",
    "tick",
    "time",
)


def synth_config(start: dt.date | None, end: dt.date | None, **options: object) -> SynthConfig:
    """The synthetic market of the options (the demo range unless --start/--end say otherwise)."""
    return override(SynthConfig(start=start or DEMO_START, end=end or DEMO_END), **options)


def default_synth_dir(store_root: Path, root: str) -> Path:
    """Where a synthetic market of product `root` goes when no folder is given."""
    from fxstore.store import synth_dir

    return synth_dir(store_root, f"{root}.FUT")


def run_synth(config: SynthConfig, out_dir: Path, quiet: bool, *, workers: int) -> SynthSummary:
    """Write the synthetic market with a progress bar (`workers` processes), then one summary
    line on stderr."""
    if workers > 1:
        from fxstore.ingest import start_worker_server

        start_worker_server()  # boots while this process imports the generator
    from fxstore.market.calendar import trading_days_between
    from fxstore.store import os_errors
    from fxstore.synth import generate_market

    # The synthetic writer is not the store's: its OSErrors are turned here, naming the folder.
    with progress("synth", quiet) as bar, os_errors(out_dir, "write into"):
        bar.start(len(trading_days_between(config.start, config.end)))
        summary = generate_market(config, out_dir, workers=workers, on_progress=bar.advance)
    click.echo(synth_line(summary, out_dir), err=True)
    return summary


def synth_line(summary: SynthSummary, out_dir: Path) -> str:
    """What synth did, in one line: files written, or left as they were."""
    days = len(summary.trading_days)
    what = f"{len(summary.files)} DBN files ({summary.n_records:,} records, {days} trading days)"
    if summary.is_up_to_date:
        return (
            f"Up to date: {what} in {out_dir}, written before with the same options; "
            "left as they are."
        )
    kept = summary.days_kept
    resumed = f" ({kept} of the days were there already: left as they are)" if kept else ""
    return f"Wrote {what} to {out_dir} in {summary.elapsed_s:.1f} s{resumed}"


@command()
@click.argument("out_dir", required=False, type=click.Path(file_okay=False, path_type=Path))
@synth_options(signal_ic=None)
@click.option(
    "--split",
    type=click.Choice(["trading-day", "utc-day"]),
    default=default_of(SynthConfig, "split"),
    show_default=True,
    help="One file per trading day, or per UTC day as Databento batch downloads split.",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Processes writing the files in parallel; the bytes are the same for any count "
    "[default: all cores].",
)
@json_option
@store_option
@quiet_option
def synth(
    out_dir: Path | None,
    start: dt.date | None,
    end: dt.date | None,
    events_per_day: int,
    seed: int | None,
    signal_strength: float | None,
    signal_ic: float | None,
    root: str,
    split: SplitMode,
    workers: int | None,
    as_json: bool,
    store_root: Path,
    quiet: bool,
) -> None:
    """Write the built-in synthetic CME market as Databento DBN MBP-10 files.

    One glbx-mdp3-YYYYMMDD.mbp-10.dbn.zst per trading day for the parent symbol ES.FUT:
    front, next and deferred outrights, calendar spreads, quarterly rolls, CME sessions.
    OUT_DIR defaults to <store>/synth/<ROOT>.FUT. The files are written by --workers
    processes at once (all cores by default), with the same bytes for any count.

    \b
    Example:
      fxstore synth --start 2024-02-01 --end 2024-06-30 --events-per-day 50000 --signal 0.5
      fxstore synth --start 2024-02-01 --end 2024-06-30 --signal-ic 0.05
      fxstore synth --start 2021-01-01 --end 2023-12-31 --signal-ic 0.05 --workers 16
    """
    config = synth_config(
        start,
        end,
        events_per_day=events_per_day,
        seed=seed,
        signal_strength=signal_strength,
        signal_ic=signal_ic,
        root=root,
        split=split,
    )
    folder = out_dir or default_synth_dir(store_root, config.root)
    cores = os.cpu_count() or 1
    summary = run_synth(config, folder, quiet, workers=workers if workers is not None else cores)
    if as_json:
        echo_json(synth_json(summary, folder))


def scan_files(
    paths: Sequence[Path], symbol: str | None, quiet: bool, definitions: Sequence[Path] = ()
) -> ScanReport:
    """Scan DBN files with a progress bar (see :func:`fxstore.ingest.scan_dbn`)."""
    from fxstore.ingest import scan_dbn

    with progress("scan", quiet) as bar:
        return scan_dbn(
            paths,
            symbol=symbol,
            definitions=definitions,
            on_start=bar.start,
            on_progress=bar.advance,
        )


@command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@symbol_option(
    "Parent symbol whose front month to show (ES.FUT)", default_from="from the files' metadata"
)
@definitions_option
@json_option
@quiet_option
def scan(
    paths: Sequence[Path],
    symbol: str | None,
    definitions: tuple[Path, ...],
    as_json: bool,
    quiet: bool,
) -> None:
    """Show what is in DBN MBP-10 files before anything is built.

    PATHS are .dbn / .dbn.zst files or Databento batch-download folders. Prints the
    dataset, schema, date span, each instrument's records and traded volume per trading
    day with its contract facts (dollars per point, tick, expiry, and whether a definition
    record or fxstore's table gave them), and the front-month schedule.

    \b
    Example:
      fxstore scan data/synth/ES.FUT --symbol ES.FUT
    """
    report = scan_files(paths, symbol, quiet, definitions)
    if as_json:
        echo_json(report.to_json())
    else:
        click.echo(report.format_text())


def synth_json(summary: SynthSummary, out_dir: Path) -> dict[str, object]:
    """What synth wrote (or found written), as JSON data."""
    return {"out_dir": out_dir, "is_up_to_date": summary.is_up_to_date, **asdict(summary)}


def ingest_json(summary: IngestSummary) -> dict[str, object]:
    """What ingest built, as JSON data."""
    return {**asdict(summary), "bars_per_day": summary.bars_per_day}


def run_ingest(
    config: IngestConfig,
    paths: Sequence[Path | InputObject],
    store_root: Path,
    quiet: bool,
    output: Output = "text",
) -> IngestSummary:
    """Build the bars with a progress bar, then report the days, bars and rolls."""
    if config.workers > 1 and not config.executor.is_ray:
        from fxstore.ingest import start_worker_server

        start_worker_server()  # boots while this process imports the pipeline
    from fxstore.ingest import ingest
    from fxstore.remote import commit, location

    with progress("ingest", quiet) as bar:
        summary = ingest(config, paths, store_root, on_start=bar.start, on_progress=bar.advance)
    commit(store_root)  # in an s3:// store: success is told once the bucket holds it
    where = location(summary.out_dir)
    if output == "json":
        echo_json({**ingest_json(summary), "out_dir": where})
    if output != "text":
        return summary
    if summary.up_to_date:
        click.echo(f"Up to date: {where} ({summary.n_bars:,} bars); --force rebuilds.")
        return summary
    n_days = summary.days_written + summary.days_skipped + summary.days_reused
    with_bars = "" if summary.n_days == n_days else f" ({summary.n_days} with bars)"
    reused = f"{summary.days_reused} reused, " if summary.days_reused else ""
    click.echo(
        f"Ingested {n_days} trading days{with_bars}: {summary.n_records:,} records read, "
        f"{summary.n_kept:,} kept, {summary.n_bars:,} bars ({summary.bars_per_day:.1f}/day), "
        f"{summary.days_written} built, {reused}{summary.days_skipped} resumed, "
        f"in {summary.elapsed_s:.1f} s -> {where}"
    )
    for entry in summary.schedule:
        if entry.is_roll:
            why = "" if config.roll.is_default else f" ({entry.reason})"
            click.echo(
                f"  roll {entry.trading_day}: {entry.contract} (id {entry.instrument_id}){why}"
            )
    return summary


@command()
@click.argument("paths", nargs=-1, required=True)
@symbol_option("Store key and parent symbol", default_from=IngestConfig)
@click.option(
    "--instrument-mode",
    default=str(default_of(IngestConfig, "instrument_mode")),
    show_default=True,
    callback=lambda _ctx, _param, text: InstrumentSelection.parse(text),
    help="all | id=N | front-month (highest previous-day volume outright, causal).",
)
@click.option(
    "--bar-type",
    type=click.Choice(BAR_TYPES),
    default=default_of(BarConfig, "bar_type"),
    show_default=True,
    help="López de Prado imbalance bars, or plain bars (these need --threshold).",
)
@click.option(
    "--threshold",
    type=float,
    default=None,
    help="Plain bars: trades/contracts/$/s per bar [default: none, plain bars need one].",
)
@click.option(
    "--target-bars-per-day",
    type=float,
    default=None,
    help=f"Imbalance bars: bars aimed at per trading day "
    f"[default: {default_of(BarConfig, 'target_bars_per_day')}].",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Processes (or Ray tasks at once) building days in parallel [default: all cores; "
    "with --executor ray, every CPU of the cluster].",
)
@executor_options("the groups of days")
@definitions_option
@multiplier_option
@click.option(
    "--roll",
    "rule",
    type=click.Choice(["volume", "open-interest", "calendar", "databento"]),
    default=None,
    help="Front-month rule: previous-day volume, open interest published before the "
    "session (needs --statistics), a calendar offset (--roll-offset), or Databento's "
    "continuous symbology (--roll-symbology) "
    f"[default: {default_of(RollConfig, 'rule')}].",
)
@click.option(
    "--roll-symbology",
    "symbology",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="--roll databento: a saved symbology.resolve answer (stype_in continuous, e.g. "
    "ES.c.0); each trading day takes the contract it maps the day's UTC date to.",
)
@click.option(
    "--roll-continuous",
    "databento_symbol",
    default=None,
    help="--roll databento: the continuous symbol of --roll-symbology to follow "
    "[default: the only one in it].",
)
@click.option(
    "--roll-offset",
    "offset",
    type=int,
    default=default_of(RollConfig, "offset"),
    show_default=True,
    help="--roll calendar: days (--roll-offset-unit) before the last trading day (first "
    "notice day of deliverable GC, ZN, ...) to roll on.",
)
@click.option(
    "--roll-offset-unit",
    "offset_unit",
    type=click.Choice(["trading", "calendar"]),
    default=default_of(RollConfig, "offset_unit"),
    show_default=True,
    help="--roll-offset counts trading days, or calendar days (a roll day without a "
    "session rolls on the next one).",
)
@click.option(
    "--roll-months",
    "months",
    default=None,
    help="Contract months the series holds, CME codes (GJMQVZ or G,J,M,Q,V,Z) "
    "[default: every listed month].",
)
@click.option(
    "--adjust",
    type=click.Choice(["none", "difference", "ratio"]),
    default=default_of(RollConfig, "adjust"),
    show_default=True,
    help="Adjusted prices (adj_* columns, read from the bars' transitions) beside the raw ones.",
)
@click.option(
    "--adjust-direction",
    type=click.Choice(["backward", "forward"]),
    default=default_of(RollConfig, "direction"),
    show_default=True,
    help="backward: the latest contract keeps its prices; forward: the first one does.",
)
@click.option(
    "--depth",
    type=int,
    default=default_of(RollConfig, "depth"),
    show_default=True,
    help="Front-month mode: 1 the front month, 2 the next contract after it, 3 the one "
    "after that; it rolls when the front month rolls. Depth N > 1 is stored as symbol "
    "SYMBOL.N (ES.FUT.2).",
)
@click.option(
    "--statistics",
    "statistics",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Databento statistics file or folder (open interest for --roll open-interest).",
)
@click.option("--force", is_flag=True, help="Rebuild even when inputs and config are unchanged.")
@json_option
@store_option
@quiet_option
def ingest(
    paths: Sequence[str],
    symbol: str | None,
    instrument_mode: InstrumentSelection,
    bar_type: BarType,
    threshold: float | None,
    target_bars_per_day: float | None,
    workers: int | None,
    executor_kind: str,
    ray_address: str | None,
    ray_timeout: float,
    definitions: tuple[Path, ...],
    multiplier: float | None,
    rule: RollRule | None,
    symbology: Path | None,
    databento_symbol: str | None,
    offset: int,
    offset_unit: RollOffsetUnit,
    months: str | None,
    adjust: AdjustMethod,
    adjust_direction: AdjustDirection,
    depth: int,
    statistics: tuple[Path, ...],
    force: bool,
    as_json: bool,
    store_root: Path,
    quiet: bool,
) -> None:
    """Build imbalance bars from DBN MBP-10 files into the Parquet bar store.

    Writes bars/<SYMBOL>/<instrument-key>/<bar-key>/<YYYY-MM-DD>.parquet, one file per
    trading day, and a manifest. Re-running with the same inputs and config skips the
    work; a killed run resumes. PATHS may be s3:// objects or prefixes (downloaded once into
    --cache-dir; with --executor ray, read by the tasks where they are, and with an s3://
    --store the tasks write the day files into the bucket: the nodes share no folder).

    \b
    Example:
      fxstore ingest data/synth/ES.FUT --symbol ES.FUT --instrument-mode front-month
      fxstore ingest data/synth/ES.FUT --roll calendar --roll-offset 5 --adjust difference
    """
    roll = override(
        RollConfig(),
        rule=rule,
        offset=offset,
        offset_unit=offset_unit,
        databento_symbol=databento_symbol,
        months=parse_roll_months(months),
        adjust=adjust,
        direction=adjust_direction,
        depth=depth,
    )
    bars = override(
        BarConfig(bar_type=bar_type, threshold=threshold, multiplier=multiplier),
        target_bars_per_day=target_bars_per_day,
    )
    runs_on = executor_config(executor_kind, ray_address, ray_timeout)
    default_workers = 0 if runs_on.is_ray else (os.cpu_count() or 1)
    config = override(
        IngestConfig(executor=runs_on),
        symbol=symbol,
        instrument_mode=instrument_mode,
        bars=bars,
        workers=workers if workers is not None else default_workers,
        definitions=definitions,
        roll=roll,
        statistics=statistics,
        symbology=symbology,
        force=force,
    )
    endpoint, cache_dir = remote_settings()
    inputs: list[Path | InputObject] = []
    if runs_on.is_ray and any(is_url(p) for p in paths):  # the tasks read them where they are
        for value in paths:
            if is_url(value):
                inputs += list_input_objects(value, endpoint=endpoint)
            else:
                inputs.append(Path(value))
    else:
        inputs += fetch_inputs(paths, endpoint=endpoint, cache_dir=cache_dir)
    run_ingest(config, inputs, store_root, quiet, "json" if as_json else "text")


def run_rolls(store_root: Path, symbol: str, **options: object) -> RollsReport:
    """Read the transitions of a series (see :func:`fxstore.ingest.read_rolls`)."""
    from fxstore.ingest import read_rolls

    return read_rolls(store_root, symbol, **options)  # type: ignore[arg-type]


@command()
@click.argument("symbol")
@click.option(
    "--instrument-key",
    default="mbp10_front_month",
    show_default=True,
    help="The front-month series: mbp10_front_month (previous-day volume), "
    "mbp10_front_month-cal5 (--roll calendar --roll-offset 5), ...-oi (open interest).",
)
@click.option("--bar-key", default=None, help="The bar series [default: the only one].")
@click.option(
    "--databento",
    "databento",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A saved symbology.resolve JSON (ES.c.0, ES.v.0 ...) to compare with, per trading day.",
)
@click.option(
    "--databento-symbol",
    default=None,
    help="The continuous symbol of --databento to use [default: the only one].",
)
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print the rows as CSV.")
@store_option
def rolls(
    symbol: str,
    instrument_key: str,
    bar_key: str | None,
    databento: Path | None,
    databento_symbol: str | None,
    as_json: bool,
    as_csv: bool,
    store_root: Path,
) -> None:
    """Show the roll transitions of SYMBOL's front-month bars (ES.FUT).

    One row per roll: trading day, from and to contract and instrument id, rule and reason,
    the prices used (each contract's last trade before the switch) and the additive and
    multiplicative gap. With --databento, each trading day next to Databento's continuous
    symbology, which switches at 00:00 UTC where fxstore switches at the 17:00 Chicago open.

    \b
    Example:
      fxstore rolls ES.FUT --csv
    """
    if as_json and as_csv:
        raise InvalidInputError("`--json` and `--csv` are two output formats: give one of them.")
    report = run_rolls(
        store_root,
        symbol,
        instrument_key=instrument_key,
        bar_key=bar_key,
        databento=databento,
        databento_symbol=databento_symbol,
    )
    if as_json:
        echo_json(report.to_json())
    elif as_csv:
        click.echo(report.to_csv(), nl=False)
    else:
        click.echo(report.format_text())
