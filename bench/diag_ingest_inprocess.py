"""Why one-core ingest in a long-lived process differs from a fresh one (a diagnostic).

The same one-core ingest of D synthetic days, timed: in this process with its default CPU
set, pinned to single CPUs, and in a fresh spawned process; median of --repeat runs each.

Run:  python bench/diag_ingest_inprocess.py --days 8 --day-records 2000000
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np
from _common import write_result
from bench_ingest import _ingest_slice, ingest_once, many_days


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--day-records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpus", default="0,1,8,15")
    args = parser.parse_args()
    result: dict[str, object] = {"days": args.days, "day_records": args.day_records}
    default = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        days = many_days(tmp, args.days, args.day_records)
        ingest_once(days[:1], tmp / "warm")

        def timed(label: str) -> None:
            runs = []
            for r in range(args.repeat):
                start = time.perf_counter()
                ingest_once(days, tmp / f"{label}{r}")
                runs.append(time.perf_counter() - start)
            result[label] = {"median": float(np.median(runs)), "all": runs}
            print(label, f"{np.median(runs):.2f}", [round(x, 2) for x in runs], flush=True)

        timed("this_process")
        for cpu in [int(c) for c in args.cpus.split(",") if int(c) in default]:
            os.sched_setaffinity(0, {cpu})
            timed(f"this_process_cpu{cpu}")
        os.sched_setaffinity(0, default)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            pool.map(_ingest_slice, [(days[:1], tmp / "fresh_warm")])
            runs = [pool.map(_ingest_slice, [(days, tmp / f"fresh{r}")])[0] for r in range(3)]
        result["fresh_process"] = {"median": float(np.median(runs)), "all": runs}
        print("fresh_process", f"{np.median(runs):.2f}", [round(x, 2) for x in runs])
    out = write_result(os.environ.get("FXSTORE_BENCH_NAME", "ingest_inprocess"), result)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
