"""How each policy of a finished `train` run held its positions over the test windows: how
many bars between changes, how large, and how closely they follow `linear`'s, the
ceiling's and the oracle's positions (correlation over every test bar of every fold).

A policy whose positions hardly move with the forecast it was handed trades something
else: a few long holds whose PnL is the market's drift over them.

    python bench/diag_positions.py --run ic0.05-s1231=STORE/runs/RUN_ID --name positions_3y

`--pool PREFIX` also records the mean over the runs so named of their agents' (every seed's
and the ensemble's) correlations.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _common import correlation, write_result

_POLICIES = ("agent", "agent-s1", "agent-s2", "ensemble", "linear", "ceiling", "oracle")
_AGAINST = ("linear", "ceiling", "oracle")


def positions(run_dir: Path) -> dict[str, np.ndarray]:
    """Every policy's test-window positions, the folds' in order, from `fold*/results.npz`."""
    parts: dict[str, list[np.ndarray]] = {}
    folds = sorted(run_dir.glob("fold*/results.npz"))
    if not folds:
        raise SystemExit(f"Error: no fold*/results.npz in {run_dir}; is it a finished run?")
    for path in folds:
        with np.load(path) as z:
            for key in z.files:
                if key.endswith("/positions"):
                    parts.setdefault(key.removesuffix("/positions"), []).append(z[key])
    return {p: np.concatenate(v).astype(np.float64) for p, v in parts.items()}


def describe(pos: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per policy: bars per position change, mean |position|, mean position, and the
    correlation of its positions with each of `_AGAINST`'s (NaN where one never moves)."""

    out = {}
    for p in (q for q in _POLICIES if q in pos):
        x = pos[p]
        changes = int(np.count_nonzero(np.diff(x)))
        out[p] = {
            "bars": len(x),
            "bars_per_change": len(x) / changes if changes else float("inf"),
            "mean_abs_position": float(np.abs(x).mean()),
            "mean_position": float(x.mean()),
            **{f"corr_{q}": correlation(x, pos[q]) for q in _AGAINST if q in pos},
        }
    return out


def pooled(runs: dict[str, dict[str, dict[str, float]]]) -> dict[str, object]:
    """The mean over `runs` and their agents (every seed and the ensemble) of each
    correlation with `_AGAINST`'s positions (NaN ones left out)."""
    agents = [
        d for r in runs.values() for p, d in r.items() if p.startswith("agent") or p == "ensemble"
    ]
    out: dict[str, object] = {"runs": sorted(runs), "agents": len(agents)}
    for q in _AGAINST:
        values = [d[f"corr_{q}"] for d in agents if np.isfinite(d.get(f"corr_{q}", np.nan))]
        out[f"corr_{q}"] = float(np.mean(values)) if values else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, help="NAME=RUN_DIR, repeatable")
    parser.add_argument("--name", required=True, help="results/<name>.json")
    parser.add_argument(
        "--pool",
        action="append",
        default=[],
        help="a prefix of run names whose agents' correlations to average, repeatable",
    )
    args = parser.parse_args()
    runs = {}
    for entry in args.run:
        name, run_dir = entry.split("=", 1)
        runs[name] = describe(positions(Path(run_dir)))
        print(name)
        for p, d in runs[name].items():
            print(
                f"  {p:9s} {d['bars_per_change']:7.1f} bars a change, |pos| "
                f"{d['mean_abs_position']:.2f}, corr with linear "
                f"{d.get('corr_linear', np.nan):+.2f}, ceiling "
                f"{d.get('corr_ceiling', np.nan):+.2f}, oracle {d.get('corr_oracle', np.nan):+.2f}"
            )
    pools = {
        prefix: pooled({n: r for n, r in runs.items() if n.startswith(prefix)})
        for prefix in args.pool
    }
    for prefix, pool in pools.items():
        print(f"{prefix}: the agents' mean correlation with linear {pool['corr_linear']:+.2f}")
    path = write_result(args.name, {"runs": runs, "pooled": pools})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
