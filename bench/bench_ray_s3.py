"""Ingest on a two-node local Ray cluster, reading from and writing to S3, against the local pool.

In one run, paired (local, then the two Ray runs, in each repeat), for D synthetic days of
R events:
  local:       `ingest` of the local DBN folder into a fresh local store with the process pool
               of `--workers` processes;
  ray_s3:      the same ingest on a Ray cluster of two nodes (two raylets on this machine,
               `--workers` CPUs between them, `ray.cluster_utils.Cluster`), its DBN files in a
               bucket and its store in the bucket (a moto server on 127.0.0.1), as on nodes
               that share no folder: the driver lists the objects and reads their headers
               (ranged GETs), each task downloads its own inputs into its node's scratch and
               uploads its day files into the store's bucket, the driver copies each chosen
               day file into place inside S3 and commits the manifest; the pull, the build
               and the push (the manifest's commit) timed apart;
  ray_fetched: the same with the inputs downloaded by the driver first (as without Ray) and
               read by the tasks from its folder (the nodes share this machine's disk).
Each repeat checks that the three runs wrote the same day files, byte for byte, and that the
driver's cache folder of the ray_s3 run holds no input and no day file.

Run:  python bench/bench_ray_s3.py [--days 6] [--events 100000] [--workers 2] [--repeat 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import os
import secrets
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
from fxstore.remote import list_input_objects, open_store
from fxstore.synth import generate_market


def _digests(root: Path) -> dict[str, str]:
    """SHA-256 of every day file under a store (or a mirror) root, by name."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.glob("bars/*/*/*/v*/*.parquet"))
    }


def objects_ingest(
    config: IngestConfig, folder: Path, endpoint: str, tmp: Path
) -> tuple[dict[str, float], Path]:
    """Time one ingest of DBN objects into an s3:// store of a fresh bucket, the tasks doing
    the S3 I/O; the times and the root of a fresh mirror of the finished store."""
    import boto3
    from boto3.s3.transfer import TransferConfig

    client = boto3.client("s3", endpoint_url=endpoint)
    bucket = f"bench-{secrets.token_hex(4)}"
    client.create_bucket(Bucket=bucket)
    one_put = TransferConfig(multipart_threshold=5 * 2**30)  # setup, not timed
    for path in sorted(folder.iterdir()):
        client.upload_file(str(path), bucket, f"raw/{path.name}", Config=one_put)
    cache = tmp / f"cache-{bucket}"
    started = time.perf_counter()
    inputs = list_input_objects(f"s3://{bucket}/raw", endpoint=endpoint)
    listed = time.perf_counter()
    store = open_store(f"s3://{bucket}/store", endpoint=endpoint, cache_dir=cache)
    root = store.__enter__()
    pulled = time.perf_counter()
    ingest(config, list(inputs), root)
    built = time.perf_counter()
    store.__exit__(None, None, None)
    pushed = time.perf_counter()
    here = [p for p in cache.rglob("*") if p.name.endswith((".parquet", ".dbn", ".dbn.zst"))]
    if here:
        raise SystemExit(f"the driver holds input or day files: {here[:3]}")
    fresh = open_store(f"s3://{bucket}/store", endpoint=endpoint, cache_dir=tmp / f"r-{bucket}")
    mirror = fresh.__enter__()
    fresh.__exit__(None, None, None)
    timed = {
        "list_inputs_s": listed - started,
        "pull_s": pulled - listed,
        "build_s": built - pulled,
        "push_s": pushed - built,
        "total_s": pushed - started,
    }
    return timed, mirror


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
    rows: dict[str, list[dict[str, float]]] = {"local": [], "ray_s3": [], "ray_fetched": []}
    # The server first: the nodes' tasks take the credentials it sets from their environment.
    with local_s3() as endpoint, tempfile.TemporaryDirectory() as name:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": per_node, "object_store_memory": 80 << 20},
        )
        try:
            cluster.add_node(num_cpus=max(1, args.workers - per_node), object_store_memory=80 << 20)
            cluster.wait_for_nodes()
            local = IngestConfig(symbol="ES.FUT", bars=BarConfig(), workers=args.workers)
            address = ExecutorConfig("ray", cluster.address)
            on_ray = dataclasses.replace(local, workers=0, executor=address)
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
                timed, mirror = objects_ingest(on_ray, folder, endpoint, tmp)
                rows["ray_s3"].append(timed)
                fetched, fetched_mirror = s3_ingest(on_ray, folder, endpoint, tmp, True)
                rows["ray_fetched"].append(fetched)
                local_files = _digests(tmp / f"local{i}")
                if not local_files or local_files != _digests(mirror):
                    raise SystemExit("the Ray run on S3 wrote other day files than the local pool")
                if _digests(fetched_mirror) != local_files:
                    raise SystemExit("the Ray run of fetched inputs wrote other day files")
        finally:
            ray.shutdown()
            cluster.shutdown()
    medians = {
        kind: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for kind, runs in rows.items()
    }
    local_s = medians["local"]["total_s"]
    summary = {
        "ray_s3_over_local": medians["ray_s3"]["total_s"] / local_s,
        "ray_s3_build_over_local": medians["ray_s3"]["build_s"] / local_s,
        "ray_fetched_over_local": medians["ray_fetched"]["total_s"] / local_s,
        "same_day_files": True,
        "driver_holds_no_input_or_day_file": True,
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
