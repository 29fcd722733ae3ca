"""What a fold's forecast is worth on its own training rows, the number `reward_forecast`
rewards: per fold, the slope of the next bar's move on the (cross-fitted) forecast, and the
forecast's correlation with the next 1 and 16 bars' moves on the training rows, the
validation slice and the test window.

A forecast whose cross-fitted slope is near 0, or below it, teaches an agent rewarded by its
expected move nothing, or the wrong side. Nothing is trained here.

    python bench/diag_reward_slope.py --store ic0.05-s1301=/tmp/yr/ic0.05-s1301 \
        --profile bench/profiles/diag_year_cpu_forecast.toml --name reward_slope_cpu
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import correlation, next_moves, profile_config, write_result

from fxstore.config import ForecastModel, TrainConfig
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.forecast import forecast_values, reward_path
from fxstore.train.evaluate.walkforward import Fold

_HORIZONS = (1, 16)
_MODELS: tuple[ForecastModel, ...] = ("linear", "blend")


def fold_slopes(
    market: Market,
    folds: list[Fold],
    config: TrainConfig,
    spec: ContractSpec,
    model: ForecastModel,
) -> list[dict[str, float]]:
    """Per fold: the reward path's slope and centre, and the forecast's correlations."""
    out = []
    for fold in folds:
        forecast = forecast_values(
            market, fold, config.env, spec, capital=config.capital, forecast_model=model
        )
        path = reward_path(market, fold, forecast, 1.0)
        row: dict[str, float] = {"fold": fold.index, "slope": path.slope, "centre": path.centre}
        for part in ("train", "validation", "test"):
            lo, hi = getattr(fold, part)
            for h in _HORIZONS:
                rows, moves = next_moves(market, lo, hi, h)
                row[f"{part}_ic{h}"] = correlation(forecast[rows], moves)
        out.append(row)
    return out


def main() -> None:
    from fxstore.train.env.data import open_cache
    from fxstore.train.env.market import contract_spec
    from fxstore.train.evaluate.walkforward import make_folds

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="append", required=True, help="NAME=ROOT, repeatable")
    parser.add_argument("--profile", required=True, help="the profile whose folds to read")
    parser.add_argument("--name", required=True, help="results/<name>.json")
    args = parser.parse_args()
    config = profile_config(args.profile, device="cpu")
    stores = {}
    for entry in args.store:
        name, root = entry.split("=", 1)
        cache = open_cache(Path(root), config.symbol, config.featureset, "cpu")
        spec = contract_spec(config.symbol, config.env, cache.contracts)
        folds = make_folds(
            cache.market.trading_day, config.walkforward, max_target_horizon_bars=cache.horizon
        )
        stores[name] = {}
        for model in _MODELS:
            rows = fold_slopes(cache.market, folds, config, spec, model)
            stores[name][model] = rows
            ics = [r["train_ic1"] for r in rows]
            print(
                f"{name} {model}: slope {min(r['slope'] for r in rows):.4f}.."
                f"{max(r['slope'] for r in rows):.4f}, training IC1 {min(ics):.3f}..{max(ics):.3f} "
                f"({sum(i < 0 for i in ics)} of {len(ics)} folds below 0)"
            )
    path = write_result(args.name, {"profile": args.profile, "stores": stores})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
