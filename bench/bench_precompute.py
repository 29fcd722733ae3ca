"""Feature precompute throughput for the classic feature set (30 built-in kinds), on one core.

Measures, in one run and on one core (every library held to one thread; --pin also binds the
process to one CPU, which on a shared machine adds the other processes' time there), over the
same year-sized synthetic bar table (>= 1.5 M bars with the bar store's columns and four
quarterly rolls, built in code):
  (a) fxstore: compute_features(bars, classic_featureset()).to_table(), in bars/s;
  (b) a straightforward pandas implementation of the same features (rolling windows,
      shifts, groupless vectorised column arithmetic), from a DataFrame of the same bars;
  (c) end to end: `precompute` from a bar store on disk (Parquet day files, checksums)
      to the fxcache (Arrow IPC shards + manifest);
  (d) (a) and (b) once each in a fresh process (after a 1,000-bar warm-up that loads the
      JIT cache), as a precompute run computes: every buffer touched for the first time.
Reports medians of CPU and of wall time, bars/s, the ratio (b)/(a) (target >= 10x; (a) target
>= 5 M bars/s), and the largest difference between (a) and (b) per column (same values to
float32 tolerance).

Run:  python bench/bench_precompute.py [--bars 1512000] [--repeat 7] [--pin]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from _common import write_result

from fxstore.config import FeatureConfig
from fxstore.features.compute import compute_features
from fxstore.features.definitions import FeatureDef, FeatureSet, classic_featureset
from fxstore.features.inputs import REQUIRED_COLUMNS
from fxstore.features.precompute import precompute
from fxstore.features.synthetic import synthetic_bars
from fxstore.market.calendar import session_bounds_ns
from fxstore.store import atomic_write_json, bars_dir, file_sha256

TRADING_DAYS = 252
ROLL_DAYS = (50, 113, 176, 239)  # a roll each quarter


def one_core(pin: bool) -> int | None:
    """Hold Arrow to one thread (numba and numpy already use one); with `pin`, one CPU too."""
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    if not pin or not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def fxstore_features(bars: pa.Table, featureset: FeatureSet) -> pa.Table:
    return compute_features(bars, featureset).to_table()


def _levels(df: pd.DataFrame, prefix: str, levels: range) -> pd.Series:
    return sum((df[f"{prefix}_{k:02d}"].astype(float) for k in levels), pd.Series(0.0, df.index))


class PandasBars:
    """The bars as a DataFrame plus the series several features share, each computed once."""

    def __init__(self, df: pd.DataFrame, featureset: FeatureSet) -> None:
        s = featureset.settings
        self.df = df
        same_contract = df.instrument_id.eq(df.instrument_id.shift())
        self.r = np.log(df.close).diff().where(same_contract, 0.0)
        self.r.iloc[0] = np.nan  # no return before the first bar
        self.sigma = np.sqrt((self.r**2).rolling(s.vol_window).mean()).clip(lower=s.vol_floor)
        self.log_duration = np.log((df.ts_close - df.ts_open).clip(lower=1_000_000) / 1e9)
        bounds = {day: session_bounds_ns(day) for day in df.trading_day.drop_duplicates()}
        start = df.trading_day.map({day: b[0] for day, b in bounds.items()})
        end = df.trading_day.map({day: b[1] for day, b in bounds.items()})
        self.angle = 2 * math.pi * (df.ts_close - start) / (end - start)
        self.tick = s.tick_size


def _pandas_returns(bars: PandasBars, d: FeatureDef) -> pd.Series:
    p, r, sigma = d.params, bars.r, bars.sigma
    if d.kind == "log_return":
        return r.rolling(p["horizon"]).sum() / (sigma * math.sqrt(p["horizon"]))
    if d.kind == "forward_return":
        return r.rolling(p["horizon"]).sum().shift(-p["horizon"]) / (
            sigma * math.sqrt(p["horizon"])
        )
    return np.sqrt((r**2).rolling(p["window"]).mean()) / sigma  # realised_vol


def _pandas_book(bars: PandasBars, d: FeatureDef) -> pd.Series:
    df, p, kind = bars.df, d.params, d.kind
    if kind in ("ofi_level", "ofi_multi"):
        levels = range(p["level"], p["level"] + 1) if kind == "ofi_level" else range(p["levels"])
        depth = (_levels(df, "bid_sz", levels) + _levels(df, "ask_sz", levels)) / 2
        return _levels(df, "ofi", levels) / depth.rolling(p["window"]).mean().clip(lower=1.0)
    if kind == "book_imbalance":
        b, a = _levels(df, "bid_sz", range(p["levels"])), _levels(df, "ask_sz", range(p["levels"]))
        return (b - a) / (b + a)
    if kind == "spread_ticks":
        return (df.ask_px_00 - df.bid_px_00) / bars.tick
    if kind == "microprice_offset":
        qb, qa = df.bid_sz_00.astype(float), df.ask_sz_00.astype(float)
        micro = (df.bid_px_00 * qa + df.ask_px_00 * qb) / (qa + qb)
        return (micro - (df.bid_px_00 + df.ask_px_00) / 2) / bars.tick
    levels = range(p["levels"])  # depth
    x = np.log1p(_levels(df, "bid_sz", levels) + _levels(df, "ask_sz", levels))
    return x - x.rolling(p["window"]).mean()


def _pandas_trades_time(bars: PandasBars, d: FeatureDef) -> pd.Series:
    df, p, kind = bars.df, d.params, d.kind
    if kind in ("trade_intensity", "bar_duration"):
        x = bars.log_duration
        if kind == "trade_intensity":
            x = np.log(df.n_trades.astype(float)) - x
        return x - x.rolling(p["window"]).mean()
    if kind == "trade_imbalance":
        return (df.buy_volume - df.sell_volume) / df.volume
    if kind == "vwap_distance":
        return (df.close - df.vwap) / bars.tick
    if kind == "time_of_day":
        return np.cos(bars.angle) if p["fn"] == "cos" else np.sin(bars.angle)
    return df.trading_day.ne(df.trading_day.shift()).astype(float)  # session_start


_PANDAS = {
    **dict.fromkeys(("log_return", "forward_return", "realised_vol"), _pandas_returns),
    **dict.fromkeys(
        ("ofi_level", "ofi_multi", "book_imbalance", "spread_ticks", "microprice_offset", "depth"),
        _pandas_book,
    ),
}


def pandas_features(df: pd.DataFrame, featureset: FeatureSet) -> pd.DataFrame:
    """The same feature set, written the way one would in pandas."""
    bars = PandasBars(df, featureset)
    out = {}
    for prefix, defs in (("f_", featureset.features), ("target_", featureset.targets)):
        for d in defs:
            out[prefix + d.name] = _PANDAS.get(d.kind, _pandas_trades_time)(bars, d)
    frame = pd.DataFrame(out)
    lo, tail = featureset.warmup_rows, featureset.max_target_horizon
    return frame.iloc[lo : len(frame) - tail].astype(np.float32)


def write_bar_store(bars: pa.Table, root: Path, bar_key: str) -> None:
    """Write `bars` as a bar store: one Parquet file per trading day and a bar manifest."""
    folder = bars_dir(root, "ES.FUT", "mbp10_front_month", bar_key)
    folder.mkdir(parents=True)
    days = bars.column("trading_day").to_numpy()
    cuts = [0, *(np.flatnonzero(days[1:] != days[:-1]) + 1).tolist(), len(days)]
    entries = []
    for lo, hi in itertools.pairwise(cuts):
        path = folder / f"{days[lo]}.parquet"
        pq.write_table(bars.slice(lo, hi - lo), path, compression="zstd")
        entries.append(
            {
                "trading_day": str(days[lo]),
                "file": path.name,
                "sha256": file_sha256(path),
                "n_bars": hi - lo,
                "n_records": 0,  # bars made in code: no DBN record was read
                "n_kept": 0,
            }
        )
    atomic_write_json(folder / "manifest.json", {"stage": "bench", "days": entries})


def compare(fast: pa.Table, slow: pd.DataFrame) -> dict[str, float]:
    """Largest absolute difference per feature/target column; raises if beyond float32."""
    diffs = {}
    for name in slow.columns:
        a = fast.column(name).to_numpy()
        b = slow[name].to_numpy()
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=name)
        diffs[name] = float(np.max(np.abs(a.astype(np.float64) - b)))
    return diffs


def timed(
    func: Callable[[], object], repeat: int, before: Callable[[], object] | None = None
) -> dict[str, object]:
    """Run `func` `repeat` times (`before` untimed ahead of each): median and all of its CPU
    time and of its wall time (s).

    CPU time is what the one core spent on it; on a machine shared with other work the wall
    time also holds the waits for a core (see the load average recorded with the result).
    """
    cpu, wall = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        func()
        cpu.append(time.process_time() - cpu_start)
        wall.append(time.perf_counter() - wall_start)
    return {
        "cpu_median": statistics.median(cpu),
        "wall_median": statistics.median(wall),
        "cpu_all": cpu,
        "wall_all": wall,
    }


def end_to_end(bars: pa.Table, repeat: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_bar_store(bars, root, "bench-bars")
        config = FeatureConfig(features=classic_featureset().with_tick_size(0.25), force=True)
        precompute(config, root)  # warm-up (page cache, JIT)
        return timed(lambda: precompute(config, root), repeat)


def _cold_child(which: str, path: str) -> None:
    """In a fresh process: load the bars, warm up on 1,000 bars, time one full-size run."""
    one_core(pin=False)
    bars = pa.ipc.open_file(pa.memory_map(path)).read_all()
    featureset = classic_featureset().with_tick_size(0.25)
    if which == "fxstore":
        fxstore_features(bars.slice(0, 1_000), featureset)  # loads the cached JIT kernels
        run: Callable[[], object] = lambda: fxstore_features(bars, featureset)  # noqa: E731
    else:
        df = bars.to_pandas()
        pandas_features(df.iloc[:1_000], featureset)
        run = lambda: pandas_features(df, featureset)  # noqa: E731
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    run()
    print(time.process_time() - cpu_start, time.perf_counter() - wall_start)


def cold(bars: pa.Table, repeat: int) -> dict[str, object]:
    """One run per fresh process (first touch of every buffer, as a precompute run does)."""
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bars.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, bars.schema) as writer:
            writer.write_table(bars)
        for which in ("fxstore", "pandas"):
            cpu, wall = [], []
            for _ in range(repeat):
                command = [sys.executable, __file__, "--cold-child", which, path]
                done = subprocess.run(command, check=True, capture_output=True, text=True)
                c, w = (float(v) for v in done.stdout.split()[-2:])
                cpu.append(c)
                wall.append(w)
            out[which] = {
                "cpu_median": statistics.median(cpu),
                "wall_median": statistics.median(wall),
                "cpu_all": cpu,
                "wall_all": wall,
            }
    return out


def _rates(
    n: int, fx: dict[str, object], pd_: dict[str, object], e2e: dict[str, object]
) -> dict[str, object]:
    out: dict[str, object] = {}
    for clock in ("cpu", "wall"):
        key = f"{clock}_median"
        f, p, e = float(fx[key]), float(pd_[key]), float(e2e[key])  # type: ignore[arg-type]
        out[clock] = {
            "bars_per_s": {"fxstore": n / f, "pandas": n / p, "end_to_end": n / e},
            "ratio_fxstore_vs_pandas": p / f,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=1_512_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--pin", action="store_true", help="Bind the process to one CPU.")
    parser.add_argument("--cold-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_child:
        _cold_child(*args.cold_child)
        return
    cpu = one_core(args.pin)
    load = list(os.getloadavg())
    featureset = classic_featureset().with_tick_size(0.25)
    bars = synthetic_bars(args.bars, n_days=TRADING_DAYS, roll_days=ROLL_DAYS, seed=11)
    bars = bars.select(list(REQUIRED_COLUMNS)).combine_chunks()
    df = bars.to_pandas()  # trading_day as datetime.date, as pandas users get it
    fxstore_features(bars, featureset)  # JIT warm-up; no result kept alive while timing
    fx = timed(lambda: fxstore_features(bars, featureset), args.repeat)
    pd_ = timed(lambda: pandas_features(df, featureset), max(3, args.repeat // 2))
    fast = fxstore_features(bars, featureset)
    diffs = compare(fast, pandas_features(df, featureset))
    e2e = end_to_end(bars, max(3, args.repeat // 2))
    fresh = cold(bars, 3)
    n = bars.num_rows
    rates = _rates(n, fx, pd_, e2e)
    fresh_fx, fresh_pd = (float(fresh[k]["wall_median"]) for k in ("fxstore", "pandas"))  # type: ignore[index]
    result = {
        "bars": n,
        "trading_days": TRADING_DAYS,
        "rolls": len(ROLL_DAYS),
        "features": len(featureset.features),
        "targets": len(featureset.targets),
        "rows_out": fast.num_rows,
        "pinned_cpu": cpu,
        "load_average_1_5_15min_at_start": load,
        "load_average_1_5_15min_at_end": list(os.getloadavg()),
        "fxstore_compute_s": fx,
        "pandas_compute_s": pd_,
        "precompute_end_to_end_s": e2e,
        **rates,
        "fresh_process_s": fresh,
        "fresh_process": {
            "bars_per_s": {"fxstore": n / fresh_fx, "pandas": n / fresh_pd},
            "ratio_fxstore_vs_pandas": fresh_pd / fresh_fx,
        },
        "targets_required": {"bars_per_s": 5e6, "vs_pandas": 10.0},
        "max_abs_diff_vs_pandas": {"max": max(diffs.values()), "per_column": diffs},
    }
    out = write_result("precompute", result)
    for clock in ("cpu", "wall"):
        per_s = rates[clock]["bars_per_s"]  # type: ignore[index]
        print(
            f"{clock:>4} time, {n:,} bars, {len(featureset.features)} features + "
            f"{len(featureset.targets)} targets, one core: fxstore {per_s['fxstore'] / 1e6:.2f} "
            f"M bars/s, pandas {per_s['pandas'] / 1e6:.3f} M bars/s "
            f"({rates[clock]['ratio_fxstore_vs_pandas']:.1f}x), end to end "  # type: ignore[index]
            f"{per_s['end_to_end'] / 1e6:.2f} M bars/s"
        )
    print(
        f"fresh process (one run each, wall): fxstore {n / fresh_fx / 1e6:.2f} M bars/s, pandas "
        f"{n / fresh_pd / 1e6:.3f} M bars/s ({fresh_pd / fresh_fx:.1f}x)"
    )
    print(f"max |diff| vs pandas {max(diffs.values()):.2e}; load {load} -> {out}")


if __name__ == "__main__":
    main()
