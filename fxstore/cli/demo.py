"""``fxstore demo``: the whole pipeline on the built-in synthetic market, one command."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Final

import click

from fxstore.cli._options import (
    command,
    profile_option,
    quiet_option,
    store_option,
    synth_options,
)
from fxstore.cli.data import default_synth_dir, run_ingest, run_synth, scan_files, synth_config
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
    store_root: Path,
    quiet: bool,
) -> None:
    """Run the main job on the built-in synthetic market, from DBN files to a trained agent.

    Generates the default synthetic ES market under <store>/synth/ES.FUT (with a planted
    order-flow signal of IC 0.1 unless --signal-ic or --signal say otherwise), scans it
    (front month schedule included), ingests it into front-month dollar-imbalance bars,
    precomputes the default feature set into the fxcache, and trains the agent walk-forward
    with the smoke profile, printing its out-of-sample results next to the baselines'.

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
    run_synth(market, out_dir, quiet)
    click.echo(scan_files([out_dir], market.parent_symbol, quiet).format_text())
    ingest = IngestConfig(symbol=market.parent_symbol, workers=os.cpu_count() or 1)
    run_ingest(ingest, [out_dir], store_root, quiet)
    run_precompute(FeatureConfig(symbol=ingest.symbol, bar_key=ingest.bars.key), store_root)
    if with_train:
        run_train(train_config(profile or DEMO_PROFILE, symbol=ingest.symbol), store_root, quiet)
