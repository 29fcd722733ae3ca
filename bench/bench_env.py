"""VecEnv steps/s: 4,096 parallel environments over a ~1 M-row market (the environment).

Builds a synthetic Market in memory (~1 M rows x 30 float32 features, a random walk on the
ES grid, a roll every ~65 k rows), then measures, in one run, per array module (numpy; CuPy
too when it finds a GPU), medians of --repeat runs of --steps steps:
  (a) ``VecEnv.step`` with random actions drawn up front (episodes of --episode-bars rows,
      restarts included), in env-steps/s = n_envs x steps / s;
  (b) the bare observation gather ``features[rows]`` of the same shape, rows drawn up front:
      the memory-bound floor of one step (an env step reads one feature row per env);
and the ratio (a)/(b) of their times. GPU runs are timed with a device sync at the end.

Run:  PYTHONPATH=. python bench/bench_env.py [--rows 1000000] [--features 30]
      [--envs 4096] [--episode-bars 2000] [--steps 500] [--repeat 7] [--no-gpu]
Writes bench/results/env_cpu.json, or env_gpu.json when CuPy was measured too.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from types import ModuleType

import numpy as np
from _common import median_seconds, write_result

from fxstore.config import EnvConfig
from fxstore.train.env.market import Market, contract_spec
from fxstore.train.env.vecenv import VecEnv

STARTED = time.perf_counter()


def log(message: str) -> None:
    """Progress on stdout, with seconds since the script started."""
    print(f"[{time.perf_counter() - STARTED:6.1f} s] {message}", flush=True)


def make_market(n_rows: int, n_features: int, seed: int = 0) -> Market:
    """A numpy Market: random-walk closes on the 0.25 grid, a roll every 65,536 rows."""
    rng = np.random.default_rng(seed)
    close = 4500.0 + 0.25 * np.cumsum(rng.integers(-2, 3, n_rows)).astype(np.float64)
    is_roll = np.zeros(n_rows, dtype=bool)
    is_roll[65_536::65_536] = True
    return Market(
        features=rng.standard_normal((n_rows, n_features), dtype=np.float32),
        close=close,
        half_spread=np.full(n_rows, 0.125),
        is_roll=is_roll,
        trading_day=(19_000 + np.arange(n_rows) // 400).astype(np.int32),
        feature_names=tuple(f"f_{i:02d}" for i in range(n_features)),
        bars_per_day=400.0,
    )


def on_module(market: Market, xp: ModuleType) -> Market:
    """`market` with its arrays on `xp` (trading_day stays on the host)."""
    if xp is np:
        return market
    return Market(
        features=xp.asarray(market.features),
        close=xp.asarray(market.close),
        half_spread=xp.asarray(market.half_spread),
        is_roll=xp.asarray(market.is_roll),
        trading_day=market.trading_day,
        feature_names=market.feature_names,
        bars_per_day=market.bars_per_day,
    )


def synced(xp: ModuleType, func: Callable[[], object]) -> Callable[[], object]:
    """`func`, then a device sync on a GPU (so the wall time covers the kernels)."""
    if xp is np:
        return func

    def run() -> object:
        out = func()
        xp.cuda.get_current_stream().synchronize()
        return out

    return run


def measure(market: Market, xp: ModuleType, args: argparse.Namespace) -> dict[str, object]:
    """(a) env steps and (b) bare gathers on one module; medians over repeats."""
    market = on_module(market, xp)
    config = EnvConfig()
    spec = contract_spec("ES.FUT")
    n, steps = args.envs, args.steps
    env = VecEnv(
        market,
        config,
        spec,
        n_envs=n,
        window=(0, market.n_rows),
        episode_bars=args.episode_bars,
        seed=1,
    )
    env.reset()
    rng = np.random.default_rng(2)
    actions = xp.asarray(rng.integers(0, len(config.positions), (steps, n)))
    rows = xp.asarray(rng.integers(0, market.n_rows, (steps, n)))
    out = xp.empty((n, market.features.shape[1]), dtype=xp.float32)

    def run_env() -> None:
        for i in range(steps):
            env.step(actions[i])

    def run_gather() -> None:
        for i in range(steps):
            xp.take(market.features, rows[i], axis=0, out=out)

    synced(xp, run_env)()  # warm-up: kernel compiles, memory pool, caches
    synced(xp, run_gather)()
    env_s, env_all = median_seconds(synced(xp, run_env), args.repeat)
    gather_s, gather_all = median_seconds(synced(xp, run_gather), args.repeat)
    result: dict[str, object] = {
        "env_s": env_s,
        "env_all_s": env_all,
        "env_steps_per_s": n * steps / env_s,
        "env_step_us": env_s / steps * 1e6,
        "gather_s": gather_s,
        "gather_all_s": gather_all,
        "gather_steps_per_s": n * steps / gather_s,
        "gather_step_us": gather_s / steps * 1e6,
        "env_over_gather_time": env_s / gather_s,
    }
    log(
        f"{xp.__name__}: {result['env_steps_per_s']:,.0f} env-steps/s "
        f"({result['env_step_us']:.0f} us/step); bare gather {result['gather_steps_per_s']:,.0f}"
        f"/s; env/gather time {result['env_over_gather_time']:.1f}x"
    )
    return result


def find_cupy() -> ModuleType | None:
    """CuPy when it imports and sees a GPU, else None."""
    try:
        import cupy
    except ImportError:
        return None
    try:
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except cupy.cuda.runtime.CUDARuntimeError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--envs", type=int, default=4096)
    parser.add_argument("--episode-bars", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-gpu", action="store_true", help="Measure numpy only.")
    args = parser.parse_args()
    market = make_market(args.rows, args.features)
    log(f"market: {market.n_rows:,} rows x {args.features} float32 features")
    payload: dict[str, object] = {
        "rows": market.n_rows,
        "features": args.features,
        "n_envs": args.envs,
        "episode_bars": args.episode_bars,
        "steps": args.steps,
        "repeat": args.repeat,
        "numpy": measure(market, np, args),
    }
    cupy = None if args.no_gpu else find_cupy()
    if cupy is not None:
        props = cupy.cuda.runtime.getDeviceProperties(0)
        payload["gpu"] = props["name"].decode()
        payload["cupy_version"] = cupy.__version__
        payload["cupy"] = measure(market, cupy, args)
    path = write_result("env_gpu" if cupy is not None else "env_cpu", payload)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
