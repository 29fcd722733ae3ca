"""The ``linear`` reference's fit per walk-forward fold, by the target horizons it chooses from.

Builds a synthetic Market in memory (--days trading days of --bars-per-day bars, --features
float32 features, a random walk on the ES grid whose next move is a weak linear function of
the first feature), cuts it into the default profile's folds (60 training days with a 20%
validation slice, 20 test days, 16-bar gaps) and times ``fit_linear`` on every fold with the
market's target horizons set to each of: one horizon (4 bars: the work of a fit at one fixed
horizon), the default set's (1, 2, 4, 8, 16) and every power of two to 256. Costs and reward
are the default profile's. Reports the median seconds per fold and the horizons chosen.

Run:  PYTHONPATH=. python bench/bench_linear.py [--days 756] [--bars-per-day 75]
      [--features 51]
Writes bench/results/linear_fit.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import numpy as np
from _common import profile_config, write_result

from fxstore.train.env.market import Market, contract_spec
from fxstore.train.evaluate.references.linear import fit_linear
from fxstore.train.evaluate.walkforward import make_folds

HORIZON_SETS = {
    "one (4)": (4,),
    "default (1..16)": (1, 2, 4, 8, 16),
    "powers of two (1..256)": (1, 2, 4, 8, 16, 32, 64, 128, 256),
}


def make_market(days: int, bars_per_day: int, n_features: int, seed: int = 0) -> Market:
    """A numpy Market whose next move is 0.05 x feature 0 plus noise (index points)."""
    rng = np.random.default_rng(seed)
    n = days * bars_per_day
    features = rng.standard_normal((n, n_features)).astype(np.float32)
    move = 0.05 * features[:, 0] + 0.25 * rng.standard_normal(n)
    close = 5000.0 + np.round(np.concatenate(([0.0], np.cumsum(move[:-1]))) / 0.25) * 0.25
    return Market(
        features=features,
        close=close,
        half_spread=np.full(n, 0.125),
        is_roll=np.zeros(n, dtype=bool),
        trading_day=(19_000 + np.arange(n) // bars_per_day).astype(np.int32),
        feature_names=tuple(f"f_{i}" for i in range(n_features)),
        bars_per_day=float(bars_per_day),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=756)
    parser.add_argument("--bars-per-day", type=int, default=75)
    parser.add_argument("--features", type=int, default=51)
    args = parser.parse_args()
    config = profile_config("default")
    market = make_market(args.days, args.bars_per_day, args.features)
    folds = make_folds(market.trading_day, config.walkforward, max_target_horizon_bars=16)
    spec = contract_spec("ES.FUT", config.env)
    runs = {}
    for label, horizons in HORIZON_SETS.items():
        with_horizons = dataclasses.replace(market, target_horizons=horizons)
        seconds, chosen = [], []
        for fold in folds:
            start = time.perf_counter()
            model = fit_linear(with_horizons, fold, config.env, spec, capital=config.capital)
            seconds.append(time.perf_counter() - start)
            chosen.append(model.horizon_bars)
        runs[label] = {
            "horizons": list(horizons),
            "median_seconds_per_fold": statistics.median(seconds),
            "total_seconds": sum(seconds),
            "horizons_chosen": chosen,
        }
        print(f"{label}: {statistics.median(seconds):.3f} s per fold (median of {len(folds)})")
    path = write_result(
        "linear_fit",
        {
            "rows": market.n_rows,
            "features": args.features,
            "folds": len(folds),
            "train_rows_first_fold": folds[0].train[1] - folds[0].train[0],
            "validation_rows_first_fold": folds[0].validation[1] - folds[0].validation[0],
            "reward": config.env.reward,
            "runs": runs,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
