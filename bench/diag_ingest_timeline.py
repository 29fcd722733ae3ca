"""Where the wall time of a parallel ingest goes: pool start, groups per worker, the tail.

Runs the scaling ingest (same synthetic days as bench_ingest.py) with N workers, a cold
run first (the pool's server starts; reported apart) and then warm ones (--tail-rounds
settings taking turns), and reports per run: seconds until the first group starts, until
the last group ends, after it, the workers' busy fraction between the first start and the
last end, the groups' build seconds (median, spread, and their correlation with the
groups' input bytes) and the workers' idle seconds at the end.

Run:  python bench/diag_ingest_timeline.py --workers 8 --days 48 --day-records 2000000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import cast

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import _timeline
import numpy as np
from _common import write_result
from bench_ingest import ingest_summary, many_days

from fxstore.ingest.run import dispatch as _dispatch
from fxstore.ingest.run import pipeline


def timeline(days: list[Path], store: Path, workers: int, folder: Path) -> dict[str, object]:
    """One ingest; its groups' records are the files in `folder` written after it began
    (the pool's server, and so the workers, keep the folder they were started with)."""
    start = time.time()
    summary = ingest_summary(days, store, workers)
    end = time.time()
    groups = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    groups = [g for g in groups if g["start"] >= start]
    first = min(g["start"] for g in groups)
    last = max(g["end"] for g in groups)
    per_pid: dict[int, float] = {}
    for g in groups:
        per_pid[g["pid"]] = per_pid.get(g["pid"], 0.0) + g["end"] - g["start"]
    build = np.array([g["end"] - g["start"] for g in groups])
    size = np.array([g["bytes"] for g in groups], dtype=float)
    last_end = {pid: max(g["end"] for g in groups if g["pid"] == pid) for pid in per_pid}
    return {
        "wall_s": end - start,
        "to_first_group_s": first - start,
        "groups_span_s": last - first,
        "after_last_group_s": end - last,
        "busy_in_span": float(sum(per_pid.values()) / (workers * (last - first))),
        "processes": len(per_pid),
        "group_s": {"median": float(np.median(build)), "min": build.min(), "max": build.max()},
        # Do big groups take long (what largest-first dispatch of the last rounds relies on)?
        "corr_seconds_bytes": float(np.corrcoef(build, size)[0, 1]) if len(groups) > 2 else None,
        # Worker seconds idle at the end: each worker from its last group's end to the run's.
        "tail_idle_worker_s": float(sum(last - t for t in last_end.values())),
        "elapsed_s_reported": summary.elapsed_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--days", type=int, default=48)
    parser.add_argument("--day-records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--tail-rounds",
        default=str(_dispatch.TAIL_ROUNDS),
        help="rounds sent largest first, comma-separated values take turns in each repeat "
        "(0: all groups in trading-day order)",
    )
    args = parser.parse_args()
    tails = [int(t) for t in args.tail_rounds.split(",")]
    pipeline.build_group = _timeline.timed_build_group  # type: ignore[attr-defined]
    runs: dict[int, list[dict[str, object]]] = {t: [] for t in tails}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        days = many_days(tmp, args.days, args.day_records)
        folder = tmp / "timeline"
        folder.mkdir()
        os.environ["FXSTORE_TIMELINE_DIR"] = str(folder)
        cold = timeline(days, tmp / "cold", args.workers, folder)  # starts the pool's server
        print(json.dumps({"cold": cold}, default=float))
        for r in range(args.repeat):
            for tail in tails:
                _dispatch.TAIL_ROUNDS = tail  # type: ignore[misc]  # read at each dispatch
                run = timeline(days, tmp / f"s{r}_{tail}", args.workers, folder)
                print(json.dumps({"run": r, "tail_rounds": tail, **run}, default=float))
                runs[tail].append(run)
    payload: dict[str, object] = {
        "workers": args.workers,
        "days": args.days,
        "day_records": args.day_records,
        "cold_run": cold,
        "runs": runs[tails[0]] if len(tails) == 1 else {str(t): v for t, v in runs.items()},
    }
    if len(tails) > 1:  # paired: each repeat's wall time over the first setting's
        walls = {t: np.array([cast(float, run["wall_s"]) for run in v]) for t, v in runs.items()}
        payload["median_wall_s"] = {str(t): float(np.median(w)) for t, w in walls.items()}
        payload["paired_wall_vs_first"] = {
            str(t): float(np.median(w / walls[tails[0]])) for t, w in walls.items()
        }
    out = write_result(os.environ.get("FXSTORE_BENCH_NAME", "ingest_timeline"), payload)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
