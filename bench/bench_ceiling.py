"""What each feature set lets a model see: the ``ceiling`` reference against the oracle.

For one store (a synthetic market: ``fxstore synth``, ``ingest``) and every feature set
given (a built-in name such as ``default`` or ``classic``, or a TOML file), precomputes the
set (skipped when its fxcache is there) and runs the references on the walk-forward folds of
``--profile``: ``linear``, ``ceiling`` (the planted signal's projection on the set's features,
fitted on each fold's training rows, traded with the oracle's band rule) and ``oracle``.
Records, per set, every reference's pooled out-of-sample PnL, the ceiling's and linear's
share of the oracle's, and the pooled out-of-sample correlation of the ceiling's projection
with the planted signal over the test windows.

Run (CPU; one market per store, built first with synth and ingest)::

    PYTHONPATH=. python bench/bench_ceiling.py --store /work/year/ic0.1-s101 \
        --sets classic,default --profile bench/profiles/learn_gpu.toml \
        --name ceiling_ic0.1_s101
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
from _common import profile_config, write_result

from fxstore.config import BacktestConfig, FeatureConfig, TrainConfig
from fxstore.features.definitions import featureset_named
from fxstore.features.precompute import precompute
from fxstore.train.env.data import open_cache
from fxstore.train.evaluate.references.ceiling import project_signal
from fxstore.train.evaluate.results import load_oracle
from fxstore.train.evaluate.walkforward import make_folds
from fxstore.train.runs.backtest import run_backtest

POLICIES = ("linear", "ceiling", "oracle")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--symbol", default="ES.FUT")
    parser.add_argument("--sets", default="classic,default", help="names or TOML paths")
    parser.add_argument("--profile", default="bench/profiles/learn_gpu.toml")
    parser.add_argument("--name", default="ceiling")
    args = parser.parse_args()
    config = profile_config(args.profile)
    out: dict[str, object] = {}
    for name in args.sets.split(","):
        featureset = featureset_named(name)
        start = time.perf_counter()
        built = precompute(FeatureConfig(symbol=args.symbol, features=featureset), args.store)
        seconds = time.perf_counter() - start
        result = run_backtest(
            BacktestConfig(
                symbol=args.symbol,
                featureset=built.key,
                policies=POLICIES,
                env=config.env,
                walkforward=config.walkforward,
                capital=config.capital,
                seed=config.seed,
                plots=False,
            ),
            args.store,
        )
        totals = result.totals
        row = {
            "fxcache_key": built.key,
            "n_features": built.n_features,
            "precompute_seconds": seconds,
            "n_folds": len({r.fold.index for r in result.folds}),
            "pnl": {p: totals[p].total_pnl for p in POLICIES if p in totals},
            "sharpe_daily": {p: totals[p].sharpe_daily for p in POLICIES if p in totals},
            "share_of_oracle": {p: result.share_of_oracle(p) for p in ("linear", "ceiling")},
            "oof_corr_with_signal": _oof_corr(args.store, args.symbol, built.key, config),
            "notes": list(result.notes),
        }
        out[name] = row
        print(name, row["pnl"], row["share_of_oracle"], row["oof_corr_with_signal"], flush=True)
    write_result(
        args.name,
        {"store": str(args.store), "profile": args.profile, "config": dataclasses.asdict(config)}
        | {"sets": out},
    )


def _oof_corr(store: Path, symbol: str, key: str, config: TrainConfig) -> float:
    """Pooled correlation, over every fold's test window, of the signal's projection on the
    fold's features (fitted on its training rows) with the signal itself."""
    cache = open_cache(store, symbol, key)
    market = cache.market
    signal = load_oracle(store, symbol, None, cache).values
    if signal is None:
        return float("nan")
    folds = make_folds(
        market.trading_day, config.walkforward, max_target_horizon_bars=cache.horizon
    )
    pairs = [
        (project_signal(signal, market, f)[f.test[0] : f.test[1]], signal[f.test[0] : f.test[1]])
        for f in folds
    ]
    return float(
        np.corrcoef(np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs]))[
            0, 1
        ]
    )


if __name__ == "__main__":
    main()
