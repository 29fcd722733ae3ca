"""Does the agent learn, and does it cheat? Walk-forward training on a planted-signal market and
on a market with no signal, out-of-sample metrics next to the baselines.

For each store given (each holding an fxcache of ES.FUT made by ``fxstore synth --signal S``,
``fxstore ingest`` and ``fxstore precompute``), runs ``fxstore.train.loop.train`` with one
profile and records, per policy, the out-of-sample totals over every test window: PnL, daily
Sharpe with its bootstrap 95% interval, trades, and the per-fold daily Sharpe. Pass: with the
signal, the agent's Sharpe is positive and above every baseline's; without, its interval
holds 0 or lies below it (no leakage).

The recorded run (bench/results/learn_gpu.json) used one synthetic year per store, made with
(S = 1.0 for "signal", 0.0 for "none"):

    fxstore synth --store data/learn-S --start 2023-01-03 --end 2023-12-29 \
        --events-per-day 200000 --signal S --seed 11
    fxstore ingest data/learn-S/synth/ES.FUT --store data/learn-S
    fxstore precompute --store data/learn-S

Run:  FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/bench_learn.py \
          --store signal=data/learn-signal --store none=data/learn-none \
          --profile bench/profiles/learn_gpu.toml --name learn_gpu

``--gpus 1,2`` trains each store once per GPU count (``train --gpus N``: N folds at once,
one worker process per GPU), checks that every count gives the same totals, and records the
wall time of each and its ratio to one GPU's (the target on the 9-fold year: 2 GPUs
<= 0.55x one GPU); ``--folds-per-gpu 1,3`` does the same for each number of worker
processes per GPU (each GPU named K times in ``train``'s ``gpus``: K folds at once on it;
runs keyed "NxK" where K > 1). On a machine with two GPUs:

      FXSTORE_BENCH_MACHINE=nvidia-h200-x2 PYTHONPATH=. python bench/bench_learn.py \
          --store signal=data/learn-signal --profile bench/profiles/learn_gpu.toml \
          --gpus 1,2 --name learn_gpus
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _common import profile_config, write_result

from fxstore import gpus
from fxstore.config import TrainConfig
from fxstore.errors import InvalidInputError
from fxstore.train.evaluate.results import BacktestResult
from fxstore.train.evaluate.seeds import agent_policies, summarize_seeds
from fxstore.train.loop import train
from fxstore.train.runs.folder import RunFolder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="append", required=True, help="NAME=ROOT, repeatable")
    parser.add_argument("--profile", default="default")
    parser.add_argument("--env-steps", type=int, default=None)
    parser.add_argument("--seeds", type=int, default=None, help="agents per fold")
    parser.add_argument("--device", default=None)
    parser.add_argument("--name", default="learn", help="results/<name>.json")
    parser.add_argument(
        "--gpus",
        default="1",
        help="GPU counts to train each store with, comma-separated (1: the serial loop)",
    )
    parser.add_argument(
        "--folds-per-gpu",
        default="1",
        help="worker processes per GPU to train each store with, comma-separated",
    )
    args = parser.parse_args()
    config = profile_config(
        args.profile, env_steps=args.env_steps, device=args.device, seeds=args.seeds
    )
    counts = [
        (n, k)
        for n in (int(n) for n in args.gpus.split(","))
        for k in (int(k) for k in args.folds_per_gpu.split(","))
    ]
    visible = gpus.visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"))
    try:
        devices = {
            # K workers per GPU: each of the N GPUs named K times (train's `gpus`)
            n: gpus.check_gpus(n[0], visible, device=config.device, executor_kind="local") * n[1]
            if n[0] * n[1] > 1
            else ()
            for n in counts
        }
    except InvalidInputError as err:
        raise SystemExit(f"Error: {err}") from err
    runs = {}
    for entry in args.store:
        name, root = entry.split("=", 1)
        timed = {n: _timed_train(config, Path(root), devices[n]) for n in counts}
        result, seconds = timed[counts[0]]
        for n, (other, _) in timed.items():  # --gpus must not change a number
            same = {p: m.to_json() for p, m in other.totals.items()} == {
                p: m.to_json() for p, m in result.totals.items()
            }
            if not same:
                raise SystemExit(f"{name}: {_label(n)} gave other totals than {_label(counts[0])}")
        totals = {p: m.to_json() for p, m in result.totals.items()}
        per_fold = {
            p: [r.metrics.sharpe_daily for r in result.folds if r.policy == p]
            for p in result.policies
        }
        agent = result.totals["agent"]
        agents = agent_policies(config.seeds)
        best_baseline = max(
            (
                m.sharpe_daily
                for p, m in result.totals.items()
                if p not in agents and p != "ensemble"
            ),
            default=float("nan"),
        )
        seeds = summarize_seeds(result.totals, agents)
        runs[name] = {
            "store": root,
            "seconds": seconds,
            "n_folds": len(per_fold["agent"]),
            "agent_sharpe_daily": agent.sharpe_daily,
            "agent_sharpe_daily_ci": list(agent.sharpe_daily_ci),
            "best_baseline_sharpe_daily": best_baseline,
            "seeds_pnl_mean_std": list(seeds.pnl),
            "seeds_sharpe_daily_mean_std": list(seeds.sharpe_daily),
            "significance": [sig.to_json() for sig in result.significance],
            "sharpe_daily_per_fold": per_fold,
            "totals": totals,
            "share_of_oracle": {p: result.share_of(p, "oracle") for p in result.totals},
            "share_of_ceiling": {p: result.share_of(p, "ceiling") for p in result.totals},
            "notes": list(result.notes),
            "run_dir": str(result.run_dir),
            # how far each fold trained before early stopping (its last validation's step):
            # wall times compare only between runs that trained as far
            "env_steps_per_fold": _steps_per_fold(result),
            "seconds_by_gpus": {_key(n): s for n, (_, s) in timed.items()},
            "ratio_to_one_gpu": {_key(n): s / timed[1, 1][1] for n, (_, s) in timed.items()}
            if (1, 1) in timed
            else None,
        }
        for n, (_, s) in timed.items():
            print(f"{name}: {len(per_fold['agent'])} folds with {_label(n)} in {s:.0f} s")
        print(result.format_table())
    path = write_result(
        args.name, {"profile": config.profile, "config": config.to_json(), "runs": runs}
    )
    print(f"wrote {path}")


def _key(workers: tuple[int, int]) -> str:
    """A run's key in the result: its GPU count, and "xK" for K worker processes per GPU."""
    n, k = workers
    return str(n) if k == 1 else f"{n}x{k}"


def _label(workers: tuple[int, int]) -> str:
    n, k = workers
    return f"--gpus {n}" + (f" --folds-per-gpu {k}" if k > 1 else "")


def _steps_per_fold(result: BacktestResult) -> list[int | None]:
    """Each fold's last validation step (first seed; None where it has no validation)."""
    run = RunFolder(Path(result.run_dir))
    folds = sorted({r.fold.index for r in result.folds})
    steps = []
    for index in folds:
        evals = run.read_evals(index)
        last = evals[-1].get("step") if evals else None
        steps.append(None if last is None else int(last))
    return steps


def _timed_train(
    config: TrainConfig, root: Path, devices: tuple[str, ...]
) -> tuple[BacktestResult, float]:
    """A training run on `devices` (none: the serial loop) and its wall time in seconds."""
    start = time.perf_counter()
    result = train(config, root, gpus=devices)
    return result, time.perf_counter() - start


if __name__ == "__main__":
    main()
