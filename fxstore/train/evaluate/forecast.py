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

With ``forecast_model = "blend"`` the agent sees instead the blend of every target horizon's
ridge (:func:`blend_forecast`): each horizon's prediction of its move (its mean move
included, as ``linear``'s), in standard deviations of its training predictions, averaged
over the horizons. No horizon is
chosen and the validation slice is not read: each horizon's penalty is the one whose
cross-fitted predictions (the same blocks as above) correlate best with that horizon's
moves on the training rows, and those cross-fitted predictions are the blend's training
rows. Choosing one horizon and penalty by the Sharpe of a band policy on a validation slice
of a few weeks is noisy where the signal is weak; the blend's out-of-sample correlation with
the moves was higher on most synthetic years (docs: findings).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, NamedTuple, get_args

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig, ForecastMode, ForecastModel
from fxstore.config._validate import validate_in_range
from fxstore.errors import InvalidInputError
from fxstore.train.env.market import F64, ContractSpec, Market
from fxstore.train.evaluate.references.linear import fit_linear, linear_horizons, training_moves
from fxstore.train.evaluate.references.ridge import (
    RIDGE_LAMBDAS,
    LinearModel,
    RidgePaths,
    correlation,
    fit_ridge_paths,
)
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.gpu.xp import to_host

__all__ = [
    "CROSS_FIT_BLOCKS",
    "FORECAST_COLUMN",
    "CrossFit",
    "RewardPath",
    "blend_forecast",
    "cross_fit",
    "fold_forecast",
    "forecast_market",
    "forecast_values",
    "reward_path",
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
    for a, b, fit in _block_fits(market, rows, moves, fold, horizon, (model.ridge_lambda,)):
        if fit is not None:  # else the block keeps the full fit's forecast
            out[a:b] = fit.predict(features[a:b]) / spread
    result: npt.NDArray[np.float32] = out.astype(np.float32)
    return result


def _block_fits(
    market: Market,
    rows: npt.NDArray[np.int64],
    moves: npt.NDArray[np.float64],
    fold: Fold,
    reach: int,
    ridge_lambdas: tuple[float, ...],
) -> Iterator[tuple[int, int, RidgePaths | None]]:
    """Each of the :data:`CROSS_FIT_BLOCKS` contiguous blocks ``[a, b)`` of the fold's
    training part, with the ridge fits of `moves` on the fitted `rows` outside it whose
    moves (`reach` bars long) do not reach into it; None where too few rows are left."""
    lo, hi = fold.train
    features = market.features
    edges = np.linspace(lo, hi, CROSS_FIT_BLOCKS + 1).round().astype(np.int64)
    for a, b in itertools.pairwise(int(e) for e in edges):
        if b <= a:
            continue
        keep = (rows + reach < a) | (rows >= b)  # no move reaches into the block
        if int(keep.sum()) < features.shape[1] + 2:
            yield a, b, None
        else:
            yield a, b, fit_ridge_paths(features[rows[keep]], moves[keep], ridge_lambdas)


@dataclass(frozen=True, slots=True, eq=False)
class CrossFit:
    """Every target horizon's ridge, at every penalty, on a fold's training rows, with its
    cross-fitted predictions there (:func:`cross_fit`)."""

    horizons: tuple[int, ...]
    lo: int
    """The training part's first row (row ``lo + i`` is ``crossed[i]``)."""
    rows: npt.NDArray[np.int64]
    """The fitted rows (those of the longest horizon's moves)."""
    moves: npt.NDArray[np.float64]
    """``(rows, horizon)`` their moves (index points)."""
    full: RidgePaths
    """The fits on every training row."""
    crossed: npt.NDArray[np.float64]
    """``(training rows, penalty, horizon)`` each block's predictions by the fits on the
    other blocks' rows."""

    def correlations(self) -> npt.NDArray[np.float64]:
        """``(penalty, horizon)`` correlation of the cross-fitted predictions with the moves
        over the fitted rows."""
        at = self.rows - self.lo
        n_penalties, n_horizons = self.crossed.shape[1:]
        out = np.empty((n_penalties, n_horizons))
        for k in range(n_penalties):
            for h in range(n_horizons):
                out[k, h] = correlation(self.crossed[at, k, h], self.moves[:, h])
        return out


def cross_fit(market: Market, fold: Fold) -> CrossFit | None:
    """Every target horizon (:func:`linear_horizons`) and penalty (:data:`RIDGE_LAMBDAS`)
    fitted on the fold's training rows, and cross-fitted there: each of the
    :data:`CROSS_FIT_BLOCKS` blocks is predicted by the fits on the other blocks' rows whose
    moves do not reach into it (the longest horizon's reach), or by the fits on every row
    where too few are left. Reads the training part only; None where it has too few rows to
    fit."""
    horizons = linear_horizons(market)
    lo, hi = fold.train
    rows, moves = training_moves(market, lo, hi, horizons)
    features = market.features
    n_features = features.shape[1]
    if len(rows) < n_features + 2:
        return None
    full = fit_ridge_paths(features[rows], moves, RIDGE_LAMBDAS)
    crossed = np.empty((hi - lo, len(RIDGE_LAMBDAS), len(horizons)))
    for a, b, fit in _block_fits(market, rows, moves, fold, max(horizons), RIDGE_LAMBDAS):
        crossed[a - lo : b - lo] = (full if fit is None else fit).predict_all(features[a:b])
    return CrossFit(tuple(horizons), lo, rows, moves, full, crossed)


def blend_forecast(market: Market, fold: Fold) -> npt.NDArray[np.float32]:
    """The fold's blend of every target horizon's ridge forecast at every market row (host,
    float32); see the module docstring.

    A horizon keeps the penalty whose cross-fitted predictions (:func:`cross_fit`) correlate
    best with its moves over the training rows; those predictions are its training rows',
    the fit on every training row gives the others'. Each horizon's prediction (the fit's
    mean move plus its read of the features) is divided by the standard deviation of its
    full fit's predictions on the training rows; the blend is their mean, divided by its
    own standard deviation on the training rows. Reads the training part only; zeros where
    it has too few rows to fit.
    """
    fit = cross_fit(market, fold)
    if fit is None:
        return np.zeros(market.n_rows, dtype=np.float32)  # nothing to fit on
    full, lo = fit.full, fit.lo
    hi = lo + len(fit.crossed)
    scores = fit.correlations()
    z = full.standardise(market.features)
    parts = []
    for h in range(len(fit.horizons)):
        k = int(np.argmax(scores[:, h]))
        spread = full.spread(k, h)
        if spread <= 0.0:
            continue  # this horizon's fit says nothing
        part = (full.intercepts[h] + z @ full.betas[k, :, h]) / spread
        part[lo:hi] = fit.crossed[:, k, h] / spread
        parts.append(part)
    if not parts:
        return np.zeros(market.n_rows, dtype=np.float32)
    blend = np.mean(parts, axis=0)
    scale = float(np.std(blend[fit.rows]))
    if scale <= 0.0:
        return np.zeros(market.n_rows, dtype=np.float32)
    result: npt.NDArray[np.float32] = (blend / scale).astype(np.float32)
    return result


def forecast_values(
    market: Market,
    fold: Fold,
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
    model: LinearModel | None = None,
    forecast_model: ForecastModel = "linear",
) -> npt.NDArray[np.float32]:
    """The fold's forecast of `forecast_model` at every market row (host, float32): "linear",
    :func:`fold_forecast`; "blend", :func:`blend_forecast`."""
    if forecast_model not in get_args(ForecastModel):
        raise InvalidInputError(
            f"`forecast_model` must be one of {', '.join(get_args(ForecastModel))}, was "
            f"{forecast_model!r}."
        )
    if forecast_model == "blend":
        return blend_forecast(market, fold)
    return fold_forecast(market, fold, env_config, spec, capital=capital, model=model)


def forecast_market(
    market: Market, mode: ForecastMode, values: npt.NDArray[np.float32] | None
) -> Market:
    """`market` as the fold's agent sees it: with the fold's forecast `values`
    (:func:`forecast_values`) as a column beside the features (``"input"``), in their place
    (``"only"``), or unchanged (``"off"``, where `values` may be None)."""
    if mode not in get_args(ForecastMode):
        raise InvalidInputError(
            f"`forecast` must be one of {', '.join(get_args(ForecastMode))}, was {mode!r}."
        )
    if mode == "off":
        return market
    values = _checked_forecast(market, values)
    xp = market.xp
    column = xp.asarray(values.reshape(-1, 1))
    names: tuple[str, ...] = (FORECAST_COLUMN,)
    features = column
    if mode == "input":
        features = xp.ascontiguousarray(xp.concatenate([market.features, column], axis=1))
        names = (*market.feature_names, FORECAST_COLUMN)
    return dataclasses.replace(market, features=features, feature_names=names)


def _checked_forecast(
    market: Market, values: npt.NDArray[np.float32] | None
) -> npt.NDArray[np.float32]:
    """`values`, refused unless they are one forecast per market row."""
    if values is None or values.shape != (market.n_rows,):
        shape = None if values is None else values.shape
        raise InvalidInputError(
            f"the forecast must have one value per market row ({market.n_rows}), was {shape}."
        )
    return values


class RewardPath(NamedTuple):
    """The close path a fold's training rewards book (:func:`reward_path`)."""

    close: F64
    """float64 ``(n_rows,)`` on the market's module: the real closes outside the training
    part; inside it, the path of the mixed moves."""
    slope: float
    """Index points of next-bar move per standard deviation of the forecast, fitted on the
    training rows."""
    centre: float
    """The forecast's mean over the training rows (its expected move there is 0)."""


def reward_path(
    market: Market, fold: Fold, forecast: npt.NDArray[np.float32], weight: float
) -> RewardPath:
    """The close path whose moves a fold's training rewards book with ``reward_forecast =
    weight``: inside the training part each bar's move is ``(1 - weight) * the move that
    happened + weight * slope * (forecast - centre)``, where `slope` is the least-squares
    slope of the next bar's move on the forecast over the training rows and `centre` the
    forecast's mean there.

    The expected move is the forecast's variation only: the training part's drift (the mean
    move, which a forecast's intercept carries) is not rewarded, as it says nothing of the
    next window's.

    On the training rows the forecast is cross-fitted, so the slope is what the forecast is
    worth out of sample, not what a fit on its own rows claims. A bar's move is mostly noise
    where the signal is weak (at an IC of 0.05, 0.25% of its variance is the signal's): the
    expected move keeps the signal's part and drops the noise, so the agent learns the value
    of trading the forecast, net of costs, from far fewer steps. Rows across a roll book no
    move (:func:`~fxstore.train.env.market.evaluate_positions`), so they are left out of the
    slope. Reads the training part only; the closes elsewhere (validation, test) are the
    real ones, and nothing but the training environment books this path.
    """
    validate_in_range("reward_forecast", weight, 0.0, 1.0)
    forecast = _checked_forecast(market, forecast)
    lo, hi = fold.train
    rows, next_moves = training_moves(market, lo, hi, (1,))  # within one contract
    moves = next_moves[:, 0]
    centre = float(np.mean(forecast[rows], dtype=np.float64)) if len(rows) else 0.0
    f = forecast[rows].astype(np.float64) - centre
    power = float(f @ f)
    slope = float(f @ (moves - np.mean(moves))) / power if power > 0.0 else 0.0
    close = to_host(market.close).astype(np.float64)
    move = np.diff(close[lo:hi])
    expected = slope * (forecast[lo : hi - 1].astype(np.float64) - centre)
    mixed = (1.0 - weight) * move + weight * expected
    path = close.copy()
    path[lo + 1 : hi] = close[lo] + np.cumsum(mixed)
    return RewardPath(market.xp.asarray(path), slope, centre)
