"""Decode + front-month filter throughput on one synthetic trading day (issue: foundation).

Measures, in one run and on one core, for the same DBN MBP-10 file of >= 5 M records:
  (a) `zstd -d -c FILE > /dev/null`: the decompression limit;
  (b) fxstore: open_dbn → iter_selected(front-month) over every record, in records/s;
  (c) databento: `DBNStore.from_file(FILE).to_df()`, what users write by hand.
Reports medians and the ratios (b)/(a) (target >= 0.70) and (b) vs (c) (target >= 10x), and
the peak RSS of (b) for a file and for one twice its size (target: independent of size).

Run:  python bench/bench_decode.py [--records 5000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from _common import median_seconds, run_shell_seconds, write_result

from fxstore.config import InstrumentSelection, SynthConfig
from fxstore.ingest.dbn.reader import open_dbn
from fxstore.ingest.select.front_month import (
    FrontMonthSelector,
    iter_selected,
    symbols_listed,
)
from fxstore.synth import generate_market

DAY = dt.date(2024, 3, 5)  # a week before the March 2024 roll: the front month dominates


def make_day(folder: Path, records: int, seed: int = 11) -> Path:
    """Generate one synthetic trading day of `records` records; return its file."""
    config = SynthConfig(start=DAY, end=DAY, events_per_day=records, seed=seed)
    summary = generate_market(config, folder)
    (path,) = summary.files
    return Path(path)


def fxstore_front_month(path: Path) -> int:
    """Decode every record and keep the front month's; return the number kept."""
    source = open_dbn([path])
    selector = FrontMonthSelector("ES")
    kept = 0
    for _day, records in iter_selected(
        (c.records for c in source.iter_chunks()),
        InstrumentSelection("front-month"),
        symbols_on=lambda d: symbols_listed(source.symbology, d),
        selector=selector,
    ):
        kept += len(records)
    return kept


def databento_to_df(path: Path) -> int:
    import databento

    return len(databento.DBNStore.from_file(path).to_df())


def peak_rss_mb(path: Path) -> float:
    """Peak RSS (MiB) of a fresh process decoding `path` with the front-month filter."""
    code = (
        "import sys; sys.path.insert(0, 'bench');"
        "from bench_decode import fxstore_front_month; from pathlib import Path;"
        f"fxstore_front_month(Path({str(path)!r}));"
        "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])"
    )
    # VmHWM, not ru_maxrss: ru_maxrss survives exec and would count this parent's memory.
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(out.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = make_day(Path(tmp) / "one", args.records)
        double = make_day(Path(tmp) / "two", 2 * args.records)
        n_records = sum(len(c.records) for c in open_dbn([path]).iter_chunks())
        fxstore_front_month(path)  # JIT warm-up
        zstd_s, zstd_all = median_seconds(
            lambda: run_shell_seconds(f"zstd -q -d -c {path} > /dev/null"), args.repeat
        )
        fx_s, fx_all = median_seconds(lambda: fxstore_front_month(path), args.repeat)
        db_s, db_all = median_seconds(lambda: databento_to_df(path), max(1, args.repeat - 1))
        rss_one, rss_two = peak_rss_mb(path), peak_rss_mb(double)
        result = {
            "file_records": n_records,
            "file_bytes": path.stat().st_size,
            "decompressed_bytes": n_records * 368,
            "front_month_kept": fxstore_front_month(path),
            "zstd_d_s": {"median": zstd_s, "all": zstd_all},
            "fxstore_decode_front_month_s": {"median": fx_s, "all": fx_all},
            "databento_to_df_s": {"median": db_s, "all": db_all},
            "records_per_s": {
                "zstd_d": n_records / zstd_s,
                "fxstore": n_records / fx_s,
                "databento_to_df": n_records / db_s,
            },
            "ratio_fxstore_vs_zstd_d": zstd_s / fx_s,
            "ratio_fxstore_vs_to_df": db_s / fx_s,
            "targets": {"vs_zstd_d": 0.70, "vs_to_df": 10.0},
            "peak_rss_mib": {"file": rss_one, "file_twice_as_large": rss_two},
            "max_rss_this_process_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    out = write_result("decode", result)
    print(
        f"{n_records:,} records: zstd -d {n_records / zstd_s / 1e6:.1f} M/s, "
        f"fxstore {n_records / fx_s / 1e6:.1f} M/s ({zstd_s / fx_s:.0%} of zstd -d), "
        f"to_df {n_records / db_s / 1e6:.2f} M/s ({db_s / fx_s:.0f}x slower); "
        f"peak RSS {rss_one:.0f} / {rss_two:.0f} MiB (1x / 2x file) -> {out}"
    )


if __name__ == "__main__":
    main()
