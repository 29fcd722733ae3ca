"""The documentation's plots, drawn from the recorded results in bench/results/.

Reads only JSON files already there (nothing is measured) and writes PNGs under docs/img/:

- ``ic_sweep_year.png``: the agent (mean and spread over seeds), the linear reference and
  the oracle, out of sample over a synthetic year, at each information coefficient
  (``ic_sweep_h200_year_ic*.json``).
- ``ingest_scaling.png``: ingest speed-up over one core against worker count, the pool next
  to the machine's own limit (``ingest_efficiency_curve_h200host_48days.json``).
- ``update_vs_pytorch.png``: one agent update's time, fxstore against PyTorch captured in a
  CUDA graph, per batch, width and precision (``train_gpu.json``).

Usage: ``python bench/plot_results.py [--out docs/img]``
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RESULTS = Path(__file__).resolve().parent / "results"
ICS = ("0", "0.02", "0.05", "0.1")


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return data


def plot_ic_sweep(out: Path) -> None:
    agent_mean, agent_std, linear, oracle = [], [], [], []
    for ic in ICS:
        run = next(iter(_load(f"ic_sweep_h200_year_ic{ic}.json")["runs"].values()))
        totals = run["totals"]
        seeds = [t["total_pnl"] for name, t in totals.items() if name.startswith("agent")]
        agent_mean.append(statistics.mean(seeds) / 1e3)
        agent_std.append(statistics.stdev(seeds) / 1e3)
        linear.append(totals["linear"]["total_pnl"] / 1e3)
        oracle.append(totals["oracle"]["total_pnl"] / 1e3)
    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=110)
    x = range(len(ICS))
    width = 0.27
    ax.bar([i - width for i in x], oracle, width, label="oracle (the planted signal)", color="#888")
    ax.bar(list(x), linear, width, label="linear (ridge)", color="#1f77b4")
    ax.bar(
        [i + width for i in x],
        agent_mean,
        width,
        yerr=agent_std,
        capsize=3,
        label="agent, mean ± std of 3 seeds",
        color="#d62728",
    )
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(list(x), [f"IC {ic}" for ic in ICS])
    ax.set_ylabel("out-of-sample PnL after costs (k$)")
    ax.set_title("One synthetic year, 9 walk-forward folds (H200, learn_gpu profile)")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "ic_sweep_year.png")
    plt.close(fig)


def plot_ingest_scaling(out: Path) -> None:
    data = _load("ingest_efficiency_curve_h200host_48days.json")["efficiency"]
    workers = sorted(int(k) for k in data if k.isdigit())
    pool = [n * data[str(n)]["pool_per_worker_paired"] for n in workers]
    ceiling = [n * data[str(n)]["ceiling_per_worker_paired"] for n in workers]
    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=110)
    ax.plot([1, *workers], [1, *workers], ":", color="#999", label="linear")
    ceiling_label = "N independent one-core ingests"
    ax.plot([1, *workers], [1, *ceiling], "s-", color="#888", label=ceiling_label)
    ax.plot([1, *workers], [1, *pool], "o-", color="#1f77b4", label="fxstore ingest --workers N")
    ax.set_xlabel("workers")
    ax.set_ylabel("speed-up over one core")
    ax.set_xticks([1, *workers])
    ax.set_title("48 days x 2 M records, 16-core H200 host")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "ingest_scaling.png")
    plt.close(fig)


def plot_update(out: Path) -> None:
    rows = _load("train_gpu.json")["rows"]
    labels = [f"{r['precision']}\n{r['batch']:,} x {r['width']}" for r in rows]
    ours = [r["fxstore"]["update_ms"] for r in rows]
    torch = [r["pytorch_graph"]["update_ms"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=110)
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], torch, 0.4, label="PyTorch in a CUDA graph", color="#888")
    ax.bar([i + 0.2 for i in x], ours, 0.4, label="fxstore", color="#1f77b4")
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("ms per update")
    ax.set_title("One C51 double-DQN update, NVIDIA H200 (batch x width)")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "update_vs_pytorch.png")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = Path(__file__).resolve().parents[1] / "docs" / "img"
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    plot_ic_sweep(args.out)
    plot_ingest_scaling(args.out)
    plot_update(args.out)
    print(f"wrote {args.out}/ic_sweep_year.png, ingest_scaling.png, update_vs_pytorch.png")


if __name__ == "__main__":
    main()
