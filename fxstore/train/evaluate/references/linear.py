"""The ``linear`` reference: what a researcher would try first, fitted per walk-forward fold.

On the fold's training rows a ridge regression predicts the close-to-close move over the next
:data:`TARGET_HORIZON_BARS` bars (index points) from the features at a bar's close; rows whose
next bars open a new contract (a roll) or lie outside the training part are not fitted.
Features are standardised with the training rows' mean and standard deviation. Closed
form, float64 numpy:

    beta = (Zᵀ Z + λ n I)⁻¹ Zᵀ (y − ȳ),   prediction = ȳ + z · beta

The policy holds +1 contract when the prediction exceeds a no-trade band b, −1 when it is
below −b, and keeps what it holds in between (so a band saves costs on weak predictions).
λ (from :data:`RIDGE_LAMBDAS`) and b (multiples :data:`BAND_MULTIPLES` of the training
predictions' standard deviation) are chosen together by the per-bar Sharpe of that policy on
the validation slice, booked with the fold's costs, exactly as the agent's checkpoints are;
as for the agent, when none beats standing aside (Sharpe 0) the policy is flat. The test
window is never read before the positions are computed from its features (tested).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig
from fxstore.train.env.market import ContractSpec, Market, evaluate_positions
from fxstore.train.evaluate.metrics import sharpe_per_bar
from fxstore.train.evaluate.references.base import ReferenceInputs, ReferencePositions
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.gpu.xp import to_host

__all__ = [
    "BAND_MULTIPLES",
    "LINEAR",
    "RIDGE_LAMBDAS",
    "TARGET_HORIZON_BARS",
    "LinearModel",
    "band_positions",
    "choose_band",
    "fit_linear",
    "fit_ridge",
    "linear_positions",
]

logger = logging.getLogger(__name__)

#: Ridge penalties tried (per row: λ n on the standardised features' Gram matrix).
RIDGE_LAMBDAS: Final = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
#: No-trade bands tried, in standard deviations of the training predictions.
BAND_MULTIPLES: Final = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)

#: Bars of the move the ridge predicts (the default fxcache's ``fwd_4`` horizon): a
#: persistent signal's edge stands out of the noise far better over several bars than over
#: one (synthetic IC 0.1 over one bar is about 0.2 over four), and a position the band
#: rule holds for several bars is paid by several bars' moves.
TARGET_HORIZON_BARS: Final = 4

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class LinearModel:
    """A fitted ridge model and the band chosen on validation."""

    mean: F64
    """``(n_features,)`` training means of the features."""
    scale: F64
    """``(n_features,)`` training standard deviations (1 where a feature is constant)."""
    beta: F64
    """``(n_features,)`` coefficients on the standardised features."""
    intercept: float
    """Mean training target (index points)."""
    ridge_lambda: float
    band: float
    """No-trade band in index points of predicted move; inf when the policy stands aside."""
    validation_sharpe: float
    """Per-bar annualised Sharpe of the chosen (λ, band) on validation (0: flat)."""

    def predict(self, features: npt.NDArray[np.floating]) -> F64:
        """Predicted move over the next :data:`TARGET_HORIZON_BARS` bars (index points)."""
        z = (_clean(features) - self.mean) / self.scale
        out: F64 = self.intercept + z @ self.beta
        return out


def _clean(features: npt.NDArray[np.floating]) -> F64:
    return np.nan_to_num(to_host(features).astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)


def fit_ridge(
    features: npt.NDArray[np.floating], target: F64, ridge_lambda: float
) -> tuple[F64, F64, F64, float]:
    """Ridge fit of `target` on standardised `features`: (mean, scale, beta, intercept).

    Parameters
    ----------
    features : (n, n_features) float
    target : (n,) float64
    ridge_lambda
        Penalty per row (>= 0); the Gram matrix gets ``λ n`` on its diagonal.
    """
    x = _clean(features)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (x - mean) / scale
    intercept = float(target.mean())
    gram = z.T @ z + ridge_lambda * len(z) * np.eye(z.shape[1])
    beta = np.linalg.solve(gram, z.T @ (target - intercept))
    return mean, scale, beta, intercept


def band_positions(prediction: F64, band: float) -> F64:
    """+1 above `band`, −1 below −`band`, else the position held before (0 at the start)."""
    signal = np.where(prediction > band, 1.0, np.where(prediction < -band, -1.0, np.nan))
    index = np.where(np.isfinite(signal), np.arange(len(signal)), -1)
    last = np.maximum.accumulate(index)
    out: F64 = np.where(last >= 0, signal[np.maximum(last, 0)], 0.0)
    return out


def _training_rows(
    market: Market, lo: int, hi: int, horizon_bars: int = 1
) -> tuple[npt.NDArray[np.int64], F64]:
    """Rows t in [lo, hi - h) whose next h bars are the same contract, and the move
    ``close[t + h] - close[t]`` (h = `horizon_bars`)."""
    close = to_host(market.close)
    rolls = np.cumsum(to_host(market.is_roll).astype(np.int64))
    rows = np.arange(lo, max(lo, hi - horizon_bars))
    rows = rows[rolls[rows + horizon_bars] == rolls[rows]]
    return rows, close[rows + horizon_bars] - close[rows]


def choose_band(
    market: Market,
    prediction: F64,
    spread: float,
    window: tuple[int, int],
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
) -> tuple[float, float]:
    """The band (multiples :data:`BAND_MULTIPLES` of `spread`) whose band policy over
    `prediction` scores the best per-bar Sharpe on rows `window`: (band, Sharpe).

    A flat book scores 0; ``(inf, 0.0)`` when no band beats standing aside.
    """
    lo, hi = window
    best_band, best_score = math.inf, 0.0
    for multiple in BAND_MULTIPLES:
        band = multiple * spread
        book = evaluate_positions(
            market, band_positions(prediction, band), lo, hi, env_config, spec
        )
        sharpe = sharpe_per_bar(
            to_host(book.pnl), bars_per_day=market.bars_per_day, capital=capital
        )
        score = sharpe if math.isfinite(sharpe) else 0.0
        if score > best_score:
            best_band, best_score = band, score
    return best_band, best_score


def fit_linear(
    market: Market,
    fold: Fold,
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
) -> LinearModel:
    """Fit the ridge on the fold's training rows; choose λ and the band on its validation.

    Reads features and closes of the training part and the validation slice only. Without a
    validation slice the smallest λ and no band are kept.
    """
    rows, target = _training_rows(market, *fold.train, TARGET_HORIZON_BARS)
    features = market.features
    n_features = features.shape[1]
    if len(rows) < n_features + 2:  # nothing to fit on: stand aside
        zero = np.zeros(n_features)
        return LinearModel(zero, np.ones(n_features), zero, 0.0, math.nan, math.inf, 0.0)
    val_lo, val_hi = fold.validation
    has_validation = val_hi - val_lo >= 2
    best: LinearModel | None = None
    for ridge_lambda in RIDGE_LAMBDAS if has_validation else RIDGE_LAMBDAS[:1]:
        mean, scale, beta, intercept = fit_ridge(features[rows], target, ridge_lambda)
        model = LinearModel(mean, scale, beta, intercept, ridge_lambda, 0.0, math.nan)
        if not has_validation:
            return model
        spread = float(np.std(model.predict(features[rows])))
        prediction = model.predict(features[val_lo:val_hi])
        band, score = choose_band(
            market, prediction, spread, fold.validation, env_config, spec, capital=capital
        )
        if score > (best.validation_sharpe if best is not None else 0.0):
            best = LinearModel(mean, scale, beta, intercept, ridge_lambda, band, score)
    if best is None:  # nothing beat standing aside on validation
        mean, scale, beta, intercept = fit_ridge(features[rows], target, RIDGE_LAMBDAS[-1])
        best = LinearModel(mean, scale, beta, intercept, RIDGE_LAMBDAS[-1], math.inf, 0.0)
    logger.debug(
        "fold %d linear: lambda %g band %g validation Sharpe %.2f",
        fold.index,
        best.ridge_lambda,
        best.band,
        best.validation_sharpe,
    )
    return best


def linear_positions(model: LinearModel, market: Market, lo: int, hi: int) -> F64:
    """The positions `model` holds over rows ``[lo, hi)`` (flat with an infinite band)."""
    if not math.isfinite(model.band):
        return np.zeros(hi - lo)
    return band_positions(model.predict(market.features[lo:hi]), model.band)


@dataclass(frozen=True, slots=True)
class _Linear:
    """``linear`` as a reference: fitted on the fold, scored in and out of sample."""

    name: str = "linear"
    needs_planted: bool = False

    def positions(self, inputs: ReferenceInputs) -> ReferencePositions:
        model = fit_linear(
            inputs.market, inputs.fold, inputs.env, inputs.spec, capital=inputs.capital
        )
        return ReferencePositions(
            linear_positions(model, inputs.market, *inputs.fold.test),
            linear_positions(model, inputs.market, *inputs.fold.train),
        )


LINEAR: Final = _Linear()
