"""``fxstore demo``: the whole pipeline on the built-in synthetic market, one command."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import asdict
from pathlib import Path
from typing import Final

import click

from fxstore.cli._options import (
    command,
    json_option,
    profile_option,
    quiet_option,
    store_option,
    synth_options,
)
from fxstore.cli._output import Output, echo_json
from fxstore.cli.data import (
    default_synth_dir,
    ingest_json,
    run_ingest,
    run_synth,
    scan_files,
    synth_config,
    synth_json,
)
from fxstore.cli.features import run_precompute
from fxstore.cli.train import run_train, train_config
from fxstore.config import FeatureConfig, IngestConfig

#: The demo market's planted signal, as an information coefficient (one-bar IC, the top of
#: real order-flow signals' 0.02-0.1): the oracle makes money after costs over the demo's
#: 20 test days, so there is something to learn (`--signal 0` for nothing to find).
DEMO_SIGNAL_IC: Final = 0.1
#: The training profile of the demo: a minute on a laptop CPU.
DEMO_PROFILE: Final = "smoke"


@command()
@synth_options(signal_ic=DEMO_SIGNAL_IC)
@profile_option(default=DEMO_PROFILE)
@click.option("--train/--no-train", "with_train", default=True, help="End with `fxstore train`.")
@click.option(
    "--verbose",
    is_flag=True,
    help="Also print the scan's instruments (their records and volume, each trading day's "
    "too) and every fold's rows of the results.",
)
@json_option
@store_option
@quiet_option
def demo(
    start: dt.date | None,
    end: dt.date | None,
    events_per_day: int,
    seed: int | None,
    signal_strength: float | None,
    signal_ic: float | None,
    root: str,
    profile: str | None,
    with_train: bool,
    verbose: bool,
    as_json: bool,
    store_root: Path,
    quiet: bool,
) -> None:
    """Run the main job on the built-in synthetic market, from DBN files to a trained agent.

    Generates the default synthetic ES market under <store>/synth/ES.FUT (with a planted
    order-flow signal of IC 0.1 unless --signal-ic or --signal say otherwise), scans it
    (front month schedule included), ingests it into front-month dollar-imbalance bars,
    precomputes the default feature set into the fxcache, and trains the agent walk-forward
    with the smoke profile, printing its out-of-sample results next to the baselines'.

    It prints what each step did: the scan's summary and front month (--verbose: its
    instruments too, with their records and volume per trading day) and the results'
    totals (--verbose: every fold's rows too; `fxstore runs show` prints them later).

    \b
    Example:
      fxstore demo
      fxstore demo --signal 0      # nothing to learn: the agent must not look clever
      fxstore demo --signal-ic 0.05  # a weaker edge: 20 test days barely show it
    """
    if signal_strength is None and signal_ic is None:
        signal_ic = DEMO_SIGNAL_IC
    market = synth_config(
        start,
        end,
        events_per_day=events_per_day,
        seed=seed,
        signal_strength=signal_strength,
        signal_ic=signal_ic,
        root=root,
    )
    out_dir = default_synth_dir(store_root, market.root)
    output: Output = "none" if as_json else "text"
    synth = run_synth(market, out_dir, quiet, workers=os.cpu_count() or 1)
    scan = scan_files([out_dir], market.parent_symbol, quiet)
    if not as_json:
        click.echo(scan.format_text(brief=not verbose))
    ingest = IngestConfig(symbol=market.parent_symbol, workers=os.cpu_count() or 1)
    bars = run_ingest(ingest, [out_dir], store_root, quiet, output)
    features = FeatureConfig(symbol=ingest.symbol, bar_key=ingest.bars.key)
    cache = run_precompute(features, store_root, output)
    result = None
    if with_train:
        # the cache it just built, also where the store holds others (an earlier default set's)
        config = train_config(profile or DEMO_PROFILE, symbol=ingest.symbol, featureset=cache.key)
        click.echo(f"fxcache {ingest.symbol}/{cache.key}: the one just precomputed", err=True)
        result = run_train(config, store_root, quiet, output=output, per_fold=verbose)
    if as_json:
        echo_json(
            {
                "synth": synth_json(synth, out_dir),
                "scan": scan.to_json(),
                "ingest": ingest_json(bars),
                "precompute": asdict(cache),
                "train": None if result is None else result.to_json(),
            }
        )
