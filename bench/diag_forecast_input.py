"""Diagnostic: can the agent trade a forecast it is handed?

The agent does not learn the planted signal from the 30 features (bench/diag_no_trade_band.py:
its Q-values memorise the training rows). This hands it the linear reference's prediction
instead: per fold, a ridge of the next four bars' move on the features, its λ chosen by the
correlation with that move on the validation slice (test rows never read), predicted
out-of-fold on the training part (five contiguous blocks, each predicted by a ridge fitted on
the other four) and by the whole training part's ridge elsewhere, scaled to unit standard
deviation on the training part. With ``--input only`` the agent observes that one column
(and its position); with ``append`` the 30 features and the column. It prints, per fold, the
forecast's own correlation with the next 1 and 4 bars' move on each window (stderr).
Everything else, and the per-evaluation record (Q-edge correlations, validation and test PnL
per no-trade band), is bench/diag_no_trade_band.py's.

Run (CPU, the demo's store: ``fxstore demo --no-train`` first)::

    PYTHONPATH=. python bench/diag_forecast_input.py --input only --store data \\
        --profile bench/profiles/diag_smoke_linear.toml --name forecast_only_demo_cpu
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import diag_no_trade_band
import numpy as np

from fxstore.train import loop
from fxstore.train.env.market import Market
from fxstore.train.evaluate.references import linear, ridge
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.gpu.xp import to_host

BLOCKS = 5


def _predict(feats: np.ndarray, fit: tuple[Any, Any, Any, float]) -> np.ndarray:
    mean, scale, beta, intercept = fit
    z = (np.nan_to_num(feats.astype(np.float64), posinf=0.0, neginf=0.0) - mean) / scale
    out: np.ndarray = intercept + z @ beta
    return out


def forecast(market: Market, fold: Fold) -> np.ndarray:
    """The (n_rows, 1) float32 forecast column of `fold` (see the module docstring)."""
    feats = to_host(market.features)
    horizon = linear.FALLBACK_HORIZON_BARS
    rows, target = linear._training_rows(market, *fold.train, horizon)
    vrows, vtarget = linear._training_rows(market, *fold.validation, horizon)
    best_ic, best_lambda = -np.inf, ridge.RIDGE_LAMBDAS[-1]
    for lam in ridge.RIDGE_LAMBDAS:
        pred = _predict(feats[vrows], ridge.fit_ridge(feats[rows], target, lam))
        ic = float(np.corrcoef(pred, vtarget)[0, 1]) if len(vrows) > 2 else 0.0
        if ic > best_ic:
            best_ic, best_lambda = ic, lam
    out = _predict(feats, ridge.fit_ridge(feats[rows], target, best_lambda))
    lo, hi = fold.train
    for block in np.array_split(np.arange(lo, hi), BLOCKS):
        keep = (rows < block[0]) | (rows > block[-1])
        fit = ridge.fit_ridge(feats[rows[keep]], target[keep], best_lambda)
        out[block] = _predict(feats[block], fit)
    scale = float(out[lo:hi].std()) or 1.0
    close = to_host(market.close)
    ics = []
    for name, (a, b) in (
        ("train", fold.train),
        ("validation", fold.validation),
        ("test", fold.test),
    ):
        for h in (1, horizon):
            r = np.arange(a, max(a, b - h))
            ic = np.corrcoef(out[r], close[r + h] - close[r])[0, 1] if len(r) > 2 else np.nan
            ics.append(f"{name} {h}-bar {ic:.3f}")
    print(
        f"fold {fold.index}: lambda {best_lambda:g}; the forecast's IC (out-of-fold on the "
        f"training part): {', '.join(ics)}",
        file=sys.stderr,
    )
    column: np.ndarray = (out / scale).astype(np.float32)[:, None]
    return column


def main() -> None:
    mode, argv = "only", list(sys.argv)
    if "--input" in sys.argv:
        at = sys.argv.index("--input")
        mode = sys.argv[at + 1]
        del sys.argv[at : at + 2]  # diag_no_trade_band's parser does not know it
    write_result = diag_no_trade_band.write_result

    def write_with_input(name: str, payload: dict[str, object]) -> Any:
        sys.argv[:] = argv  # the recorded command keeps --input
        return write_result(name, payload)

    diag_no_trade_band.write_result = write_with_input  # type: ignore[assignment]
    if mode not in ("only", "append"):
        raise SystemExit("--input must be only or append")
    run_fold = loop._run_fold

    def with_forecast(market: Market, fold: Fold, *args: Any, **kwargs: Any) -> Any:
        column = forecast(market, fold)
        if mode == "only":
            features, names = column, ("forecast",)
        else:
            features = np.concatenate([to_host(market.features), column], axis=1)
            names = (*market.feature_names, "forecast")
        handed = dataclasses.replace(
            market, features=market.xp.asarray(features), feature_names=names
        )
        return run_fold(handed, fold, *args, **kwargs)

    loop._run_fold = with_forecast  # type: ignore[assignment]
    diag_no_trade_band.main()


if __name__ == "__main__":
    main()
