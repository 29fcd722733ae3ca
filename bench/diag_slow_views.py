"""Which slow views of the order flow let a model of the features see the planted signal?

On a synthetic market the planted signal is known, so for any feature design the ``ceiling``
reference (the signal's ridge projection on the features, fitted on each walk-forward fold's
training rows and traded with the oracle's band rule and costs) measures what that design
could have traded. This tries, on one store's fxcache (any feature set):

- the cache's own features (``base``);
- ``base`` plus causal exponential moving averages of one source column at spans
  ``--spans`` (one design per source in ``--sources``), with and without a reset at each
  trading day's first bar;
- ``base`` plus every source's views (``all``), and a greedy pick of sources (``greedy``:
  the sources, in turn, whose views raise the pooled out-of-fold correlation of the
  projection with the signal most, on the folds' validation slices only).

For each design it records the pooled out-of-fold (test windows) correlation of the
projection with the signal, and the ceiling's and the oracle's pooled PnL, by the folds of
``--profile``. The views are computed here with numpy, not by precompute: this chooses
which views a feature set should hold.

Run (CPU; a store built by ``fxstore synth``, ``ingest`` and ``precompute``)::

    PYTHONPATH=. python bench/diag_slow_views.py --store /work/year/ic0.1-s101 \
        --profile bench/profiles/learn_gpu.toml --name slow_views_ic0.1_s101
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import numpy.typing as npt
from _common import profile_config, write_result

from fxstore._jit import njit
from fxstore.train.env.data import open_cache
from fxstore.train.env.market import Market, contract_spec
from fxstore.train.evaluate.references.ceiling import project_signal
from fxstore.train.evaluate.results import baseline_results, load_oracle
from fxstore.train.evaluate.walkforward import Fold, make_folds

F64 = npt.NDArray[np.float64]


@njit
def ema_columns(x: F64, span: float, starts: npt.NDArray[np.bool_], reset: bool) -> F64:
    """Causal EMA of each column of `x` (n, k), NaN read as 0; restarts where `starts` when
    `reset`."""
    alpha = 2.0 / (span + 1.0)
    out = np.empty_like(x)
    for j in range(x.shape[1]):
        acc = 0.0
        for t in range(x.shape[0]):
            v = x[t, j]
            if not np.isfinite(v):
                v = 0.0
            acc = v if t == 0 or (reset and starts[t]) else alpha * v + (1.0 - alpha) * acc
            out[t, j] = acc
    return out


def _corr(a: F64, b: F64) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return float("nan")
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def _with(market: Market, extra: F64, names: list[str]) -> Market:
    features = np.concatenate([np.asarray(market.features, np.float64), extra], axis=1)
    return dataclasses.replace(
        market,
        features=features.astype(np.float32),
        feature_names=(*market.feature_names, *names),
    )


def score(market: Market, folds: list[Fold], signal: F64, window: str) -> tuple[float, list[float]]:
    """Pooled correlation of the projection with the signal over the folds' `window` rows,
    and each fold's."""
    preds, truth, per_fold = [], [], []
    for fold in folds:
        lo, hi = getattr(fold, window)
        projection = project_signal(signal, market, fold)
        preds.append(projection[lo:hi])
        truth.append(signal[lo:hi])
        per_fold.append(_corr(projection[lo:hi], signal[lo:hi]))
    return _corr(np.concatenate(preds), np.concatenate(truth)), per_fold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--symbol", default="ES.FUT")
    parser.add_argument("--featureset", default=None)
    parser.add_argument("--profile", default="bench/profiles/learn_gpu.toml")
    parser.add_argument("--spans", default="4,8,16,32,64,128,256")
    parser.add_argument(
        "--sources",
        default="trade_imb,ofi_all,ret_1,book_imb_1,book_imb_10,ofi_0,microprice,intensity",
    )
    parser.add_argument("--name", default="slow_views")
    args = parser.parse_args()
    config = profile_config(args.profile)
    cache = open_cache(args.store, args.symbol, args.featureset)
    market = cache.market
    planted = load_oracle(args.store, args.symbol, None, cache)
    if planted.values is None:
        raise SystemExit(f"no planted signal: {planted.reason}")
    signal = planted.values
    folds = make_folds(
        market.trading_day, config.walkforward, max_target_horizon_bars=cache.horizon
    )
    spec = contract_spec(args.symbol, config.env)
    names = list(market.feature_names)
    x = np.asarray(market.features, dtype=np.float64)
    starts = np.r_[True, market.trading_day[1:] != market.trading_day[:-1]]
    spans = [int(s) for s in args.spans.split(",")]
    sources = [s for s in args.sources.split(",") if f"f_{s}" in names]

    def views(source: str, reset: bool) -> tuple[F64, list[str]]:
        col = x[:, [names.index(f"f_{source}")]]
        cols = [ema_columns(col, float(s), starts, reset) for s in spans]
        tag = "_r" if reset else ""
        return np.concatenate(cols, axis=1), [f"f_{source}_ema{s}{tag}" for s in spans]

    def book(design: Market) -> dict[str, float]:
        pnl = {"ceiling": 0.0, "oracle": 0.0}
        for fold in folds:
            for r in baseline_results(
                design,
                fold,
                ["ceiling", "oracle"],
                config.env,
                spec,
                capital=config.capital,
                seed=0,
                planted=signal,
            ):
                pnl[r.policy] += r.metrics.total_pnl
        return pnl

    def record(label: str, design: Market) -> dict[str, object]:
        test_corr, per_fold = score(design, folds, signal, "test")
        pnl = book(design)
        row = {
            "n_features": len(design.feature_names),
            "oof_corr_with_signal": test_corr,
            "per_fold_corr": per_fold,
            "ceiling_pnl": pnl["ceiling"],
            "oracle_pnl": pnl["oracle"],
            "ceiling_share_of_oracle": pnl["ceiling"] / pnl["oracle"]
            if pnl["oracle"] > 0
            else float("nan"),
        }
        print(
            f"{label:28s} n={row['n_features']:4d} corr={test_corr:.3f} "
            f"ceiling ${pnl['ceiling']:,.0f} of oracle ${pnl['oracle']:,.0f}",
            flush=True,
        )
        return row

    designs: dict[str, object] = {"base": record("base", market)}
    by_source: dict[tuple[str, bool], tuple[F64, list[str]]] = {}
    for source in sources:
        for reset in (False, True):
            by_source[source, reset] = views(source, reset)
            extra, extra_names = by_source[source, reset]
            label = f"base+{source}{' reset' if reset else ''}"
            designs[label] = record(label, _with(market, extra, extra_names))
    every = [by_source[s, False] for s in sources]
    designs["all"] = record(
        "all",
        _with(
            market,
            np.concatenate([e for e, _ in every], axis=1),
            [n for _, ns in every for n in ns],
        ),
    )
    # greedy, scored on the validation slices only (never on the test windows it reports)
    chosen: list[tuple[str, bool]] = []
    best_val, _ = score(market, folds, signal, "validation")
    remaining = list(by_source)
    while remaining:
        trials = {}
        for key in remaining:
            pick = [*chosen, key]
            design = _with(
                market,
                np.concatenate([by_source[k][0] for k in pick], axis=1),
                [n for k in pick for n in by_source[k][1]],
            )
            trials[key] = score(design, folds, signal, "validation")[0]
        key = max(trials, key=lambda k: trials[k])
        if not trials[key] > best_val + 0.005:
            break
        best_val = trials[key]
        chosen.append(key)
        remaining = [k for k in remaining if k[0] != key[0]]
        print(f"greedy: + {key} validation corr {best_val:.3f}", flush=True)
    greedy = _with(
        market,
        np.concatenate([by_source[k][0] for k in chosen], axis=1),
        [n for k in chosen for n in by_source[k][1]],
    )
    designs["greedy"] = record("greedy", greedy) | {
        "sources": [f"{s}{' reset' if r else ''}" for s, r in chosen]
    }
    write_result(
        args.name,
        {
            "store": str(args.store),
            "fxcache_key": cache.key,
            "profile": args.profile,
            "spans": spans,
            "n_folds": len(folds),
            "designs": designs,
        },
    )


if __name__ == "__main__":
    main()
