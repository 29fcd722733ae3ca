"""Commands over the feature cache: ``precompute``, ``ls`` and ``info``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from fxstore.cli._options import (
    command,
    default_of,
    featureset_option,
    json_option,
    override,
    store_option,
    symbol_option,
)
from fxstore.cli._output import echo_json
from fxstore.config import FeatureConfig

if TYPE_CHECKING:
    from fxstore.config import ShardBy
    from fxstore.features.precompute import PrecomputeSummary


def run_precompute(
    config: FeatureConfig, store_root: Path, as_json: bool = False
) -> PrecomputeSummary:
    """Compute the fxcache, then print its summary (as text or JSON)."""
    from dataclasses import asdict

    from fxstore.features.precompute import precompute as run

    summary = run(config, store_root)
    if as_json:
        echo_json(asdict(summary))
    else:
        click.echo(summary.format_text())
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
    default=default_of(FeatureConfig, "shard_by"),
    show_default=True,
    help="One shard per calendar month, year or day of trading_day.",
)
@click.option(
    "--force", is_flag=True, help="Recompute even when bars and feature set are unchanged."
)
@json_option
@store_option
def precompute(
    symbol: str | None,
    instrument_key: str,
    bar_key: str | None,
    features_file: Path | None,
    shard_by: ShardBy,
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
    from fxstore.features.definitions import load_featureset

    config = override(
        FeatureConfig(),
        symbol=symbol,
        instrument_key=instrument_key,
        bar_key=bar_key,
        features=load_featureset(features_file) if features_file else None,
        shard_by=shard_by,
        force=force,
    )
    run_precompute(config, store_root, as_json)


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
        echo_json(dict(manifest.data))
    else:
        click.echo(format_info(manifest))
