"""End-to-end ingest throughput: decode → front-month filter → bars → Parquet (issue: ingest).

In one run, for the same synthetic trading day of >= 5 M MBP-10 records:
  (a) `zstd -d -c FILE > /dev/null`, the decompression limit;
  (b) `fxstore ingest` on one core (workers=1), front-month dollar-imbalance bars;
  (c) by hand: databento `DBNStore.to_df()`, then a per-trade Python loop building the same
      dollar imbalance bars (López de Prado's rule with EWMA expectations).
Then the scaling over days: the same ingest of D days with 1 and N workers, warm
(`scaling`) and as `python -m fxstore ingest` in fresh processes (`cold`), next to the
machine's limits in the same run, each N independent processes over their own days at
once: one-core ingests (`ceiling`), python-zstandard decompression alone (`decompress`),
fxstore's reader without bars (`decode`), pure arithmetic (`cpu`), copying buffers in and
out of cache (`memory`) and `zstd -d` (`zstd`). `candidates`: what a front-month worker
builds per day, on one core; `open`: the parent's open_dbn of the days; `efficiency`:
the pool and the ceiling back to back in each repeat (paired).
Targets: (b) >= 0.70 x (a) in records/s; (b) >= 10 x (c); speed-up >= 0.8 x N.
FXSTORE_BENCH_SPLIT=utc-day makes the days Databento-style UTC-day files;
FXSTORE_BENCH_CHUNK sets chunk_records; FXSTORE_BENCH_DATA keeps the generated days there;
FXSTORE_BENCH_DAY_SPREAD=s varies the records per day in [1 - s, 1 + s] x --day-records.

Run:  python bench/bench_ingest.py [--records 5000000] [--days 8] [--day-records 1000000]
      python bench/bench_ingest.py --parts scaling,ceiling,decompress --workers 1,8,16 --days 48
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np
from _common import median_seconds, run_shell_seconds, write_result

from fxstore.config import BarConfig, IngestConfig, SynthConfig
from fxstore.ingest import IngestSummary
from fxstore.ingest.dbn.format import MBP10_DTYPE
from fxstore.market.calendar import trading_days_between
from fxstore.synth import generate_market

DAY = dt.date(2024, 3, 5)  # a week before the March 2024 roll: the front month dominates
CONFIG = IngestConfig(
    symbol="ES.FUT",
    bars=BarConfig("dollar_imbalance"),
    workers=1,
    force=True,
    chunk_records=int(os.environ.get("FXSTORE_BENCH_CHUNK", 0))
    or next(int(f.default) for f in dataclasses.fields(IngestConfig) if f.name == "chunk_records"),
)


def ingest_once(paths: list[Path], store: Path, workers: int = 1) -> int:
    return ingest_summary(paths, store, workers).n_records


def ingest_summary(paths: list[Path], store: Path, workers: int = 1) -> IngestSummary:
    from fxstore.ingest.run.pipeline import ingest

    return ingest(dataclasses.replace(CONFIG, workers=workers), paths, store)


def _ingest_slice(args: tuple[list[Path], Path]) -> float:
    """One process of the ceiling run: ingest its own days on one core, timed inside."""
    paths, store = args
    start = time.perf_counter()
    ingest_once(paths, store)
    return time.perf_counter() - start


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


def _make_one(args: tuple[Path, dt.date, dt.date, int, str]) -> list[Path]:
    folder, first, last, records, split = args
    config = SynthConfig(start=first, end=last, events_per_day=records, seed=11, split=split)  # type: ignore[arg-type]
    return list(generate_market(config, folder).files)


def _day_records(records: int, day: dt.date, spread: float) -> int:
    """Records of the span starting on `day`: `records`, or with FXSTORE_BENCH_DAY_SPREAD=s
    a fixed pseudo-random multiple in [1 - s, 1 + s] of it (busy and quiet days)."""
    factor = 1.0 + spread * np.random.default_rng(day.toordinal()).uniform(-1.0, 1.0)
    return max(1, int(records * factor))


def make_days(
    folder: Path, start: dt.date, end: dt.date, records: int, split: str = "trading-day"
) -> list[Path]:
    """Synthetic trading days in [start, end], generated in parallel (each day is
    reproducible on its own, so this equals one generate_market call over the range).

    split="utc-day" writes Databento-style UTC-day files, a week per process (weeks
    share no UTC date: the Sunday evening session opens a new file)."""
    days = trading_days_between(start, end)
    if split == "utc-day":
        weeks: dict[tuple[int, int], list[dt.date]] = {}
        for day in days:
            weeks.setdefault(day.isocalendar()[:2], []).append(day)
        spans = [(w[0], w[-1]) for w in weeks.values()]
    else:
        spans = [(d, d) for d in days]
    spread = float(os.environ.get("FXSTORE_BENCH_DAY_SPREAD", 0))
    jobs = [(folder, a, b, _day_records(records, a, spread), split) for a, b in spans]
    with multiprocessing.get_context("spawn").Pool(os.cpu_count() or 1) as pool:
        files = pool.map(_make_one, jobs, chunksize=1)
    return sorted(p for group in files for p in group)


def many_days(tmp: Path, n_days: int, day_records: int) -> list[Path]:
    """`n_days` synthetic trading days from DAY on, generated once per run (or once per
    FXSTORE_BENCH_DATA folder, kept across runs), as files split by trading day or
    (FXSTORE_BENCH_SPLIT=utc-day) by UTC day."""
    split = os.environ.get("FXSTORE_BENCH_SPLIT", "trading-day")
    root = Path(os.environ.get("FXSTORE_BENCH_DATA") or tmp)
    spread = os.environ.get("FXSTORE_BENCH_DAY_SPREAD", "0")
    folder = root / f"many_{n_days}_{day_records}_{split}" / f"spread{spread}"
    days = trading_days_between(DAY, DAY + dt.timedelta(days=int(n_days * 7 / 5) + 7))[:n_days]
    if not (folder / ".complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        make_days(folder, days[0], days[-1], day_records, split)
        (folder / ".complete").touch()
    return sorted(folder.glob("*.mbp-10.dbn*"))


def peak_rss_mib(path: Path, store: Path) -> float:
    """Peak RSS (MiB) of a fresh process ingesting `path` on one core (VmHWM: unlike
    ru_maxrss it does not carry this parent's memory across exec)."""
    code = (
        "import sys; sys.path.insert(0, 'bench');"
        "from bench_ingest import ingest_once; from pathlib import Path;"
        f"ingest_once([Path({str(path)!r})], Path({str(store)!r}));"
        "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(out.stdout.split()[-1]) / 1024


def single_day(tmp: Path, records: int, repeat: int, by_hand_too: bool) -> dict[str, object]:
    """(a), (b) and (c) on one synthetic day of `records` records; (a) and (b) take turns,
    so the shared machine's drifting load weighs on both alike. With them, where (b)'s time
    goes: python-zstandard decompression alone, and fxstore's reader without bars
    (decompression, the input's sha256, record and order checks)."""
    (path,) = make_days(tmp / "one", DAY, DAY, records)
    ingest_once([path], tmp / "warm")  # JIT warm-up
    _decode_slice(([path], tmp))
    zstd_all, fx_all, py_all, read_all = [], [], [], []
    for _ in range(repeat):
        zstd_all.append(run_shell_seconds(f"zstd -q -d -c {path} > /dev/null"))
        fx_all.append(median_seconds(lambda: ingest_once([path], tmp / "store"), 1)[0])
        py_all.append(_decompress_slice(([path], tmp)))
        read_all.append(_decode_slice(([path], tmp)))
    zstd_s, fx_s = float(np.median(zstd_all)), float(np.median(fx_all))
    result: dict[str, object] = {
        "file_records": records,
        "zstd_d_s": {"median": zstd_s, "all": zstd_all},
        "fxstore_ingest_1core_s": {"median": fx_s, "all": fx_all},
        "python_zstandard_s": {"median": float(np.median(py_all)), "all": py_all},
        "reader_no_bars_s": {"median": float(np.median(read_all)), "all": read_all},
        "records_per_s": {"zstd_d": records / zstd_s, "fxstore_ingest": records / fx_s},
        "ratio_vs_zstd_d": zstd_s / fx_s,
        "paired_ratio_vs_zstd_d": float(
            np.median([z / f for z, f in zip(zstd_all, fx_all, strict=True)])
        ),
        "peak_rss_mib_one_ingest": peak_rss_mib(path, tmp / "rss"),
    }
    line = f"ingest {records / fx_s / 1e6:.2f} M rec/s = {zstd_s / fx_s:.0%} of zstd -d"
    if by_hand_too:
        hand_s, hand_all = median_seconds(lambda: by_hand(path), 1)
        result["by_hand_to_df_python_loop_s"] = {"median": hand_s, "all": hand_all}
        result["ratio_vs_by_hand"] = hand_s / fx_s
        line += f", {hand_s / fx_s:.0f}x by hand"
    print(line)
    return result


def scaling(
    tmp: Path, n_days: int, day_records: int, workers: list[int], repeat: int
) -> dict[str, object]:
    """The same multi-day ingest with each worker count, warm: the kernels of this process
    and the pool's server (which the workers fork from) are loaded before timing; `cold`
    times fresh processes. The worker counts take turns within each repeat, so the load
    of the shared machine drifts alike for all; `paired_speedup` is the median over repeats
    of each repeat's own ratio."""
    days = many_days(tmp, n_days, day_records)
    ingest_once(days[:2], tmp / "warm2", 1)
    ingest_once(days[:2], tmp / "warm_pool", 2)
    runs: dict[int, list[float]] = {n: [] for n in workers}
    busy: dict[int, list[float]] = {n: [] for n in workers}
    for _ in range(repeat):
        for n in workers:
            start = time.perf_counter()
            build_s = ingest_summary(days, tmp / f"s{n}", n).build_s
            runs[n].append(time.perf_counter() - start)
            # How busy the pool was: build seconds summed over groups / (wall x workers).
            busy[n].append(build_s / (runs[n][-1] * n))
    first = workers[0]
    medians = {n: float(np.median(r)) for n, r in runs.items()}
    speedups = {n: medians[first] * first / medians[n] for n in workers}
    paired = {
        n: float(np.median([a * first / b for a, b in zip(runs[first], runs[n], strict=True)]))
        for n in workers
    }
    print("scaling: " + ", ".join(f"{n} workers {speedups[n]:.2f}x" for n in workers))
    print("paired: " + ", ".join(f"{n} workers {paired[n]:.2f}x" for n in workers))
    return {
        "days": len(days),
        "records_per_day": day_records,
        "times_s": {
            str(n): {"median": medians[n], "all": runs[n], "pool_busy": busy[n]} for n in workers
        },
        "speedup": {str(n): v for n, v in speedups.items()},
        "speedup_per_worker": {str(n): v / n for n, v in speedups.items()},
        "paired_speedup": {str(n): v for n, v in paired.items()},
        "paired_speedup_per_worker": {str(n): v / n for n, v in paired.items()},
    }


def open_files(tmp: Path, n_days: int, day_records: int, repeat: int) -> dict[str, object]:
    """The parent's serial start: open_dbn over the day files (headers, zstd frame check,
    first record), files in the page cache."""
    from fxstore.ingest.dbn.reader import open_dbn

    days = many_days(tmp, n_days, day_records)
    open_dbn(days[:1])
    med, runs = median_seconds(lambda: open_dbn(days), repeat)
    size = sum(p.stat().st_size for p in days)
    print(f"open: {len(days)} files, {size / 1e9:.2f} GB, {med:.3f} s")
    return {"files": len(days), "bytes": size, "median_s": med, "all_s": runs}


def cold(
    tmp: Path, n_days: int, day_records: int, workers: list[int], repeat: int
) -> dict[str, object]:
    """The scaling ingest as a user runs it: `python -m fxstore ingest` in a fresh process
    per run (Python, imports, loading the compiled kernels and starting the pool all timed),
    the worker counts taking turns within each repeat."""
    days = many_days(tmp, n_days, day_records)
    folder = days[0].parent
    runs: dict[int, list[float]] = {n: [] for n in workers}
    for r in range(repeat):
        for n in workers:
            command = (
                f"{shlex.quote(sys.executable)} -m fxstore ingest {shlex.quote(str(folder))} "
                f"--symbol ES.FUT --instrument-mode front-month --bar-type dollar_imbalance "
                f"--workers {n} --force --quiet --store {shlex.quote(str(tmp / f'cold{n}_{r}'))}"
                " > /dev/null"
            )
            runs[n].append(run_shell_seconds(command))
    med = {n: float(np.median(v)) for n, v in runs.items()}
    first = workers[0]
    paired = {
        n: float(np.median(np.array(runs[first]) * first / np.array(v))) for n, v in runs.items()
    }
    print("cold (paired): " + ", ".join(f"{n} workers {paired[n]:.2f}x" for n in workers))
    return {
        "times_s": {str(n): {"median": med[n], "all": runs[n]} for n in workers},
        "speedup": {str(n): med[first] * first / med[n] for n in workers},
        "paired_speedup": {str(n): v for n, v in paired.items()},
        "paired_speedup_per_worker": {str(n): v / n for n, v in paired.items()},
    }


def candidates(tmp: Path, n_days: int, day_records: int, repeat: int) -> dict[str, object]:
    """What a front-month worker builds, on one core: the days built for the front month only
    (what one core in-process builds), for the two nearest live outrights all day, and for
    the workers' default (the two nearest, less one that trades little that day). The three
    take turns within each repeat; day files are written as workers write them. Timed in
    this process's CPU seconds (a shared VM's stolen time is not in them) and wall seconds."""
    from fxstore.ingest.run.day_builder import DayResult, GroupTask, build_group, outright_chooser
    from fxstore.ingest.run.plan import plan_ingest
    from fxstore.ingest.select.front_month import FrontMonthSelector

    days = many_days(tmp, n_days, day_records)
    (tmp / "cand_parts").mkdir(exist_ok=True)
    task = GroupTask(
        paths=tuple(days),
        days=None,
        plan=plan_ingest(CONFIG),
        parts_dir=tmp / "cand_parts",
        metadata={},
    )

    def front_only() -> None:
        selector = FrontMonthSelector("ES")

        def choose(day: dt.date, listed: dict[int, str]) -> set[int]:
            chosen = selector.start_day(day, listed)
            return set() if chosen is None else {chosen}

        def on_day(day: DayResult) -> None:
            selector.end_day({i: v for i, (_, v) in day.activity.items()})

        build_group(task, choose=choose, on_day=on_day)

    modes = {
        "front_only": front_only,
        "two_nearest": lambda: build_group(task, choose=outright_chooser("ES")),
        "workers_default": lambda: build_group(task),
    }
    runs: dict[str, list[float]] = {m: [] for m in modes}
    cpu_s: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(repeat):
        for mode, func in modes.items():
            start = time.process_time()
            runs[mode].append(median_seconds(func, 1)[0])
            cpu_s[mode].append(time.process_time() - start)
    paired = {
        m: float(np.median([t / b for t, b in zip(cpu_s[m], cpu_s["front_only"], strict=True)]))
        for m in modes
    }
    print("candidates (CPU s, paired): " + ", ".join(f"{m} {v:.3f}x" for m, v in paired.items()))
    return {
        "days": len(days),
        "records_per_day": day_records,
        "wall_s": {m: {"median": float(np.median(r)), "all": r} for m, r in runs.items()},
        "cpu_s": {m: {"median": float(np.median(r)), "all": r} for m, r in cpu_s.items()},
        "cpu_vs_front_only_paired": paired,
    }


def _spin(n: int) -> float:
    """Pure arithmetic in registers for `n` steps (no memory traffic); seconds taken."""
    import numba

    @numba.njit(cache=False)
    def loop(n: int) -> float:
        x = 1.0
        for _ in range(n):
            x = x * 1.0000001 + 1e-9
        return x

    loop(10)
    start = time.perf_counter()
    loop(n)
    return time.perf_counter() - start


def cpu(workers: list[int], repeat: int) -> dict[str, object]:
    """The machine's limit for pure compute: N processes spinning at once, time per spin
    relative to one alone (1.0 = the cores are truly independent)."""
    context = multiprocessing.get_context("spawn")
    result: dict[str, object] = {}
    base = 0.0
    for n in workers:
        with context.Pool(n) as pool:
            pool.map(_spin, [10] * n, chunksize=1)
            runs = [max(pool.map(_spin, [400_000_000] * n, chunksize=1)) for _ in range(repeat)]
        med = float(np.median(runs))
        base = base or med
        result[str(n)] = {"median": med, "all": runs, "per_worker": base / med}
        print(f"cpu: {n} processes {base / med:.2f} of one alone each")
    return result


def _copy(args: tuple[int, int]) -> float:
    """Copy a `size`-byte buffer into another until `total` bytes have moved; seconds."""
    size, total = args
    src = np.ones(size, np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    start = time.perf_counter()
    for _ in range(max(1, total // size)):
        np.copyto(dst, src)
    return time.perf_counter() - start


#: Buffer sizes of the memory part: inside a core's L2, about L2, inside L3, beyond L3.
_COPY_SIZES = {"256KiB": 1 << 18, "2MiB": 1 << 21, "16MiB": 1 << 24, "1GiB": 1 << 30}


def memory(workers: list[int], repeat: int) -> dict[str, object]:
    """The machine's limit for moving bytes: N processes copying buffers of one size at
    once, time per copy relative to one alone (1.0 = no contention), for buffers that fit a
    core's cache and ones that do not. Decompression streams through a 2 MiB window (the
    window of Databento's and the synthetic files) into 1.5 MiB blocks."""
    context = multiprocessing.get_context("spawn")
    result: dict[str, object] = {}
    for label, size in _COPY_SIZES.items():
        entry: dict[str, object] = {}
        base = 0.0
        for n in workers:
            with context.Pool(n) as pool:
                pool.map(_copy, [(size, size)] * n, chunksize=1)
                job = [(size, 8 << 30)] * n
                runs = [max(pool.map(_copy, job, chunksize=1)) for _ in range(repeat)]
            med = float(np.median(runs))
            base = base or med
            entry[str(n)] = {"median": med, "all": runs, "per_worker": base / med}
            print(f"memory {label}: {n} processes {base / med:.2f} of one alone each")
        result[label] = entry
    return result


def _speedup_entry(
    label: str, n: int, med: float, runs: list[float], base: float
) -> dict[str, object]:
    """One worker count's times and speed-up over `base` (one process's time for all days)."""
    print(f"{label}: {n} processes {base / med:.2f}x")
    return {"median": med, "all": runs, "speedup": base / med, "per_worker": base / med / n}


def zstd_parallel(
    tmp: Path, n_days: int, day_records: int, workers: list[int], repeat: int
) -> dict[str, object]:
    """The decompression floor in parallel: N `zstd -d` processes at once, each over its
    own contiguous slice of the day files (speed-up = one over all days / N at once)."""
    if shutil.which("zstd") is None:
        raise SystemExit("bench_ingest: the zstd command-line tool is not installed")
    days = many_days(tmp, n_days, day_records)
    result: dict[str, object] = {}
    base = 0.0
    for n in workers:
        command = " & ".join(
            f"zstd -q -d -c {' '.join(str(p) for p in s)} > /dev/null" for s in _slices(days, n)
        )
        command += " & wait"
        med, runs = median_seconds(lambda c=command: run_shell_seconds(c), repeat)
        base = base or med * n
        result[str(n)] = _speedup_entry("zstd -d", n, med, runs, base)
    return result


def _decompress_slice(args: tuple[list[Path], Path]) -> float:
    """One process of the decompress run: python-zstandard over its days, read the way the
    ingest reader reads (``readinto`` blocks of chunk_records MBP-10 records); seconds."""
    import zstandard

    paths, _store = args
    start = time.perf_counter()
    buffer = np.empty(CONFIG.chunk_records * MBP10_DTYPE.itemsize, np.uint8).data
    for path in paths:
        with path.open("rb", buffering=0) as fh:
            reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
            while reader.readinto(buffer):
                pass
    return time.perf_counter() - start


def _decode_slice(args: tuple[list[Path], Path]) -> float:
    """One process of the decode run: fxstore's reader over its days (decompress, decode,
    order checks), no bars; seconds."""
    from fxstore.ingest.dbn.reader import open_dbn

    paths, _store = args
    start = time.perf_counter()
    for _ in open_dbn(paths).iter_chunks(chunk_records=CONFIG.chunk_records):
        pass
    return time.perf_counter() - start


#: Parts that run N independent warm processes over their own slices of the days.
_SLICE_PARTS = {"ceiling": _ingest_slice, "decompress": _decompress_slice, "decode": _decode_slice}


def _slices(days: list[Path], n: int) -> list[list[Path]]:
    """`days` cut into `n` contiguous slices of near-equal length."""
    return [list(a) for a in np.array_split(np.array(days, dtype=object), n)]


def independent(
    part: str, tmp: Path, n_days: int, day_records: int, workers: list[int], repeat: int
) -> dict[str, object]:
    """The machine's limit for one stage of this work: N independent warm processes, each
    over its own contiguous slice of the days on one core (no pool, no parent), all started
    together. Speed-up = one process doing all days / the slowest of N.

    ceiling: the whole one-core ingest (front month); decompress: python-zstandard alone
    (the floor, where the zstd tool is missing); decode: fxstore's reader without bars."""
    func = _SLICE_PARTS[part]
    days = many_days(tmp, n_days, day_records)
    result: dict[str, object] = {}
    context = multiprocessing.get_context("spawn")
    base = 0.0
    for n in workers:
        slices = _slices(days, n)
        with context.Pool(n) as pool:
            pool.map(func, [(days[:1], tmp / f"{part}w{i}") for i in range(n)], chunksize=1)
            runs = []
            for r in range(repeat):
                jobs = [(s, tmp / f"{part}{n}_{i}_{r}") for i, s in enumerate(slices)]
                runs.append(max(pool.map(func, jobs, chunksize=1)))
        med = float(np.median(runs))
        base = base or med * n
        result[str(n)] = _speedup_entry(part, n, med, runs, base)
    return result


def efficiency(
    tmp: Path, n_days: int, day_records: int, workers: list[int], repeat: int
) -> dict[str, object]:
    """The pool against the machine's limit, paired: in each repeat, one worker over all days
    (in this process), then for each N the pool of N workers and N independent one-core
    ingests over their own slices of the days (the `ceiling`) back to back, so both see the
    same minute of a shared machine. Reports each speed-up and the pool over the ceiling."""
    days = many_days(tmp, n_days, day_records)
    ingest_once(days[:2], tmp / "eff_warm", 1)
    context = multiprocessing.get_context("spawn")
    counts = [n for n in workers if n > 1]
    pools = {n: context.Pool(n) for n in counts}
    base: list[float] = []
    pool_s: dict[int, list[float]] = {n: [] for n in counts}
    ceiling_s: dict[int, list[float]] = {n: [] for n in counts}
    try:
        for n in counts:
            ingest_once(days[:2], tmp / f"eff_warm{n}", n)
            pools[n].map(_ingest_slice, [(days[:1], tmp / f"effw{n}_{i}") for i in range(n)])
        for r in range(repeat):
            base.append(median_seconds(lambda r=r: ingest_once(days, tmp / f"eff1_{r}"), 1)[0])
            for n in counts:
                store = tmp / f"effp{n}_{r}"
                pool_s[n].append(median_seconds(lambda s=store, n=n: ingest_once(days, s, n), 1)[0])
                slices = _slices(days, n)
                jobs = [(sl, tmp / f"effc{n}_{r}_{i}") for i, sl in enumerate(slices)]
                ceiling_s[n].append(max(pools[n].map(_ingest_slice, jobs, chunksize=1)))
    finally:
        for pool in pools.values():
            pool.terminate()
    one = np.array(base)
    result: dict[str, object] = {"one_worker_s": {"median": float(np.median(one)), "all": base}}
    for n in counts:
        p, c = np.array(pool_s[n]), np.array(ceiling_s[n])
        entry = {
            "pool_s": {"median": float(np.median(p)), "all": pool_s[n]},
            "ceiling_s": {"median": float(np.median(c)), "all": ceiling_s[n]},
            "pool_per_worker_paired": float(np.median(one / p)) / n,
            "ceiling_per_worker_paired": float(np.median(one / c)) / n,
            "pool_over_ceiling_paired": float(np.median(c / p)),
        }
        print(
            f"efficiency {n}: pool {entry['pool_per_worker_paired']:.2f}/worker, ceiling "
            f"{entry['ceiling_per_worker_paired']:.2f}, pool/ceiling "
            f"{entry['pool_over_ceiling_paired']:.2f}"
        )
        result[str(n)] = entry
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--days", type=int, default=8, help="trading days for the scaling run")
    parser.add_argument("--day-records", type=int, default=1_000_000)
    parser.add_argument("--workers", default=f"1,{os.cpu_count() or 2}")
    parser.add_argument("--parts", default="single,hand,scaling")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    result: dict[str, object] = {
        "targets": {"vs_zstd_d": 0.70, "vs_by_hand": 10.0, "speedup_per_worker": 0.8},
        "numpy": np.__version__,
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if "single" in parts:
            result["single_day"] = single_day(tmp, args.records, args.repeat, "hand" in parts)
        if "scaling" in parts:
            workers = [int(n) for n in args.workers.split(",")]
            result["scaling"] = scaling(tmp, args.days, args.day_records, workers, args.repeat)
        if "open" in parts:
            result["open"] = open_files(tmp, args.days, args.day_records, args.repeat)
        if "candidates" in parts:
            result["candidates"] = candidates(tmp, args.days, args.day_records, args.repeat)
        if "efficiency" in parts:
            workers = [int(n) for n in args.workers.split(",")]
            result["efficiency"] = efficiency(
                tmp, args.days, args.day_records, workers, args.repeat
            )
        if "cold" in parts:
            workers = [int(n) for n in args.workers.split(",")]
            result["cold"] = cold(tmp, args.days, args.day_records, workers, args.repeat)
        if "zstd" in parts:
            workers = [int(n) for n in args.workers.split(",")]
            result["zstd"] = zstd_parallel(tmp, args.days, args.day_records, workers, args.repeat)
        if "cpu" in parts:
            result["cpu"] = cpu([int(n) for n in args.workers.split(",")], args.repeat)
        if "memory" in parts:
            result["memory"] = memory([int(n) for n in args.workers.split(",")], args.repeat)
        for part in [p for p in _SLICE_PARTS if p in parts]:
            workers = [int(n) for n in args.workers.split(",")]
            result[part] = independent(part, tmp, args.days, args.day_records, workers, args.repeat)
    out = write_result(os.environ.get("FXSTORE_BENCH_NAME", "ingest"), result)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
