"""Ingest into an S3 store (a moto server on 127.0.0.1) against the same ingest into a local store.

In one run, paired (local then S3 in each repeat), for D synthetic days of R events:
  local:     `ingest` of the local DBN folder into a fresh local store;
  s3:        the same ingest with `--store s3://...` (fresh bucket and cache folder): the time
             of the pull, the build on the mirror and the push (uploads + conditional commit);
  s3_inputs: the same with the DBN files read from the bucket too (downloaded into the cache);
  pull:      a fresh mirror of the finished store (downloads + SHA-256 checks), in MB/s.
moto keeps objects in memory in this process's server thread: the numbers are fxstore's
overhead per object and per byte over HTTP on loopback, not the bandwidth of real S3 (AWS
documents 3,500 PUT and 5,500 GET requests per second per prefix; bytes per second depend on
the instance's network and the number of connections, one here).

Run:  python bench/bench_s3.py [--days 16] [--events 200000] [--workers 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
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

from fxstore.config import BarConfig, IngestConfig, SynthConfig
from fxstore.ingest.run.pipeline import ingest
from fxstore.remote import fetch_inputs, open_store
from fxstore.synth import generate_market


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def s3_ingest(
    config: IngestConfig, folder: Path, endpoint: str, tmp: Path, from_bucket: bool
) -> tuple[dict[str, float], Path]:
    """Time one ingest into a fresh bucket (inputs from it too with `from_bucket`); the
    times and the root of a fresh mirror of the finished store."""
    import boto3
    from boto3.s3.transfer import TransferConfig

    client = boto3.client("s3", endpoint_url=endpoint)
    bucket = f"bench-{secrets.token_hex(4)}"
    client.create_bucket(Bucket=bucket)
    cache = tmp / f"cache-{bucket}"
    inputs = [folder]
    if from_bucket:  # setup, not timed: one PUT a file (moto takes it 2x faster than multipart)
        one_put = TransferConfig(multipart_threshold=5 * 2**30)
        for path in sorted(folder.iterdir()):
            client.upload_file(str(path), bucket, f"raw/{path.name}", Config=one_put)
    started = time.perf_counter()
    if from_bucket:
        inputs = fetch_inputs([f"s3://{bucket}/raw"], endpoint=endpoint, cache_dir=cache)
    fetched = time.perf_counter()
    store = open_store(f"s3://{bucket}/store", endpoint=endpoint, cache_dir=cache)
    root = store.__enter__()
    pulled = time.perf_counter()
    ingest(config, inputs, root)
    built = time.perf_counter()
    store.__exit__(None, None, None)
    pushed = time.perf_counter()
    fresh = open_store(f"s3://{bucket}/store", endpoint=endpoint, cache_dir=tmp / f"r-{bucket}")
    mirror = fresh.__enter__()
    mirrored = time.perf_counter()
    fresh.__exit__(None, None, None)
    timed = {
        "fetch_inputs_s": fetched - started,
        "pull_s": pulled - fetched,
        "build_s": built - pulled,
        "push_s": pushed - built,
        "total_s": pushed - started,
        "fresh_pull_s": mirrored - pushed,
        "store_bytes": float(_tree_bytes(mirror)),
    }
    return timed, mirror


def main() -> None:
    """Run the bench and write bench/results/s3_ingest.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=16)
    parser.add_argument("--events", type=int, default=200_000, help="events per day")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(), workers=args.workers)
    with local_s3() as endpoint, tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        first = dt.date(2024, 3, 4)
        end = first + dt.timedelta(days=args.days * 7 // 5 + 2)
        market = SynthConfig(start=first, end=end, events_per_day=args.events, seed=11)
        folder = tmp / "dbn"
        files = generate_market(market, folder).files
        rows: dict[str, list[dict[str, float]]] = {"local": [], "s3": [], "s3_inputs": []}
        for i in range(args.repeat):
            started = time.perf_counter()
            ingest(config, [folder], tmp / f"local{i}")
            rows["local"].append({"total_s": time.perf_counter() - started})
            rows["s3"].append(s3_ingest(config, folder, endpoint, tmp, from_bucket=False)[0])
            rows["s3_inputs"].append(s3_ingest(config, folder, endpoint, tmp, from_bucket=True)[0])
    medians = {
        kind: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for kind, runs in rows.items()
    }
    local_s = medians["local"]["total_s"]
    store_mb = medians["s3"]["store_bytes"] / 1e6
    summary = {
        "s3_over_local": medians["s3"]["total_s"] / local_s,
        "s3_inputs_over_local": medians["s3_inputs"]["total_s"] / local_s,
        "push_mb_per_s": store_mb / medians["s3"]["push_s"],
        "fresh_pull_mb_per_s": store_mb / medians["s3"]["fresh_pull_s"],
    }
    path = write_result(
        "s3_ingest",
        {
            "days": len(files),
            "events_per_day": args.events,
            "workers": args.workers,
            "repeat": args.repeat,
            "runs": rows,
            "medians": medians,
            "summary": summary,
        },
    )
    print(f"wrote {path}: {summary}")


if __name__ == "__main__":
    main()
