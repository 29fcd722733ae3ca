"""Several finished `train` runs side by side, and pooled: does the agent reach the ceiling
over more test days than one market gives?

Reads each run folder's `metrics.json` (the totals `train` printed) and records, per run,
every policy's out-of-sample PnL, trades and daily Sharpe, the seeds' mean ± std, the
agent's and the ensemble's PSR and deflated Sharpe, their shares of the ceiling, and how
many folds each seed and the ensemble traded once (a position held through); then,
pooled over the runs given (their test days added up), each policy's PnL and the agent's,
the seeds' mean and the ensemble's share of the pooled ceiling. Runs are named by their
market (IC and market seed), e.g.

    python bench/collect_runs.py --run ic0.05-s1231=STORE/runs/RUN_ID \
        --run ic0.05-s1249=STORE2/runs/RUN_ID --pool ic0.05 --name years3_cpu_forecast

`--result results/NAME.json` takes the runs of a bench_learn result instead of a run folder.

Nothing is trained here: train the runs first (`fxstore train --store ROOT --profile P
--seeds 3 --ensemble`), and say in `--note` how.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from _common import write_result

from fxstore.train.evaluate.seeds import agent_policies, mean_std

_KEPT = ("total_pnl", "n_trades", "n_days", "sharpe_daily", "pnl_per_day")


def _seeds(totals: dict[str, dict[str, float]]) -> list[str]:
    n = sum(1 for p in totals if p == "agent" or p.startswith("agent-s"))
    return list(agent_policies(n))


def _share(pnl: float, ceiling: float) -> float:
    return pnl / ceiling if ceiling > 0 else math.nan


def summarise(metrics: dict[str, Any]) -> dict[str, Any]:
    """One run's totals, seeds and significance from its metrics.json."""
    totals: dict[str, dict[str, float]] = metrics["totals"]
    seeds = _seeds(totals)
    ceiling = totals["ceiling"]["total_pnl"] if "ceiling" in totals else math.nan
    significance = {
        s["policy"]: {
            "psr_p": s["psr_p_value"],
            "dsr_p": s["dsr_p_value"],
            "n_trials": s["n_trials"],
        }
        for s in metrics["significance"]
    }
    return {
        "n_folds": len(metrics["folds"]),
        "totals": {p: {k: m[k] for k in _KEPT} for p, m in totals.items()},
        "seeds_pnl_mean_std": list(mean_std([totals[p]["total_pnl"] for p in seeds])),
        "share_of_ceiling": {
            p: _share(m["total_pnl"], ceiling) for p, m in totals.items() if p != "ceiling"
        },
        "significance": significance,
        "folds_with_one_trade": _one_trade_folds(metrics["folds"], [*seeds, "ensemble"]),
    }


def _one_trade_folds(folds: list[Any], policies: list[str]) -> dict[str, int]:
    """Per policy, the folds whose test window it traded once: a position taken and held
    through (from each fold's metrics; none where the folds' metrics are not recorded)."""
    out: dict[str, int] = {}
    for fold in folds:
        for policy in policies:
            metrics = (fold or {}).get("policies", {}).get(policy)
            if metrics is not None:
                out[policy] = out.get(policy, 0) + int(metrics["n_trades"] == 1)
    return out


def pooled(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every policy's PnL and test days added over `runs`, its PnL per test day (where there
    is no signal, set against a round trip's cost), the seeds' pooled mean ± std (each seed's
    PnL added over the runs first) and each policy's share of the pooled ceiling."""
    names = set.intersection(*(set(r["totals"]) for r in runs.values()))
    pnl = {p: sum(r["totals"][p]["total_pnl"] for r in runs.values()) for p in names}
    days = {p: sum(r["totals"][p]["n_days"] for r in runs.values()) for p in names}
    seeds = mean_std([pnl[p] for p in _seeds({p: {} for p in names})])
    ceiling = pnl.get("ceiling", math.nan)
    return {
        "runs": sorted(runs),
        "n_days": days.get("agent"),
        "pnl": pnl,
        "pnl_per_day": {p: v / days[p] if days[p] else math.nan for p, v in pnl.items()},
        "seeds_pnl_mean_std": list(seeds),
        "seeds_share_of_ceiling": _share(seeds[0], ceiling),
        "share_of_ceiling": {p: _share(v, ceiling) for p, v in pnl.items() if p != "ceiling"},
    }


def _from_bench(path: Path) -> dict[str, dict[str, Any]]:
    """The runs of a bench_learn result file, as :func:`summarise` gives a run folder's."""
    try:
        result = json.loads(path.read_text())
        runs = result["runs"]
    except (OSError, ValueError, KeyError) as err:
        raise SystemExit(f"Error: cannot read the runs of {path}: {err}") from err
    machine = result.get("machine", {}).get("hostname_kind")
    return {
        name: {
            "result": str(path),
            "machine": machine,
            **summarise({**run, "folds": [None] * run["n_folds"]}),
        }
        for name, run in runs.items()
    }


def _money(value: float) -> str:
    return f"-${-value:,.0f}" if value < 0 else f"${value:,.0f}"


def _row(name: str, r: dict[str, Any]) -> str:
    t = r["totals"]
    mean, std = r["seeds_pnl_mean_std"]
    cells = [f"{_money(mean)} ± {_money(std)}"]
    cells += [
        _money(t[p]["total_pnl"]) if p in t else "n/a"
        for p in ("ensemble", "linear", "ceiling", "oracle")
    ]
    return f"| {name} | {t['agent']['n_days']} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", default=[], help="NAME=RUN_DIR, repeatable")
    parser.add_argument(
        "--result",
        action="append",
        default=[],
        help="a bench_learn result (results/NAME.json): each of its runs, repeatable",
    )
    parser.add_argument(
        "--pool",
        action="append",
        default=[],
        help="a prefix of run names to pool, repeatable (e.g. ic0.05)",
    )
    parser.add_argument("--note", default="", help="how the runs were made")
    parser.add_argument("--name", required=True, help="results/<name>.json")
    args = parser.parse_args()
    runs = {}
    for entry in args.run:
        name, run_dir = entry.split("=", 1)
        path = Path(run_dir) / "metrics.json"
        try:
            metrics = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise SystemExit(f"Error: cannot read {path}: {err}; is the run finished?") from err
        runs[name] = {"run_dir": run_dir, **summarise(metrics)}
    for result in args.result:
        runs.update(_from_bench(Path(result)))
    if not runs:
        raise SystemExit("Error: no runs given; pass --run NAME=RUN_DIR or --result FILE")
    pools = {
        prefix: pooled({n: r for n, r in runs.items() if n.startswith(prefix)})
        for prefix in args.pool
        if any(n.startswith(prefix) for n in runs)
    }
    print("| market | test days | seeds, mean ± std | ensemble | linear | ceiling | oracle |")
    print("|---|---|---|---|---|---|---|")
    for name, r in runs.items():
        print(_row(name, r))
    for prefix, p in pools.items():
        share = p["share_of_ceiling"]
        print(
            f"pooled {prefix} ({len(p['runs'])} runs, {p['n_days']} test days), share of the "
            f"ceiling's {_money(p['pnl'].get('ceiling', math.nan))}: the seeds' mean "
            f"{p['seeds_share_of_ceiling']:.0%}, the ensemble "
            f"{share.get('ensemble', math.nan):.0%}, linear {share.get('linear', math.nan):.0%}; "
            f"a test day: the seeds' mean {_money(p['seeds_pnl_mean_std'][0] / p['n_days'])}, "
            f"the ensemble {_money(p['pnl_per_day'].get('ensemble', math.nan))}"
        )
    path = write_result(args.name, {"note": args.note, "runs": runs, "pooled": pools})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
