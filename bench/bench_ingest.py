"""End-to-end ingest throughput: decode → front-month filter → bars → Parquet (issue: ingest).

In one run, for the same synthetic trading day of >= 5 M MBP-10 records:
  (a) `zstd -d -c FILE > /dev/null`, the decompression limit;
  (b) `fxstore ingest` on one core (workers=1), front-month dollar-imbalance bars;
  (c) by hand: databento `DBNStore.to_df()`, then a per-trade Python loop building the same
      dollar imbalance bars (López de Prado's rule with EWMA expectations).
Then the scaling over days: the same ingest of D days with 1 and N workers.
Targets: (b) >= 0.70 x (a) in records/s; (b) >= 10 x (c); speed-up >= 0.8 x N.

Run:  python bench/bench_ingest.py [--records 5000000] [--days 8] [--day-records 1000000]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import tempfile
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np
from _common import median_seconds, run_shell_seconds, write_result

from fxstore.config import BarConfig, IngestConfig, SynthConfig
from fxstore.synth import generate_market

DAY = dt.date(2024, 3, 5)  # a week before the March 2024 roll: the front month dominates
CONFIG = IngestConfig(symbol="ES.FUT", bars=BarConfig("dollar_imbalance"), workers=1, force=True)


def ingest_once(paths: list[Path], store: Path, workers: int = 1) -> int:
    from fxstore.ingest.pipeline import ingest

    summary = ingest(dataclasses.replace(CONFIG, workers=workers), paths, store)
    return summary.n_records


def by_hand(path: Path) -> int:
    """What a user writes: to_df(), pick the busiest outright, loop over trades in Python."""
    import databento

    df = databento.DBNStore.from_file(path).to_df()
    trades = df[df["action"] == "T"]
    front = trades.groupby("instrument_id")["size"].sum().idxmax()
    trades = trades[trades["instrument_id"] == front]
    bars, theta, n_in_bar, e_t, e_bv = 0, 0.0, 0, 2000.0, None
    alpha_t, alpha_bv = 2 / 21, 2 / 50_001
    for price, size, side in zip(trades["price"], trades["size"], trades["side"], strict=True):
        b = 1.0 if side == "B" else -1.0
        bv = b * price * size * 50.0
        e_bv = bv if e_bv is None else e_bv + alpha_bv * (bv - e_bv)
        theta += bv
        n_in_bar += 1
        if abs(theta) >= e_t * max(abs(e_bv), 1e-9):
            bars += 1
            e_t += alpha_t * (n_in_bar - e_t)
            theta, n_in_bar = 0.0, 0
    return bars


def make_days(folder: Path, start: dt.date, end: dt.date, records: int) -> list[Path]:
    config = SynthConfig(start=start, end=end, events_per_day=records, seed=11)
    return list(generate_market(config, folder).files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--days", type=int, default=8, help="trading days for the scaling run")
    parser.add_argument("--day-records", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (path,) = make_days(tmp / "one", DAY, DAY, args.records)
        ingest_once([path], tmp / "warm")  # JIT warm-up
        zstd_s, zstd_all = median_seconds(
            lambda: run_shell_seconds(f"zstd -q -d -c {path} > /dev/null"), args.repeat
        )
        fx_s, fx_all = median_seconds(lambda: ingest_once([path], tmp / "store"), args.repeat)
        hand_s, hand_all = median_seconds(lambda: by_hand(path), 1)
        end = DAY + dt.timedelta(days=int(args.days * 7 / 5) + 3)
        days = make_days(tmp / "many", DAY, end, args.day_records)[: args.days]
        one_s, one_all = median_seconds(lambda: ingest_once(days, tmp / "s1", 1), args.repeat)
        n_s, n_all = median_seconds(
            lambda: ingest_once(days, tmp / "sn", args.workers), args.repeat
        )
        n_records = args.records
    result = {
        "file_records": n_records,
        "zstd_d_s": {"median": zstd_s, "all": zstd_all},
        "fxstore_ingest_1core_s": {"median": fx_s, "all": fx_all},
        "by_hand_to_df_python_loop_s": {"median": hand_s, "all": hand_all},
        "records_per_s": {
            "zstd_d": n_records / zstd_s,
            "fxstore_ingest": n_records / fx_s,
            "by_hand": n_records / hand_s,
        },
        "ratio_vs_zstd_d": zstd_s / fx_s,
        "ratio_vs_by_hand": hand_s / fx_s,
        "scaling": {
            "days": len(days),
            "records_per_day": args.day_records,
            "workers": args.workers,
            "one_worker_s": {"median": one_s, "all": one_all},
            "n_workers_s": {"median": n_s, "all": n_all},
            "speedup": one_s / n_s,
            "speedup_per_worker": one_s / n_s / args.workers,
        },
        "targets": {"vs_zstd_d": 0.70, "vs_by_hand": 10.0, "speedup_per_worker": 0.8},
        "numpy": np.__version__,
    }
    out = write_result(os.environ.get("FXSTORE_BENCH_NAME", "ingest"), result)
    print(
        f"ingest {n_records / fx_s / 1e6:.2f} M rec/s = {zstd_s / fx_s:.0%} of zstd -d "
        f"({n_records / zstd_s / 1e6:.2f} M/s), {hand_s / fx_s:.0f}x by hand; "
        f"{args.workers} workers: {one_s / n_s:.2f}x speed-up -> {out}"
    )


if __name__ == "__main__":
    main()
