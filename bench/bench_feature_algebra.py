"""Expression features: a 100-feature set over a year of bars, against polars, on one core.

Measures, in one run, over the same year-sized synthetic bar table (>= 1.5 M bars, four
quarterly rolls, built in code) and a feature set of 100 expression features (4 over bar
columns, 96 over those: EMAs at spans 4 to 256, rolling mean/std/sum/min/max/z-score, lags,
differences, clips, spreads of EMAs; 12 of them restarted each trading day), no targets:
  (a) fxstore: compute_features(bars, set).to_table(): every feature of the set, float32,
      warm-up dropped; in bars/s (bars of the table per second for the whole set, i.e. rows
      x 1, not rows x features). The output comes from Arrow's memory pool, which reuses
      the pages of the previous call's freed table, as a precompute of several symbols or
      shards does; also timed with the pool's free pages returned to the system before
      each call (fresh memory: every output page faulted in, as for a process's first);
  (b) the same definitions as vectorised polars expressions (ewm_mean, rolling_*, shift,
      over("trading_day") for the restarted ones), one thread (POLARS_MAX_THREADS=1), from a
      DataFrame of the same bars to float32 numpy columns;
  (c) end to end: `precompute` of the set from a bar store on disk to the fxcache;
  (d) the compile cost a fresh process pays: the first compute_features call on 2,000 bars
      minus the second, in fresh subprocesses sharing an empty numba cache folder: the
      first builds the cache (cold), the second loads it (the set built once before), the
      third runs another expression set (the kernel is generic: nothing per set).
Reports medians of CPU and wall time, the ratio (b)/(a) (targets: (a) >= 3 M bars/s, >= 5x
(b); (d) warm <= 2 s), and the largest difference between (a) and (b) where both are finite.

Run:  python bench/bench_feature_algebra.py [--bars 1512000] [--repeat 5] [--pin]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("POLARS_MAX_THREADS", "1")

import numpy as np
import polars as pl
import pyarrow as pa
from _common import write_result
from bench_precompute import ROLL_DAYS, TRADING_DAYS, one_core, timed, write_bar_store

from fxstore.config import FeatureConfig
from fxstore.features.algebra import ExprDef
from fxstore.features.compute import compute_features
from fxstore.features.definitions import FeatureSet, Settings
from fxstore.features.expressions import Call, Const, Name, Node
from fxstore.features.inputs import REQUIRED_COLUMNS
from fxstore.features.precompute import precompute
from fxstore.features.synthetic import synthetic_bars

BASE = {
    "imb": "(buy_volume - sell_volume) / volume",
    "ret": "close / lag(close, 1) - 1",
    "ofi": "ofi_00 + ofi_01 + ofi_02",
    "book": "(bid_sz_00 - ask_sz_00) / (bid_sz_00 + ask_sz_00)",
}


def bench_features() -> list[ExprDef]:
    """The 100 expression features (4 over bar columns, 96 over those)."""
    out = [ExprDef(name, text) for name, text in BASE.items()]
    for x in BASE:
        out += [ExprDef(f"{x}_ema{n}", f"ema({x}, {n})") for n in (4, 8, 16, 32, 64, 128, 256)]
        for stat, windows in (
            ("mean", (16, 64)),
            ("std", (16, 64)),
            ("zscore", (32, 128)),
            ("sum", (32,)),
            ("min", (32,)),
            ("max", (32,)),
        ):
            out += [ExprDef(f"{x}_{stat}{n}", f"rolling_{stat}({x}, {n})") for n in windows]
        out += [ExprDef(f"{x}_lag{k}", f"lag({x}, {k})") for k in (1, 4)]
        out.append(ExprDef(f"{x}_diff8", f"diff({x}, 8)"))
        out.append(ExprDef(f"{x}_day_ema32", f"ema({x}, 32)", "session"))
        out.append(ExprDef(f"{x}_day_mean64", f"rolling_mean({x}, 64)", "session"))
        out.append(ExprDef(f"{x}_day_z64", f"rolling_zscore({x}, 64)", "session"))
        out.append(ExprDef(f"{x}_zclip", f"clip(rolling_zscore({x}, 256), -3, 3)"))
        out.append(ExprDef(f"{x}_spread", f"ema({x}, 8) - ema({x}, 64)"))
    return out


def bench_featureset(features: list[ExprDef] | None = None) -> FeatureSet:
    return FeatureSet(tuple(features or bench_features()), (), Settings(tick_size=0.25))


def fxstore_features(bars: pa.Table, featureset: FeatureSet) -> pa.Table:
    return compute_features(bars, featureset).to_table()


def _polars(node: Node, features: set[str]) -> pl.Expr:
    """`node` as a polars expression (another feature read as its float32 column)."""
    if isinstance(node, Name):
        column = pl.col(node.name).cast(pl.Float64)
        return column.cast(pl.Float32).cast(pl.Float64) if node.name in features else column
    if isinstance(node, Const):
        return pl.lit(node.value)
    args = [_polars(a, features) for a in node.args]
    x = args[0]
    ops = {
        "add": lambda: x + args[1],
        "sub": lambda: x - args[1],
        "mul": lambda: x * args[1],
        "div": lambda: x / args[1],
        "neg": lambda: -x,
        "clip": lambda: x.clip(node.params[0], node.params[1]),
    }
    if node.op in ops:
        return ops[node.op]()
    n = int(node.params[0])
    if node.op == "ema":
        return x.ewm_mean(span=n, adjust=False, min_samples=n)
    if node.op in ("lag", "diff"):
        past = x.shift(n)
        return past if node.op == "lag" else x - past
    if node.op == "rolling_zscore":
        mean, std = x.rolling_mean(n), x.rolling_std(n, ddof=0)
        return (x - mean) / std
    if node.op == "rolling_std":
        return x.rolling_std(n, ddof=0)
    return getattr(x, node.op)(n)  # rolling_mean, _sum, _min, _max


def _polars_session(node: Node, features: set[str]) -> pl.Expr:
    """A restarted feature: partial windows from each trading day's first bar."""
    if not isinstance(node, Call) or node.op not in ("ema", "rolling_mean", "rolling_zscore"):
        raise ValueError(node)
    x, n = _polars(node.args[0], features), int(node.params[0])
    if node.op == "ema":
        return x.ewm_mean(span=n, adjust=False).over("trading_day")
    mean = x.rolling_mean(n, min_samples=1)
    if node.op == "rolling_mean":
        return mean.over("trading_day")
    std = x.rolling_std(n, min_samples=1, ddof=0)
    return ((x - mean) / std).over("trading_day")


def polars_features(df: pl.DataFrame, featureset: FeatureSet) -> dict[str, np.ndarray]:
    """The set's features with polars: the 4 base features, then the 96 over them."""
    items = [d for d in featureset.features if isinstance(d, ExprDef)]
    names = {d.name for d in items}
    base = [d for d in items if d.name in BASE]
    exprs = [
        (_polars_session if d.reset == "session" else _polars)(d.tree, names).alias(d.name)
        for d in items
        if d.name not in BASE
    ]
    frame = df.with_columns(_polars(d.tree, names).alias(d.name) for d in base)
    frame = frame.with_columns(exprs)
    lo = featureset.warmup_rows
    return {d.name: frame[d.name].to_numpy()[lo:].astype(np.float32) for d in items}


def compare(fast: pa.Table, slow: dict[str, np.ndarray]) -> dict[str, float]:
    """Largest |difference| per feature where both are finite (polars' z-score of a constant
    window is not finite; fxstore's is 0), relative to the column's scale."""
    out = {}
    for name, b in slow.items():
        a = fast.column("f_" + name).to_numpy().astype(np.float64)
        both = np.isfinite(a) & np.isfinite(b)
        scale = max(float(np.max(np.abs(b[both]), initial=0.0)), 1e-12)
        out[name] = float(np.max(np.abs(a[both] - b[both]), initial=0.0)) / scale
    return out


_CHILD = """
import sys, time
sys.path.insert(0, {bench!r})
from bench_feature_algebra import bench_featureset, bench_features, fxstore_features
from fxstore.features.algebra import ExprDef
from fxstore.features.synthetic import synthetic_bars
bars = synthetic_bars(2_000, n_days=5, seed=3)
other = [ExprDef("x", "rolling_max(ema(close, 3) * 2, 7)"), ExprDef("y", "diff(x, 2)", "session")]
featureset = bench_featureset(other if {other} else None)
start = time.perf_counter()
fxstore_features(bars, featureset)
first = time.perf_counter() - start
start = time.perf_counter()
fxstore_features(bars, featureset)
print(first, time.perf_counter() - start)
"""


def compile_cost() -> dict[str, object]:
    """First-call overhead in fresh processes sharing an empty numba cache folder."""
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label, other in (("cold", False), ("warm", False), ("warm_other_set", True)):
            code = _CHILD.format(bench=str(Path(__file__).parent), other=other)
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
            )
            process_s = time.perf_counter() - start
            first, second = (float(v) for v in done.stdout.split()[-2:])
            out[label] = {
                "compile_s": first - second,
                "first_call_s": first,
                "second_call_s": second,
                "process_s": process_s,
            }
    return out


def end_to_end(bars: pa.Table, featureset: FeatureSet, repeat: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_bar_store(bars, root, "bench-bars")
        config = FeatureConfig(features=featureset, force=True)
        precompute(config, root)  # warm-up (page cache, JIT)
        return timed(lambda: precompute(config, root), repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=1_512_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pin", action="store_true", help="Bind the process to one CPU.")
    args = parser.parse_args()
    cpu = one_core(args.pin)
    load = list(os.getloadavg())
    featureset = bench_featureset()
    bars = synthetic_bars(args.bars, n_days=TRADING_DAYS, roll_days=ROLL_DAYS, seed=11)
    bars = bars.select(list(REQUIRED_COLUMNS)).combine_chunks()
    df = pl.from_arrow(bars)
    if not isinstance(df, pl.DataFrame):
        raise TypeError(df)
    fxstore_features(bars, featureset)  # JIT warm-up
    fx = timed(lambda: fxstore_features(bars, featureset), args.repeat)
    # The same with the memory pool's free pages returned to the system first: every page
    # of the output is faulted in and zeroed again, as for a process's first set.
    release = pa.default_memory_pool().release_unused
    fx_fresh = timed(lambda: fxstore_features(bars, featureset), args.repeat, before=release)
    pl_ = timed(lambda: polars_features(df, featureset), max(3, args.repeat // 2))
    fast = fxstore_features(bars, featureset)
    diffs = compare(fast, polars_features(df, featureset))
    e2e = end_to_end(bars, featureset, max(3, args.repeat // 2))
    compile_s = compile_cost()
    n = bars.num_rows
    rates: dict[str, object] = {}
    for clock in ("cpu", "wall"):
        f, p, e, f0 = (float(t[f"{clock}_median"]) for t in (fx, pl_, e2e, fx_fresh))  # type: ignore[arg-type]
        rates[clock] = {
            "bars_per_s": {
                "fxstore": n / f,
                "fxstore_fresh_memory": n / f0,
                "polars": n / p,
                "end_to_end": n / e,
            },
            "feature_values_per_s": {"fxstore": n * 100 / f, "polars": n * 100 / p},
            "ratio_fxstore_vs_polars": p / f,
        }
    result = {
        "bars": n,
        "trading_days": TRADING_DAYS,
        "rolls": len(ROLL_DAYS),
        "features": len(featureset.features),
        "rows_out": fast.num_rows,
        "rate_unit": "bars_per_s: bars of the table per second for the whole 100-feature set "
        "(rows x 1); feature_values_per_s: rows x features",
        "pinned_cpu": cpu,
        "polars_version": pl.__version__,
        "polars_threads": os.environ["POLARS_MAX_THREADS"],
        "load_average_1_5_15min_at_start": load,
        "load_average_1_5_15min_at_end": list(os.getloadavg()),
        "fxstore_compute_s": fx,
        "fxstore_compute_fresh_memory_s": fx_fresh,
        "memory_pool": pa.default_memory_pool().backend_name,
        "polars_compute_s": pl_,
        "precompute_end_to_end_s": e2e,
        **rates,
        "compile_in_fresh_process": compile_s,
        "targets_required": {"bars_per_s": 3e6, "vs_polars": 5.0, "warm_compile_s": 2.0},
        "max_rel_diff_vs_polars": {"max": max(diffs.values()), "per_feature": diffs},
        "featureset": [d.to_json() for d in featureset.features if isinstance(d, ExprDef)],
    }
    out = write_result("feature_algebra_cpu", result)
    for clock in ("cpu", "wall"):
        r = rates[clock]
        print(f"{clock}: {json.dumps(r)}")
    print(f"compile: {json.dumps(compile_s)}")
    print(f"max rel diff vs polars {max(diffs.values()):.2e}; load {load} -> {out}")


if __name__ == "__main__":
    main()
