"""A/B: ingest and precompute of this checkout against another one, paired, on the same data.

For a refactor that must not change speed: each repeat runs, in fresh processes, the
baseline checkout's code and this one's, the order alternating between repeats, and records
each pair's time ratio (this / baseline):
  - ingest: `ingest` of a synthetic week on one core (``--force``), after one warm-up run;
  - precompute: the default feature set over 600k synthetic bars (bench_precompute.py's
    compute part), after a 1,000-bar warm-up.
Times are measured inside the process (imports and numba's cache load excluded; the best of
2 ingest runs and of 5 feature computations, since a fresh process's first passes over new
memory vary twofold here), so the ratio compares the code, not the interpreter start.

    git worktree add /tmp/base <commit>
    python bench/bench_ab.py --baseline /tmp/base --repeat 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import machine, write_result

HERE = Path(__file__).resolve().parent.parent

#: Runs one stage in a fresh process and prints its wall time (imports excluded).
_STAGE = """
import sys, time
from pathlib import Path
from fxstore.config import IngestConfig
stage, data, store = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if stage == "ingest":
    try:
        from fxstore.ingest import ingest as run
    except ImportError:  # a checkout from before the ingest rooms
        from fxstore.ingest.pipeline import ingest as run
    run(IngestConfig(symbol="ES.FUT", workers=1, force=True), [data], store)  # warm-up run
    times = []
    for _ in range(2):
        start = time.perf_counter()
        run(IngestConfig(symbol="ES.FUT", workers=1, force=True), [data], store)
        times.append(time.perf_counter() - start)
else:  # the default feature set over a year of synthetic bars, as bench_precompute.py times
    from fxstore.features.compute import compute_features
    from fxstore.features.definitions import default_featureset
    from fxstore.features.synthetic import synthetic_bars
    bars = synthetic_bars(600_000, n_days=252, roll_days=(50, 113, 176, 239), seed=11)
    featureset = default_featureset().with_tick_size(0.25)  # ES, as its bars' facts give
    compute_features(bars.slice(0, 1000), featureset).to_table()  # JIT cache load
    times = []
    for _ in range(5):
        start = time.perf_counter()
        compute_features(bars, featureset).to_table()
        times.append(time.perf_counter() - start)
print(min(times))
"""


def _time(tree: Path, stage: str, data: Path, store: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", _STAGE, stage, str(data), str(store)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{stage} in {tree} failed:\n{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="The other checkout.")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--days", default="2024-03-04:2024-03-08", help="START:END of synth.")
    parser.add_argument("--events-per-day", type=int, default=1_000_000)
    args = parser.parse_args()
    start, end = args.days.split(":")
    with tempfile.TemporaryDirectory() as tmp:
        data, stores = Path(tmp) / "synth", {"base": Path(tmp) / "a", "this": Path(tmp) / "b"}
        subprocess.run(
            [sys.executable, "-m", "fxstore", "synth", str(data), "--start", start, "--end", end,
             "--events-per-day", str(args.events_per_day), "-q"],
            cwd=HERE,
            check=True,
        )  # fmt: skip
        trees = {"base": args.baseline.resolve(), "this": HERE}
        times: dict[str, dict[str, list[float]]] = {
            s: {"base": [], "this": []} for s in ("ingest", "precompute")
        }
        for i in range(args.repeat):
            order = ("base", "this") if i % 2 == 0 else ("this", "base")
            for stage in ("ingest", "precompute"):
                for side in order:
                    times[stage][side].append(_time(trees[side], stage, data, stores[side]))
    result: dict[str, object] = {"machine": machine(), "baseline": str(args.baseline)}
    for stage, sides in times.items():
        ratios = [b / a for a, b in zip(sides["base"], sides["this"], strict=True)]
        result[stage] = {
            "base_s": sides["base"],
            "this_s": sides["this"],
            "paired_ratio_median": statistics.median(ratios),
            "paired_ratios": ratios,
        }
        print(
            f"{stage}: base {statistics.median(sides['base']):.3f} s, this "
            f"{statistics.median(sides['this']):.3f} s, paired ratio (this/base) "
            f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
        )
    write_result("ab_refactor", result)


if __name__ == "__main__":
    main()
