"""Commands over the store: ``precompute``, ``ls``, ``info``, ``gc`` and ``features``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from fxstore.cli._options import (
    CONTEXT_SETTINGS,
    command,
    default_of,
    executor_config,
    executor_options,
    features_file_option,
    featureset_option,
    json_option,
    override,
    store_option,
    symbol_option,
)
from fxstore.cli._output import Output, echo_json, echo_report
from fxstore.config import FeatureConfig
from fxstore.errors import InvalidInputError

if TYPE_CHECKING:
    from fxstore.config import ShardBy
    from fxstore.features.precompute import PrecomputeSummary


def run_precompute(
    config: FeatureConfig, store_root: Path, output: Output = "text"
) -> PrecomputeSummary:
    """Compute the fxcache, then print its summary (as text or JSON)."""
    from dataclasses import asdict

    from fxstore.features.precompute import precompute as run
    from fxstore.remote import commit, location

    summary = run(config, store_root)
    commit(store_root)  # in an s3:// store: success is told once the bucket holds it
    if output == "json":
        echo_json({**asdict(summary), "out_dir": location(summary.out_dir)})
    elif output == "text":
        click.echo(summary.format_text(where=location(summary.out_dir)))
    return summary


@command()
@symbol_option("Store symbol of the bars", default_from=FeatureConfig)
@click.option(
    "--instrument-key",
    default=default_of(FeatureConfig, "instrument_key"),
    show_default=True,
    help="Bar series' instrument key (one continuous series).",
)
@click.option("--bar-key", default=None, help="Bar series' bar key [default: the only one].")
@features_file_option("picking and parameterising features")
@click.option(
    "--shard-by",
    type=click.Choice(["month", "year", "day"]),
    default=default_of(FeatureConfig, "shard_by"),
    show_default=True,
    help="One shard per calendar month, year or day of trading_day.",
)
@click.option(
    "--force", is_flag=True, help="Recompute even when bars and feature set are unchanged."
)
@executor_options("the build (one task: the features are causal over the whole series)")
@json_option
@store_option
def precompute(
    symbol: str | None,
    instrument_key: str,
    bar_key: str | None,
    features_file: str | None,
    shard_by: ShardBy,
    force: bool,
    executor_kind: str,
    ray_address: str | None,
    ray_timeout: float,
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
    from fxstore.features.definitions import featureset_named

    config = override(
        FeatureConfig(executor=executor_config(executor_kind, ray_address, ray_timeout)),
        symbol=symbol,
        instrument_key=instrument_key,
        bar_key=bar_key,
        features=featureset_named(features_file) if features_file else None,
        shard_by=shard_by,
        force=force,
    )
    run_precompute(config, store_root, "json" if as_json else "text")


@command("ls")
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
        echo_json(listing.to_json())
    else:
        click.echo(listing.format_text())


@command()
@click.argument("symbol")
@featureset_option(default_from="the latest written")
@click.option(
    "--versions",
    "show_versions",
    is_flag=True,
    help="List the versions of the symbol's bar series instead (newest first).",
)
@json_option
@store_option
def info(
    symbol: str, featureset: str | None, show_versions: bool, as_json: bool, store_root: Path
) -> None:
    """Show a symbol's feature cache: source bars, rows, feature definitions, shards.

    With --versions: every committed version of the symbol's bar series (each ingest build
    is one), when it was committed, what it holds and which fxcaches were built from it.

    \b
    Examples:
      fxstore info ES.FUT
      fxstore info ES.FUT --versions
    """
    from fxstore.features.catalog import format_info
    from fxstore.features.reader import FeatureStore

    if show_versions:
        listing = FeatureStore(store_root).list_bar_versions(symbol)
        if as_json:
            echo_json([s.to_json() for s in listing])
        else:
            click.echo("\n".join(s.format_text() for s in listing))
        return
    manifest = FeatureStore(store_root).manifest(symbol, featureset)
    if as_json:
        echo_json(dict(manifest.data))
    else:
        click.echo(format_info(manifest))


@command()
@click.argument("symbol", required=False)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    default=None,
    help="Keep the N newest versions of each bar series (the current one among them).",
)
@click.option(
    "--older-than",
    default=None,
    help="Delete only versions committed before this time: an ISO date or time (UTC unless "
    "it says otherwise) or an age (30d, 12h).",
)
@click.option(
    "--caches",
    is_flag=True,
    help="Prune fxcaches instead: those built from bars since replaced that no run read.",
)
@click.option(
    "--dry-run/--delete",
    default=True,
    show_default=True,
    help="List what would be deleted, or delete it.",
)
@json_option
@store_option
def gc(
    symbol: str | None,
    keep: int | None,
    older_than: str | None,
    caches: bool,
    dry_run: bool,
    as_json: bool,
    store_root: Path,
) -> None:
    """Prune old versions of bar series, or (--caches) old fxcaches, of SYMBOL or of all.

    Never deletes the current version of a series, nor a version an fxcache was built from.
    By default nothing is deleted: the versions that would be are listed; --delete deletes.
    With both --keep and --older-than, a version goes only when both rules let it go.
    With --caches, an fxcache goes unless it is built from the current bars (what train
    and backtest read by default) or a run read it (its report and --resume need it).

    \b
    Examples:
      fxstore gc ES.FUT --keep 3
      fxstore gc --older-than 30d --delete
      fxstore gc --caches --delete
    """
    from fxstore.features.versions import gc as run
    from fxstore.features.versions import parse_time_ns

    if caches:
        if keep is not None or older_than is not None:
            raise InvalidInputError(
                "--caches prunes fxcaches by what reads them: drop --keep and --older-than "
                "(they choose bar versions)."
            )
        from fxstore.features.caches import gc_caches

        echo_report(gc_caches(store_root, symbol=symbol, dry_run=dry_run), as_json)
        return
    older_than_ns = None if older_than is None else parse_time_ns(older_than, "--older-than")
    report = run(store_root, symbol=symbol, keep=keep, older_than_ns=older_than_ns, dry_run=dry_run)
    echo_report(report, as_json)


@click.group("features", invoke_without_command=True, context_settings=CONTEXT_SETTINGS)
@features_file_option("to list")
@click.option(
    "--toml",
    "as_toml",
    is_flag=True,
    help="Print the feature set as a TOML file for `precompute --features` instead.",
)
@symbol_option(
    "Store symbol whose bars give the tick size (their contract facts)",
    default_from="none, the tick size is left to precompute",
)
@click.option("--bar-key", default=None, help="Bar series' bar key [default: the only one].")
@store_option
@click.pass_context
def features(
    ctx: click.Context,
    features_file: str | None,
    as_toml: bool,
    symbol: str | None,
    bar_key: str | None,
    store_root: Path,
) -> None:
    """List every feature and target of a feature set: parameters, units and formula.

    Without --features, the default set precompute writes. With --symbol, the tick size
    (spread, microprice and VWAP distance are in ticks) is read from that symbol's bars'
    contract facts in the store (Databento definitions or fxstore's table of CME roots),
    as precompute does. --toml prints a file `fxstore precompute --features` loads: edit
    it to pick and parameterise features, or to add expressions over them
    (docs/guide/expressions.md; examples/features.toml is the default set). `features show KEY`
    prints the set that built an fxcache.

    \b
    Examples:
      fxstore features
      fxstore features --toml > my_features.toml
      fxstore features --symbol ES.FUT
      fxstore features show 0123456789abcdef
    """
    if ctx.invoked_subcommand is not None:
        return
    from fxstore.features.definitions import featureset_named, resolve_featureset
    from fxstore.features.describe import featureset_toml, format_featureset

    featureset = resolve_featureset(featureset_named(features_file) if features_file else None)
    tick_source = None
    if symbol is not None and featureset.settings.tick_size is None:
        from fxstore.features.precompute import contract_tick_size, resolve_bars

        source = resolve_bars(store_root, FeatureConfig(symbol=symbol, bar_key=bar_key))
        where = source.folder / "manifest.json"
        featureset = featureset.with_tick_size(contract_tick_size(source.manifest, str(where)))
        tick_source = f"from the contract facts in {where}"
    if as_toml:
        title = f"Feature set {features_file}" if features_file else "fxstore's default feature set"
        click.echo(featureset_toml(featureset, title=title), nl=False)
    else:
        click.echo(format_featureset(featureset, tick_source=tick_source))


@features.command("show", context_settings=CONTEXT_SETTINGS)
@click.argument("key")
@symbol_option("Store symbol of the fxcache", default_from="the one symbol holding KEY")
@store_option
def show(key: str, symbol: str | None, store_root: Path) -> None:
    """Print the feature set that built fxcache KEY, as a TOML file.

    KEY is the cache's feature-set hash (`fxstore ls`, `fxstore info`). The definitions
    come from the cache's manifest; `fxstore precompute --features FILE` of the printed
    file over the same bars names the same cache.

    \b
    Example:
      fxstore features show 0123456789abcdef --symbol ES.FUT > built.toml
    """
    import warnings

    from fxstore.errors import FxStoreWarning
    from fxstore.features.catalog import cache_featureset
    from fxstore.features.describe import featureset_toml

    found = cache_featureset(store_root, key, symbol)
    if found.key_now != found.key:
        warnings.warn(
            FxStoreWarning(
                f"fxcache {key} was built by older definitions (a definitions or kind version "
                f"changed since): precompute of this set now writes fxcache {found.key_now}."
            ),
            stacklevel=1,
        )
    title = f"Feature set of fxcache {key} ({found.symbol}), from {found.path}"
    click.echo(featureset_toml(found.featureset, title=title), nl=False)
