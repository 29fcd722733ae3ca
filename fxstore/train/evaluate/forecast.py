"""The supervised forecast the agent can learn from: the ``linear`` reference's, per fold.

With ``forecast = "input"`` (or ``"only"``) in a profile, each fold's agent sees one more
observation column (or that column alone, beside the position it holds): the move the
fold's ``linear`` model predicts, in standard deviations of its predictions on the training
rows. The model is the one the ``linear`` reference trades: a ridge fitted on the fold's
training rows, its horizon and penalty chosen on the validation slice
(:func:`~fxstore.train.evaluate.references.linear.fit_linear`); where nothing beat standing
aside there, its fallback (the horizon nearest four bars at the strongest penalty).

On the validation slice and the test window the forecast comes from that fit, which saw
neither. On the training rows it is cross-fitted: the training part is cut into
:data:`CROSS_FIT_BLOCKS` contiguous blocks and each block's forecast comes from a ridge (the
same horizon and penalty) fitted on the other blocks' rows only, leaving out the rows whose
move reaches into the block. An agent trained on in-sample forecasts would learn to trust
them more than they deserve out of sample: a ridge's forecast on its own rows carries the
noise it fitted.

The forecast is standardised with the fitted model's spread on the training rows, so the
same threshold means the same confidence in every fold. The test window is never read
before its forecast is made (the fit reads training and validation rows only, tested).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Final, get_args

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig, ForecastMode
from fxstore.errors import InvalidInputError
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.references.linear import (
    LinearModel,
    fit_linear,
    fit_ridge_paths,
    linear_horizons,
    training_moves,
)
from fxstore.train.evaluate.walkforward import Fold

__all__ = [
    "CROSS_FIT_BLOCKS",
    "FORECAST_COLUMN",
    "fold_forecast",
    "forecast_market",
]

#: Contiguous blocks of the training part whose forecasts are cross-fitted.
CROSS_FIT_BLOCKS: Final = 5

#: The observation column's name.
FORECAST_COLUMN: Final = "forecast"


def fold_forecast(
    market: Market,
    fold: Fold,
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
    model: LinearModel | None = None,
) -> npt.NDArray[np.float32]:
    """The fold's standardised ``linear`` forecast at every market row (host, float32).

    Training rows get cross-fitted forecasts; every other row the full training fit's.
    Zeros when the fold has too few training rows to fit (the model stands aside with a
    zero forecast). `model`: the fold's ``linear`` model when it is already fitted.
    """
    if model is None:
        model = fit_linear(market, fold, env_config, spec, capital=capital)
    horizons = linear_horizons(market)
    features = market.features
    if not math.isfinite(model.ridge_lambda) or model.horizon_bars not in horizons:
        return np.zeros(market.n_rows, dtype=np.float32)  # nothing was fitted
    horizon = model.horizon_bars
    lo, hi = fold.train
    rows, moves = training_moves(market, lo, hi, horizons)  # the rows linear fitted
    moves = moves[:, [horizons.index(horizon)]]
    spread = float(np.std(model.predict(features[rows])))
    if spread <= 0.0:
        return np.zeros(market.n_rows, dtype=np.float32)
    out = model.predict(features) / spread
    edges = np.linspace(lo, hi, CROSS_FIT_BLOCKS + 1).round().astype(np.int64)
    for a, b in itertools.pairwise(int(e) for e in edges):
        keep = (rows + horizon < a) | (rows >= b)  # no move reaches into the block
        if b <= a or int(keep.sum()) < features.shape[1] + 2:
            continue  # too few rows: the block keeps the full fit's forecast
        fit = fit_ridge_paths(features[rows[keep]], moves[keep], (model.ridge_lambda,))
        out[a:b] = fit.predict(features[a:b]) / spread
    result: npt.NDArray[np.float32] = out.astype(np.float32)
    return result


def forecast_market(
    market: Market,
    fold: Fold,
    mode: ForecastMode,
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
    model: LinearModel | None = None,
) -> Market:
    """`market` as the fold's agent sees it: with the forecast column beside the features
    (``"input"``), in their place (``"only"``), or unchanged (``"off"``)."""
    if mode not in get_args(ForecastMode):
        raise InvalidInputError(
            f"`forecast` must be one of {', '.join(get_args(ForecastMode))}, was {mode!r}."
        )
    if mode == "off":
        return market
    xp = market.xp
    column = xp.asarray(
        fold_forecast(market, fold, env_config, spec, capital=capital, model=model).reshape(-1, 1)
    )
    names: tuple[str, ...] = (FORECAST_COLUMN,)
    features = column
    if mode == "input":
        features = xp.ascontiguousarray(xp.concatenate([market.features, column], axis=1))
        names = (*market.feature_names, FORECAST_COLUMN)
    return dataclasses.replace(market, features=features, feature_names=names)
