"""Synthetic market generation speed: a range of trading days, by number of worker processes.

Times `generate_market` (records built by numba kernels, zstd level 3, fsync, atomic
rename; one file per trading day unless --split utc-day) over --start..--end with each
--workers count in the same run, every run into a fresh folder (a folder already holding
the market would be left as it is), and checks that every count wrote the same bytes.
Before the timed runs, a tiny market is generated with each count: the kernels are compiled
(or loaded from numba's cache) and the pool's server is started, as they are once per
command. The machine's load average is recorded: other processes take cores from the
workers. Target: a year of 200 k records a day in 30 s on a 16-core host.

Run:  python bench/bench_synth.py [--start 2024-01-02 --end 2024-12-31]
          [--events-per-day 200000] [--workers 1,16] [--repeat 3] [--split trading-day]
          [--name synth_year]
One 5 M-record day on one core (the first result, synth.json):
      python bench/bench_synth.py --start 2024-03-05 --end 2024-03-05 \\
          --events-per-day 5000000 --workers 1 --name synth
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import write_result

from fxstore.config import SynthConfig
from fxstore.market.calendar import trading_days_between
from fxstore.synth import generate_market

TARGET_SECONDS = 30


def _digest(folder: Path) -> str:
    """One hash over the names and bytes of the DBN and signal files in `folder`."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("glbx-mdp3-*")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _time_runs(
    config: SynthConfig, workers: int, repeat: int, scratch: Path
) -> tuple[list[float], str, int, int]:
    """Wall times of `repeat` runs, the output's digest, its records and its DBN bytes."""
    times, digests = [], set()
    records = size = 0
    for k in range(repeat):
        folder = scratch / f"w{workers}-{k}"
        start = time.perf_counter()
        summary = generate_market(config, folder, workers=workers)
        times.append(time.perf_counter() - start)
        digests.add(_digest(folder))
        records, size = summary.n_records, sum(p.stat().st_size for p in summary.files)
        shutil.rmtree(folder)
    if len(digests) != 1:
        raise SystemExit(f"--workers {workers}: runs wrote different bytes")
    return times, digests.pop(), records, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", type=dt.date.fromisoformat, default=dt.date(2024, 1, 2))
    parser.add_argument("--end", type=dt.date.fromisoformat, default=dt.date(2024, 12, 31))
    parser.add_argument("--events-per-day", type=int, default=200_000)
    parser.add_argument("--workers", default=f"1,{os.cpu_count() or 1}")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--split", choices=["trading-day", "utc-day"], default="trading-day")
    parser.add_argument("--name", default="synth_year", help="results/<name>.json")
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (a temp one)")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    config = SynthConfig(
        start=args.start,
        end=args.end,
        events_per_day=args.events_per_day,
        seed=11,
        split=args.split,
    )
    load_before = os.getloadavg()[0]
    times: dict[int, list[float]] = {}
    digests = set()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        scratch = Path(tmp)
        warm = SynthConfig(start=dt.date(2024, 3, 4), end=dt.date(2024, 3, 8), events_per_day=2_000)
        for workers in counts:
            generate_market(warm, scratch / f"warm{workers}", workers=workers)
        for workers in counts:
            times[workers], digest, records, size = _time_runs(
                config, workers, args.repeat, scratch
            )
            digests.add(digest)
            median = statistics.median(times[workers])
            print(f"--workers {workers}: {median:.1f} s ({records / median / 1e6:.2f} M records/s)")
    if len(digests) != 1:
        raise SystemExit("different worker counts wrote different bytes")
    base = statistics.median(times[counts[0]])
    # other processes on the machine: with a load above its cores, workers cannot scale
    load = {"before": load_before, "after": os.getloadavg()[0]}
    result = {
        "start": args.start.isoformat(),
        "end": args.end.isoformat(),
        "trading_days": len(trading_days_between(config.start, config.end)),
        "events_per_day": args.events_per_day,
        "split": args.split,
        "load_average_1min": load,
        "records": records,
        "dbn_bytes": size,
        "compression_ratio": records * 368 / size,
        "same_bytes_for_every_worker_count": True,
        "sha256": digests.pop(),
        "workers": {
            str(w): {
                "seconds": {"median": statistics.median(t), "all": t},
                "records_per_s": records / statistics.median(t),
                "speedup": base / statistics.median(t),
            }
            for w, t in times.items()
        },
        "target_seconds": TARGET_SECONDS,
    }
    print(f"-> {write_result(args.name, result)}")


if __name__ == "__main__":
    main()
