"""Diagnostic: how well does the agent's forecast read the market it trades, out of sample?

The agent of ``forecast = "only"`` sees one column: the fold's ``linear`` ridge model's
prediction, its horizon and penalty chosen on the validation slice among the fxcache's
target horizons (``fxstore.train.evaluate.references.linear``). At low signal strength that
choice is noisy (fold by fold it jumps between 1 and 16 bars, λ 0.001 and 10). This
measures, per fold and pooled over the test windows (never used to choose anything), the
correlation of candidate forecasts with the close-to-close move over the next h bars, for h
in ``--moves`` (rows whose move crosses a roll are left out):

- ``chosen``: the model ``linear`` chose on validation (what the agent sees by default);
  ``chosen-noint`` the same without its mean move (intercept);
- ``h<N>``: the ridge of the N-bar move at the chosen λ, for each target horizon N;
- ``mean``: the mean over the target horizons of each one's prediction in standard
  deviations of its training predictions, at the chosen λ (no horizon chosen at all);
- ``cv-mean`` (``cv-mean+int`` with the intercepts): the same with each horizon's λ chosen
  by its cross-validated correlation on the training rows
  (:func:`fxstore.train.evaluate.forecast.cross_fit`);
  ``cv-best``: the one horizon whose cross-validated correlation is the highest;
- ``blend``: what ``forecast_model = "blend"`` hands the agent
  (:func:`fxstore.train.evaluate.forecast.blend_forecast`, cross-fitted on training rows);
- ``ceiling``: the ceiling reference's projection of the planted signal on the features;
- ``planted``: the planted signal itself (a store made by ``fxstore synth``), the ceiling of
  any forecast.

Per fold it also records ``cv_max_t``: the largest cross-validated correlation of any
horizon and penalty on the training rows, in standard errors (``1 / sqrt(rows / h)``), the
statistic a guard that stands aside on weak folds would test.

Beside each correlation, the test PnL of ``linear``'s band policy on that forecast (+1 or
-1 contract beyond a band, the band chosen on validation in standard deviations of the
forecast on the training rows), pooled over the folds.

Run (CPU; stores made by ``bash bench/synth_year.sh IC SEED ROOT``; ``ROOT@KEY`` picks one
of several fxcaches)::

    PYTHONPATH=. python bench/diag_forecast_ic.py --store ic0.05-s111=/tmp/y/ic0.05-s111 \\
        --profile bench/profiles/diag_year_cpu_forecast.toml --name forecast_ic_cpu
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import numpy.typing as npt
from _common import correlation, next_moves, profile_config, write_result

from fxstore.config import EnvConfig
from fxstore.train.env.data import open_cache
from fxstore.train.env.market import ContractSpec, Market, contract_spec, evaluate_positions
from fxstore.train.evaluate.forecast import CrossFit, blend_forecast, cross_fit
from fxstore.train.evaluate.references import linear, ridge
from fxstore.train.evaluate.references.ceiling import project_signal
from fxstore.train.evaluate.results import load_oracle
from fxstore.train.evaluate.walkforward import Fold, make_folds
from fxstore.train.gpu.xp import to_host

F64 = npt.NDArray[np.float64]


def forecasts(market: Market, fit: CrossFit, model: ridge.LinearModel) -> dict[str, F64]:
    """Each candidate forecast over every row (float64), by name."""
    full = fit.full
    k = (
        ridge.RIDGE_LAMBDAS.index(model.ridge_lambda)
        if model.ridge_lambda in ridge.RIDGE_LAMBDAS
        else len(ridge.RIDGE_LAMBDAS) - 1
    )
    z = full.standardise(market.features)
    out = {"chosen": model.predict(market.features)}
    scaled = []
    for h, horizon in enumerate(fit.horizons):
        pred = full.intercepts[h] + z @ full.betas[k, :, h]
        out[f"h{horizon}"] = pred
        scaled.append((pred - full.intercepts[h]) / max(full.spread(k, h), 1e-150))
    out["mean"] = np.mean(scaled, axis=0)
    out["chosen-noint"] = out["chosen"] - model.intercept
    # λ per horizon by the training part's cross-validated correlation (no validation read)
    ic = fit.correlations()
    cv_scaled = []
    for h in range(len(fit.horizons)):
        k_h = int(np.argmax(ic[:, h]))
        spread = max(full.spread(k_h, h), 1e-150)
        cv_scaled.append(
            (z @ full.betas[k_h, :, h] / spread, float(ic[k_h, h]), full.intercepts[h] / spread)
        )
    out["cv-mean"] = np.mean([p for p, _, _ in cv_scaled], axis=0)
    out["cv-mean+int"] = np.mean([p + c for p, _, c in cv_scaled], axis=0)
    out["cv-best"] = max(cv_scaled, key=lambda entry: entry[1])[0]
    return out


def _cv_max_t(fit: CrossFit) -> float:
    """The largest cross-validated correlation over the horizons and penalties, in standard
    errors of a correlation over ``rows / h`` independent moves (the training part's)."""
    errors = np.array([1.0 / np.sqrt(max(len(fit.rows) / h, 1.0)) for h in fit.horizons])
    return float(np.max(fit.correlations() / errors))


def _blend(market: Market, fold: Fold) -> F64:
    """What ``forecast_model = "blend"`` hands the agent (cross-fitted on the training rows)."""
    return blend_forecast(market, fold).astype(np.float64)


def band_pnl(
    market: Market,
    prediction: F64,
    fold: Fold,
    env: EnvConfig,
    spec: ContractSpec,
    capital: float,
) -> float:
    """Test PnL of the band policy over `prediction`, its band chosen on validation (in
    standard deviations of the training rows' predictions), as ``linear`` trades."""
    lo, hi = fold.train
    spread = float(np.std(prediction[lo:hi])) or 1.0
    v_lo, v_hi = fold.validation
    window = market.rows(v_lo, v_hi)
    band, _ = linear.choose_band(
        window, prediction[v_lo:v_hi], spread, (0, window.n_rows), env, spec, capital=capital
    )
    if not np.isfinite(band):
        return 0.0
    t_lo, t_hi = fold.test
    positions = linear.band_positions(prediction[t_lo:t_hi], band)
    book = evaluate_positions(market, positions, t_lo, t_hi, env, spec)
    return float(to_host(book.pnl).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store", action="append", required=True, help="NAME=ROOT[@FEATURESET], repeatable"
    )
    parser.add_argument("--profile", default="default")
    parser.add_argument("--moves", default="4,16,64", help="move horizons (bars), comma-separated")
    parser.add_argument("--name", default="forecast_ic")
    args = parser.parse_args()
    config = profile_config(args.profile, device="cpu")
    move_horizons = [int(h) for h in args.moves.split(",")]
    stores = {}
    for entry in args.store:
        name, root = entry.split("=", 1)
        root, _, key = root.partition("@")
        cache = open_cache(Path(root), config.symbol, key or config.featureset, "cpu")
        market = cache.market
        spec = contract_spec(config.symbol, config.env, cache.contracts)
        planted = load_oracle(Path(root), config.symbol, config.signal_dir, cache).values
        folds = make_folds(
            market.trading_day, config.walkforward, max_target_horizon_bars=cache.horizon
        )
        pooled: dict[str, dict[int, list[tuple[F64, F64]]]] = {}
        per_fold = []
        for fold in folds:
            model = linear.fit_linear(market, fold, config.env, spec, capital=config.capital)
            fit = cross_fit(market, fold)
            if fit is None:
                continue  # too few training rows to fit anything
            candidates = forecasts(market, fit, model)
            candidates["blend"] = _blend(market, fold)
            if planted is not None:
                candidates["ceiling"] = project_signal(planted, market, fold)
                candidates["planted"] = planted
            row: dict[str, float] = {
                "fold": fold.number,
                "chosen_horizon": model.horizon_bars,
                "chosen_lambda": model.ridge_lambda,
                "cv_max_t": _cv_max_t(fit),
            }
            for cand, values in candidates.items():
                row[f"{cand}:pnl"] = band_pnl(
                    market, values, fold, config.env, spec, config.capital
                )
            for h in move_horizons:
                rows, moves = next_moves(market, *fold.test, h)
                for cand, values in candidates.items():
                    row[f"{cand}@{h}"] = correlation(values[rows], moves)
                    pooled.setdefault(cand, {}).setdefault(h, []).append((values[rows], moves))
            per_fold.append(row)
        summary = {
            cand: {
                str(h): correlation(
                    np.concatenate([v for v, _ in parts]), np.concatenate([m for _, m in parts])
                )
                for h, parts in by_h.items()
            }
            for cand, by_h in pooled.items()
        }
        # the mean over folds of the per-fold correlation (each fold's scale apart)
        fold_mean = {
            cand: {
                str(h): float(np.nanmean([r[f"{cand}@{h}"] for r in per_fold]))
                for h in move_horizons
            }
            for cand in pooled
        }
        pnl = {cand: float(sum(r[f"{cand}:pnl"] for r in per_fold)) for cand in pooled}
        stores[name] = {
            "store": root,
            "band_policy_test_pnl": pnl,
            "pooled_ic": summary,
            "mean_fold_ic": fold_mean,
            "per_fold": per_fold,
        }
        print(
            name,
            "  largest cross-validated t per fold:",
            [round(r["cv_max_t"], 1) for r in per_fold],
        )
        for cand in pooled:
            cells = "  ".join(
                f"{h:>3}: {summary[cand][str(h)]:+.3f} ({fold_mean[cand][str(h)]:+.3f})"
                for h in move_horizons
            )
            print(f"  {cand:>12}  {cells}   band policy ${pnl[cand]:>10,.0f}")
    path = write_result(
        args.name, {"profile": config.profile, "moves": move_horizons, "stores": stores}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
