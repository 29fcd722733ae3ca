"""The IC sweep: the agent against the oracle and the linear reference at realistic ICs.

For each information coefficient in ``--ics`` (default 0, 0.02, 0.05, 0.1), builds one
synthetic market (``fxstore synth --signal-ic IC``, one year, 200,000 records a day, seed 11),
ingests and precomputes it into ``<work>/ic-<IC>/`` (skipped when the fxcache is already
there), then trains walk-forward with ``--seeds`` seeds per fold and records, per IC, the
pooled out-of-sample totals of every policy (agent seeds, oracle, linear, ofi-sign, flat,
long, random), the agent's share of the oracle's PnL (mean and spread over seeds), and the
deflated Sharpe with its trial count. The targets it checks: at IC 0.05 the agent's pooled PnL
is >= 50% of the oracle's and above linear's; at IC 0 its deflated Sharpe is not significant
(p > 0.05).

Run (one command, on a GPU machine; about 4 markets x synth+ingest, then 4 trainings):

    FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/bench_ic_sweep.py \
        --work data/ic-sweep --profile default --seeds 3 --name ic_sweep_h200

Smaller, on a CPU: ``--start 2024-02-01 --end 2024-04-30 --profile smoke --device cpu``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging
import os
import time
from pathlib import Path

from _common import write_result

from fxstore.train.loop import train
from fxstore.train.profiles import load_profile


def build_market(root: Path, ic: float, args: argparse.Namespace) -> None:
    """Synth, ingest and precompute the market of `ic` under `root` (once: a root that holds
    an fxcache is taken as built, so prebuilt markets train without the ingest's packages)."""
    if (root / "fxcache").is_dir():
        return
    from fxstore.config import FeatureConfig, IngestConfig, SynthConfig
    from fxstore.features.precompute import precompute
    from fxstore.ingest.run.pipeline import ingest
    from fxstore.synth import generate_market

    market = SynthConfig(
        start=dt.date.fromisoformat(args.start),
        end=dt.date.fromisoformat(args.end),
        events_per_day=args.events_per_day,
        seed=args.market_seed,
        signal_ic=ic,
    )
    folder = root / "synth" / "ES.FUT"
    generate_market(market, folder)
    ingest(IngestConfig(symbol="ES.FUT", workers=os.cpu_count() or 1), [folder], root)
    precompute(FeatureConfig(), root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder of the markets")
    parser.add_argument("--ics", default="0,0.02,0.05,0.1")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--device", default=None)
    parser.add_argument("--start", default="2023-01-03")
    parser.add_argument("--end", default="2023-12-29")
    parser.add_argument("--events-per-day", type=int, default=200_000)
    parser.add_argument("--market-seed", type=int, default=11)
    parser.add_argument("--name", default="ic_sweep", help="results/<name>.json")
    parser.add_argument("--verbose", action="store_true", help="log training progress")
    args = parser.parse_args()
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = dataclasses.replace(load_profile(args.profile), seeds=args.seeds)
    if args.device is not None:
        config = dataclasses.replace(config, device=args.device)
    runs = {}
    for ic in (float(x) for x in args.ics.split(",")):
        root = args.work / f"ic-{ic:g}"
        build_market(root, ic, args)
        start = time.perf_counter()
        result = train(dataclasses.replace(config, signal_dir=str(root / "synth" / "ES.FUT")), root)
        seconds = time.perf_counter() - start
        agents = [p for p in result.totals if p.startswith("agent")]
        runs[f"{ic:g}"] = {
            "store": str(root),
            "seconds": seconds,
            "totals": {p: m.to_json() for p, m in result.totals.items()},
            "share_of_oracle": {p: result.share_of_oracle(p) for p in (*agents, "linear")},
            "significance": [s.to_json() for s in result.significance],
            "notes": list(result.notes),
            "run_dir": str(result.run_dir),
        }
        print(f"IC {ic:g}: trained in {seconds:.0f} s")
        print(result.format_table())
        # after every IC, so a sweep cut short keeps the ICs it finished
        body = {"profile": config.profile, "config": config.to_json(), "seeds": args.seeds}
        path = write_result(args.name, body | {"runs": runs})
        print(f"wrote {path} ({len(runs)} IC(s) so far)")


if __name__ == "__main__":
    main()
