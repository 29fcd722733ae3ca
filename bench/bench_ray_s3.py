"""Ingest on a two-node local Ray cluster, reading from and writing to S3, against the local pool.

In one run, paired (local then Ray in each repeat), for D synthetic days of R events:
  local:     `ingest` of the local DBN folder into a fresh local store with the process pool
             of `--workers` processes;
  ray_s3:    the same ingest on a Ray cluster of two nodes (two raylets on this machine,
             `--workers` CPUs between them, `ray.cluster_utils.Cluster`), its DBN files read
             from a bucket and its store in the bucket (a moto server on 127.0.0.1): the
             inputs' download, the pull, the build and the push (uploads and the conditional
             commit), timed apart.
Each repeat checks that the two runs wrote the same day files, byte for byte. The Ray tasks
still read the driver's local copies (the nodes share this machine's disk): the bench says
what the cluster and S3 add to an ingest, not how a cluster without a shared folder scales.

Run:  python bench/bench_ray_s3.py [--days 6] [--events 100000] [--workers 2] [--repeat 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import local_s3, write_result
from bench_s3 import s3_ingest

from fxstore.config import BarConfig, IngestConfig, SynthConfig
from fxstore.config.executor import ExecutorConfig
from fxstore.ingest.run.pipeline import ingest
from fxstore.synth import generate_market


def _digests(root: Path) -> dict[str, str]:
    """SHA-256 of every day file under a store (or a mirror) root, by name."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.glob("bars/*/*/*/v*/*.parquet"))
    }


def main() -> None:
    """Run the bench and write bench/results/ray_s3_ingest.json."""
    import ray
    from ray.cluster_utils import Cluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=6)
    parser.add_argument("--events", type=int, default=100_000, help="events per day")
    parser.add_argument("--workers", type=int, default=2, help="processes, or Ray CPUs")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    per_node = max(1, args.workers // 2)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": per_node, "object_store_memory": 80 << 20},
    )
    cluster.add_node(num_cpus=max(1, args.workers - per_node), object_store_memory=80 << 20)
    cluster.wait_for_nodes()
    local = IngestConfig(symbol="ES.FUT", bars=BarConfig(), workers=args.workers)
    on_ray = dataclasses.replace(local, workers=0, executor=ExecutorConfig("ray", cluster.address))
    rows: dict[str, list[dict[str, float]]] = {"local": [], "ray_s3": []}
    try:
        with local_s3() as endpoint, tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            first = dt.date(2024, 3, 4)
            end = first + dt.timedelta(days=args.days * 7 // 5 + 2)
            market = SynthConfig(start=first, end=end, events_per_day=args.events, seed=11)
            folder = tmp / "dbn"
            files = generate_market(market, folder).files
            for i in range(args.repeat):
                started = time.perf_counter()
                ingest(local, [folder], tmp / f"local{i}")
                rows["local"].append({"total_s": time.perf_counter() - started})
                timed, mirror = s3_ingest(on_ray, folder, endpoint, tmp, from_bucket=True)
                rows["ray_s3"].append(timed)
                if _digests(mirror) != _digests(tmp / f"local{i}"):
                    raise SystemExit("the Ray run on S3 wrote other day files than the local pool")
    finally:
        ray.shutdown()
        cluster.shutdown()
    medians = {
        kind: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for kind, runs in rows.items()
    }
    summary = {
        "ray_s3_over_local": medians["ray_s3"]["total_s"] / medians["local"]["total_s"],
        "ray_s3_build_over_local": medians["ray_s3"]["build_s"] / medians["local"]["total_s"],
        "same_day_files": True,
    }
    path = write_result(
        "ray_s3_ingest",
        {
            "days": len(files),
            "events_per_day": args.events,
            "workers": args.workers,
            "ray_nodes": 2,
            "repeat": args.repeat,
            "runs": rows,
            "medians": medians,
            "summary": summary,
        },
    )
    print(f"wrote {path}: {summary}")


if __name__ == "__main__":
    main()
