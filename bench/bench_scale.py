"""Scale-out: ingest on the local pool vs a one-node Ray cluster, paired.

In one run, on the same >= 48 synthetic trading days of `--day-records` MBP-10 records:
for each repeat and each worker count N (default 8 and 16), `ingest` with the local pool
of N processes, then with `--executor ray` and N tasks at once on a Ray instance of this
machine (started once, with as many CPUs as the largest N), back to back, so both see the
same minutes of the host. Reports records/s of each, the Ray/local time ratio (target:
Ray within 10% of the pool, i.e. ratio <= 1.10) and Ray's overhead per task (a group of
files) and per trading day: (Ray seconds - pool seconds) / tasks, / days. Every Ray run's
day files are checked byte-identical to the pool's. The Ray instance's start-up is timed
on its own (it is paid once per `fxstore ingest --executor ray` without --ray-address).

`--parts s3`: on the same days, paired in each repeat, the local pool's ingest into a local
store against the same ingest with `--store s3://...` on a moto server on 127.0.0.1
(bench/bench_s3.py's measurement: pull, build on the mirror, push with the conditional
commit), with the inputs local and with them read from the bucket too. moto holds objects in
memory in this process: this is fxstore's overhead per object and byte over loopback HTTP,
not real S3's bandwidth.

FXSTORE_BENCH_SPLIT=utc-day makes the days Databento-style UTC-day files (one task per
week, or per day when split); FXSTORE_BENCH_DATA keeps the generated days across runs;
FXSTORE_BENCH_NAME names the result file (default scale_h200host).

Run:  python bench/bench_scale.py --days 48 --day-records 2000000 --workers 8,16 --repeat 3
      FXSTORE_BENCH_NAME=scale_s3_h200host python bench/bench_scale.py --parts s3 --workers 16

Ray must be importable by this Python and by the Ray workers it starts (they inherit
PYTHONPATH). On a host that cannot reach a registry, bring its wheel (ray 2.60.0 for
CPython 3.12 is 79 MB) and those of its needs that are missing there (click, filelock,
jsonschema, msgpack, packaging, protobuf, pyyaml, requests).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from _common import write_result
from bench_ingest import CONFIG, many_days

from fxstore.config.executor import ExecutorConfig
from fxstore.ingest import IngestSummary


def _digests(out_dir: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out_dir.glob("*.parquet")}


def _ingest(paths: list[Path], store: Path, workers: int, ray: bool) -> tuple[float, IngestSummary]:
    from fxstore.ingest.run.pipeline import ingest

    config = dataclasses.replace(
        CONFIG, workers=workers, executor=ExecutorConfig("ray" if ray else "local")
    )
    shutil.rmtree(store, ignore_errors=True)
    start = time.perf_counter()
    summary = ingest(config, paths, store)
    return time.perf_counter() - start, summary


def _n_tasks(paths: list[Path]) -> int:
    """Groups of files the pipeline builds as tasks (before any split by trading day)."""
    from fxstore.ingest import open_dbn
    from fxstore.ingest.run.pipeline import plan_groups

    return len(plan_groups(open_dbn(paths).files))


def paired(paths: list[Path], tmp: Path, workers: list[int], repeat: int) -> dict[str, object]:
    import ray

    started = time.perf_counter()
    ray.init(num_cpus=max(workers), include_dashboard=False, log_to_driver=False)
    ray_start_s = time.perf_counter() - started
    n_tasks = _n_tasks(paths)
    rows: list[dict[str, object]] = []
    try:
        _ingest(paths[: max(workers)], tmp / "warm", max(workers), True)  # workers spawned
        _ingest(paths[: max(workers)], tmp / "warm", max(workers), False)  # forkserver up
        for n in workers:
            local_s, ray_s = [], []
            for _ in range(repeat):
                seconds, pool = _ingest(paths, tmp / "local", n, False)
                local_s.append(seconds)
                seconds, on_ray = _ingest(paths, tmp / "ray", n, True)
                ray_s.append(seconds)
                if _digests(on_ray.out_dir) != _digests(pool.out_dir):
                    raise SystemExit(f"workers={n}: Ray's day files differ from the pool's")
            lo, ra = sorted(local_s)[repeat // 2], sorted(ray_s)[repeat // 2]
            n_days = pool.days_written
            rows.append(
                {
                    "workers": n,
                    "local_s": local_s,
                    "ray_s": ray_s,
                    "local_records_per_s": pool.n_records / lo,
                    "ray_records_per_s": pool.n_records / ra,
                    "ray_over_local": ra / lo,
                    "within_10pct": ra / lo <= 1.10,
                    "ray_overhead_per_task_ms": 1e3 * (ra - lo) / n_tasks,
                    "ray_overhead_per_day_ms": 1e3 * (ra - lo) / max(1, n_days),
                    "n_days": n_days,
                    "n_records": pool.n_records,
                }
            )
            print(rows[-1], file=sys.stderr)
    finally:
        ray.shutdown()
    return {"ray_start_s": ray_start_s, "n_tasks": n_tasks, "rows": rows}


def s3_vs_local(paths: list[Path], tmp: Path, workers: int, repeat: int) -> dict[str, object]:
    """Local pool ingest into a local store vs into an S3 store on moto, paired per repeat."""
    import statistics

    import boto3
    from _common import local_s3
    from bench_s3 import s3_ingest

    config = dataclasses.replace(CONFIG, workers=workers)
    folder = paths[0].parent
    input_bytes = sum(p.stat().st_size for p in paths)
    rows: dict[str, list[dict[str, float]]] = {"local": [], "s3": [], "s3_inputs": []}
    with local_s3() as endpoint:
        # Paid once per process, not per ingest: the pool's forkserver and numba's cache load
        # (as in `paired`), moto's S3 backend and botocore's service model (first request).
        _ingest(paths[:workers], tmp / "warm", workers, False)
        boto3.client("s3", endpoint_url=endpoint).list_buckets()
        for i in range(repeat):
            seconds, summary = _ingest(paths, tmp / "s3local", workers, False)
            rows["local"].append({"total_s": seconds})
            rows["s3"].append(s3_ingest(config, folder, endpoint, tmp / f"s3_{i}", False)[0])
            rows["s3_inputs"].append(s3_ingest(config, folder, endpoint, tmp / f"s3i_{i}", True)[0])
            print({k: v[-1] for k, v in rows.items()}, file=sys.stderr)
    medians = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in rows.items()}
    local_s = medians["local"]["total_s"]
    store_mb = medians["s3"]["store_bytes"] / 1e6
    return {
        "workers": workers,
        "n_records": summary.n_records,
        "input_bytes": input_bytes,
        "input_bytes_per_record": input_bytes / summary.n_records,
        "runs": rows,
        "medians": medians,
        "local_records_per_s": summary.n_records / local_s,
        "s3_records_per_s": summary.n_records / medians["s3"]["total_s"],
        "s3_inputs_records_per_s": summary.n_records / medians["s3_inputs"]["total_s"],
        "s3_over_local": medians["s3"]["total_s"] / local_s,
        "s3_inputs_over_local": medians["s3_inputs"]["total_s"] / local_s,
        "fetch_inputs_mb_per_s": input_bytes / 1e6 / medians["s3_inputs"]["fetch_inputs_s"],
        "push_mb_per_s": store_mb / medians["s3"]["push_s"],
        "fresh_pull_mb_per_s": store_mb / medians["s3"]["fresh_pull_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=48)
    parser.add_argument("--day-records", type=int, default=2_000_000)
    parser.add_argument("--workers", default="8,16")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", default="ray,s3")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    workers = [int(w) for w in args.workers.split(",")]
    result: dict[str, object] = {"days": args.days, "day_records": args.day_records}
    with tempfile.TemporaryDirectory(prefix="fxstore_scale_") as name:
        tmp = Path(name)
        paths = many_days(tmp, args.days, args.day_records)
        if "ray" in parts:
            result["ray_vs_local"] = paired(paths, tmp, workers, args.repeat)
        if "s3" in parts:
            result["s3_vs_local"] = s3_vs_local(paths, tmp, max(workers), args.repeat)
    print(write_result(os.environ.get("FXSTORE_BENCH_NAME", "scale_h200host"), result))


if __name__ == "__main__":
    main()
