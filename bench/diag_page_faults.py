"""The expression kernel inside ``precompute``: its time and page faults with the feature
columns in 4 KiB pages (fxstore's choice, ``MADV_NOHUGEPAGE``) and in transparent huge pages.

Runs ``precompute`` of bench_feature_algebra's 100-feature set over a 1.5 M-bar store
twice per mode, in a fresh process per mode, on one pinned core, and records for each run
the CPU time of ``run_program`` (the kernel that writes the columns) and the minor page
faults it took, then ``compute_features`` alone on the same bars (its columns from
memory the pool hands back: no faults). Linux only (madvise, getrusage's fault counts).

Run:  python bench/diag_page_faults.py [--bars 1512000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from _common import write_result

_CHILD = """
import json, os, resource, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, {bench!r})
os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})
from bench_feature_algebra import bench_featureset, fxstore_features
from bench_precompute import ROLL_DAYS, TRADING_DAYS, write_bar_store
from fxstore.config import FeatureConfig
from fxstore.features import compute, program
from fxstore.features import algebra_kernels as kernels
from fxstore.features.inputs import REQUIRED_COLUMNS
from fxstore.features.precompute import precompute
from fxstore.features.synthetic import synthetic_bars

if {huge!r}:
    compute._small_pages = lambda address, size: None  # leave the pages as the system gives
runs = []
real = kernels.run_program

def timed(*args):
    before, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
    real(*args)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    runs[-1].update(kernel_cpu_s=time.process_time() - start, minor_faults=faults)

program.algebra_kernels = type("Kernels", (), {{"run_program": staticmethod(timed)}})
bars = synthetic_bars({bars}, n_days=TRADING_DAYS, roll_days=ROLL_DAYS, seed=11)
bars = bars.select(list(REQUIRED_COLUMNS)).combine_chunks()
featureset = bench_featureset()
with tempfile.TemporaryDirectory() as tmp:
    write_bar_store(bars, Path(tmp), "bench-bars")
    config = FeatureConfig(features=featureset, force=True)
    for _ in range(2):
        runs.append({{"what": "precompute"}})
        start = time.process_time()
        precompute(config, Path(tmp))
        runs[-1]["precompute_cpu_s"] = time.process_time() - start
for _ in range(2):
    runs.append({{"what": "compute_features"}})
    fxstore_features(bars, featureset)
print(json.dumps(runs))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=1_512_000)
    args = parser.parse_args()
    if sys.platform != "linux":
        raise SystemExit("Error: this diagnosis needs Linux (madvise and fault counts).")
    thp = Path("/sys/kernel/mm/transparent_hugepage")
    modes = {}
    for mode, huge in (("small_pages", False), ("huge_pages", True)):
        code = _CHILD.format(bench=str(Path(__file__).parent), huge=huge, bars=args.bars)
        done = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        )
        modes[mode] = json.loads(done.stdout.splitlines()[-1])
        for run in modes[mode]:
            print(f"{mode}: {run}")
    result = {
        "bars": args.bars,
        "transparent_hugepage": {
            name: (thp / name).read_text().strip() if (thp / name).exists() else None
            for name in ("enabled", "defrag")
        },
        "load_average_1_5_15min": list(os.getloadavg()),
        "runs": modes,
        "note": "small_pages: the columns advised MADV_NOHUGEPAGE (fxstore); huge_pages: the "
        "advice left out. kernel_cpu_s: run_program's CPU time; minor_faults: its page faults.",
    }
    print(f"-> {write_result('page_faults_precompute', result)}")


if __name__ == "__main__":
    main()
