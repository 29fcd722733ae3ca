"""Synthetic market generation speed: one trading day of >= 5 M MBP-10 records (issue: foundation).

Times `generate_market` for one trading day (records built by numba kernels into numpy
structured arrays, zstd level 3, fsync, atomic rename) and reports records/s, the file
size and the compression ratio. Target: one 5 M-record day "in well under a minute".

Run:  python bench/bench_synth.py [--records 5000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
from pathlib import Path

from _common import median_seconds, write_result

from fxstore.config import SynthConfig
from fxstore.synth import generate_market

DAY = dt.date(2024, 3, 5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = SynthConfig(start=DAY, end=DAY, events_per_day=args.records, seed=11)
    with tempfile.TemporaryDirectory() as tmp:
        generate_market(SynthConfig(start=DAY, end=DAY, events_per_day=2_000), Path(tmp) / "w")
        seconds, runs = median_seconds(lambda: generate_market(config, Path(tmp)), args.repeat)
        (path,) = Path(tmp).glob("*.mbp-10.dbn.zst")
        size = path.stat().st_size
    result = {
        "records": args.records,
        "seconds": {"median": seconds, "all": runs},
        "records_per_s": args.records / seconds,
        "file_bytes": size,
        "compression_ratio": args.records * 368 / size,
        "target_seconds": 60,
    }
    out = write_result("synth", result)
    print(
        f"{args.records:,} records in {seconds:.1f} s ({args.records / seconds / 1e6:.2f} M/s), "
        f"{size / 1e6:.0f} MB -> {out}"
    )


if __name__ == "__main__":
    main()
