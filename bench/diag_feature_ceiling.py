"""Diagnostic: how much of the planted signal can a model of the features recover?

On a synthetic market the planted signal is known (synth's side files; the oracle trades
it). Any policy that sees only the fxcache features can at best trade the part of the
signal the features carry. This measures, on one store:

- the planted signal's information coefficient (Spearman-free Pearson correlation with the
  next ``h`` bars' price change, within one contract) for h in ``--horizons``;
- each feature's IC at those horizons (the five strongest are recorded);
- an out-of-sample ridge fit of the features to the h-bar change (fit on the first half of
  the rows, the penalty chosen on the next sixth, scored on the last third), and the same
  with causal exponential moving averages of every feature added (spans 3, 6, 12): its IC
  with the price change and its correlation with the signal itself.

The ratio of the ridge's IC to the signal's is the share of the signal the features let a
model see, and so an upper bound on what the agent can learn from them.

Run (CPU, the demo's store: ``fxstore demo`` first)::

    PYTHONPATH=. python bench/diag_feature_ceiling.py --store data --name feature_ceiling_demo
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import numpy.typing as npt
from _common import write_result

from fxstore.train.env.data import open_cache
from fxstore.train.evaluate.references.oracle import load_planted_signal

F64 = npt.NDArray[np.float64]
LAMBDAS = (0.1, 1.0, 10.0, 100.0, 1_000.0, 10_000.0)


def forward_change(close: F64, is_roll: npt.NDArray[np.bool_], h: int) -> F64:
    """close[t + h] - close[t], NaN where a roll falls in (t, t + h] or past the end."""
    out = np.full(close.shape[0], np.nan)
    out[:-h] = close[h:] - close[:-h]
    rolls = np.cumsum(is_roll.astype(np.int64))
    crosses = np.zeros(close.shape[0], dtype=bool)
    crosses[:-h] = rolls[h:] != rolls[:-h]
    out[crosses] = np.nan
    return out


def corr(a: F64, b: F64) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return float("nan")
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def ema(x: F64, span: int) -> F64:
    """Causal exponential moving average down the rows of x (n, k)."""
    alpha = 2.0 / (span + 1.0)
    out = np.empty_like(x)
    out[0] = x[0]
    for t in range(1, x.shape[0]):
        out[t] = alpha * x[t] + (1.0 - alpha) * out[t - 1]
    return out


def ridge_oos(x: F64, y: F64) -> tuple[F64, float, range]:
    """Out-of-sample ridge predictions on the last third, the chosen penalty, its rows."""
    n = x.shape[0]
    fit, pick, test = range(0, n // 2), range(n // 2, 2 * n // 3), range(2 * n // 3, n)
    mean, std = x[fit.start : fit.stop].mean(0), x[fit.start : fit.stop].std(0) + 1e-12
    z = (x - mean) / std
    ok = np.isfinite(y)

    def solve(rows: range, lam: float) -> F64:
        sel = np.zeros(n, dtype=bool)
        sel[rows.start : rows.stop] = True
        sel &= ok
        a, b = z[sel], y[sel] - y[sel].mean()
        beta: F64 = np.linalg.solve(a.T @ a + lam * np.eye(a.shape[1]), a.T @ b)
        return beta

    scores = {
        lam: corr(z[pick.start : pick.stop] @ solve(fit, lam), y[pick.start : pick.stop])
        for lam in LAMBDAS
    }
    lam = max(scores, key=lambda k: scores[k] if np.isfinite(scores[k]) else -np.inf)
    beta = solve(range(0, pick.stop), lam)
    return z[test.start : test.stop] @ beta, lam, test


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=Path("data"))
    parser.add_argument("--symbol", default="ES.FUT")
    parser.add_argument("--horizons", default="1,4")
    parser.add_argument("--name", default="feature_ceiling")
    args = parser.parse_args()
    cache = open_cache(args.store, args.symbol, None)
    market = cache.market
    planted = load_planted_signal(
        args.store / "synth" / args.symbol, cache.ts_close, market.trading_day
    )
    if planted.values is None:
        raise SystemExit(f"no planted signal: {planted.reason}")
    signal = planted.values
    x = np.asarray(market.features, dtype=np.float64)
    x = np.where(np.isfinite(x), x, 0.0)
    smoothed = np.concatenate([x, *(ema(x, s) for s in (3, 6, 12))], axis=1)
    close, is_roll = np.asarray(market.close), np.asarray(market.is_roll)
    out: dict[str, object] = {
        "store": str(args.store),
        "n_rows": int(x.shape[0]),
        "n_features": int(x.shape[1]),
    }
    for h in (int(v) for v in args.horizons.split(",")):
        y = forward_change(close, is_roll, h)
        ics = {name: corr(x[:, j], y) for j, name in enumerate(market.feature_names)}
        top = sorted(ics.items(), key=lambda kv: -abs(kv[1]) if np.isfinite(kv[1]) else 0.0)[:5]
        row: dict[str, object] = {
            "signal_ic": corr(signal, y),
            "top_feature_ics": dict(top),
        }
        for label, design in (("features", x), ("features_and_emas", smoothed)):
            pred, lam, test = ridge_oos(design, y)
            sig_test = signal[test.start : test.stop]
            row[label] = {
                "ridge_ic_oos": corr(pred, y[test.start : test.stop]),
                "signal_ic_same_rows": corr(sig_test, y[test.start : test.stop]),
                "corr_with_signal": corr(pred, sig_test),
                "penalty": lam,
            }
            ridge = row[label]
            assert isinstance(ridge, dict)
            ridge["share_of_signal_ic"] = ridge["ridge_ic_oos"] / ridge["signal_ic_same_rows"]
        out[f"h{h}"] = row
        print(h, row)
    write_result(args.name, out)


if __name__ == "__main__":
    main()
