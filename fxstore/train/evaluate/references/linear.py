"""The ``linear`` reference: what a researcher would try first, fitted per walk-forward fold.

On the fold's training rows a ridge regression predicts, from the features at a bar's close,
the close-to-close move over the next h bars (index points), for every horizon h of the
fxcache's ``forward_return`` targets (:attr:`~fxstore.train.env.market.Market.
target_horizons`; the default set's 1, 2, 4, 8 and 16 bars) at once: the move the target
``fwd_h`` measures in volatility units, here in the points a position earns. Rows whose
next bars open a new contract (a roll) or lie outside the training part are not fitted
(the rows are those of the longest horizon, so every horizon shares them). Features are
standardised with the training rows' mean and standard deviation. Closed form, float64
numpy, one Gram matrix for every horizon and penalty (the horizons are its right-hand
sides):

    beta = (Zᵀ Z + λ n I)⁻¹ Zᵀ (y − ȳ),   prediction = ȳ + z · beta

The policy holds +1 contract when the prediction exceeds a no-trade band b, −1 when it is
below −b, and keeps what it holds in between (so a band saves costs on weak predictions).
The horizon h, λ (from :data:`~fxstore.train.evaluate.references.ridge.RIDGE_LAMBDAS`)
and b (multiples :data:`BAND_MULTIPLES` of the training predictions' standard deviation)
are chosen together by the per-bar Sharpe of that
policy's PnL net of costs on the validation slice, booked with the fold's costs, exactly as
the agent's checkpoints are chosen; as for the agent, when none beats standing aside
(Sharpe 0) the policy is flat. The test window is never read before the positions are
computed from its features (tested). The choice is recorded per fold
(:attr:`~fxstore.train.evaluate.references.ridge.LinearModel.choice`, the run's
``metrics.json`` and notes). The ridge fits and the fitted model are
:mod:`fxstore.train.evaluate.references.ridge`'s.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig
from fxstore.train.env.market import ContractSpec, Market, evaluate_positions
from fxstore.train.evaluate.metrics import sharpe_per_bar
from fxstore.train.evaluate.references.base import ReferenceInputs, ReferencePositions
from fxstore.train.evaluate.references.ridge import (
    RIDGE_LAMBDAS,
    LinearModel,
    RidgePaths,
    fit_ridge_paths,
)
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.gpu.xp import to_host

__all__ = [
    "BAND_MULTIPLES",
    "DEFAULT_HORIZONS_BARS",
    "FALLBACK_HORIZON_BARS",
    "LINEAR",
    "band_positions",
    "choose_band",
    "fit_linear",
    "linear_horizons",
    "linear_positions",
    "training_moves",
]

logger = logging.getLogger(__name__)

#: Horizons of a market that records none (one made in code): the default feature set's
#: targets (``fxstore.features.definitions.DEFAULT_TARGET_HORIZONS``, which the trainer's
#: rooms do not import; a test holds them equal).
DEFAULT_HORIZONS_BARS: Final = (1, 2, 4, 8, 16)

#: No-trade bands tried, in standard deviations of the training predictions.
BAND_MULTIPLES: Final = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)

#: The horizon (bars) fitted when nothing can be chosen (no validation slice, or none beats
#: standing aside): the one of the market's horizons nearest to it. Four bars: a persistent
#: signal's edge stands out of the noise far better over several bars than over one
#: (synthetic IC 0.1 over one bar is about 0.2 over four).
FALLBACK_HORIZON_BARS: Final = 4

F64 = npt.NDArray[np.float64]


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
    rows, moves = training_moves(market, lo, hi, (horizon_bars,))
    return rows, moves[:, 0]


def training_moves(
    market: Market, lo: int, hi: int, horizons: Sequence[int]
) -> tuple[npt.NDArray[np.int64], F64]:
    """Rows t in [lo, hi - H) whose next H bars are the same contract (H the longest of
    `horizons`), and ``(n_rows, n_horizons)`` moves ``close[t + h] - close[t]``."""
    close = to_host(market.close)
    rolls = np.cumsum(to_host(market.is_roll).astype(np.int64))
    longest = max(horizons)
    rows = np.arange(lo, max(lo, hi - longest))
    rows = rows[rolls[rows + longest] == rolls[rows]]
    moves = np.stack([close[rows + h] - close[rows] for h in horizons], axis=1)
    return rows, moves


def linear_horizons(market: Market) -> tuple[int, ...]:
    """The horizons ``linear`` fits on `market`: its fxcache's targets', or the default
    set's (:data:`DEFAULT_HORIZONS_BARS`) for a market
    without any."""
    return market.target_horizons or DEFAULT_HORIZONS_BARS


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


def _window(market: Market, lo: int, hi: int) -> Market:
    """Rows ``[lo, hi)`` of `market` as a market of their own (views). A window booked on it
    books the same PnL (booking reads no row outside the window), and its costs are computed
    over these rows only, not the whole market's, once per band tried."""
    return market.rows(lo, hi)


def _stand_aside(n_features: int, horizon_bars: int) -> LinearModel:
    zero = np.zeros(n_features)
    ones = np.ones(n_features)
    return LinearModel(zero, ones, zero, 0.0, horizon_bars, math.nan, math.inf, math.inf, 0.0)


def _fallback(horizons: Sequence[int]) -> int:
    """The index of the horizon nearest :data:`FALLBACK_HORIZON_BARS` (the shorter on a tie)."""
    return min(range(len(horizons)), key=lambda i: (abs(horizons[i] - FALLBACK_HORIZON_BARS), i))


def _choose(
    fit: RidgePaths,
    horizons: Sequence[int],
    validation: Market,
    env_config: EnvConfig,
    spec: ContractSpec,
    capital: float,
) -> LinearModel | None:
    """The (horizon, λ, band) of `fit` whose band policy scores the best per-bar Sharpe on
    `validation` (the validation slice's rows), in the order horizon, λ, band (the first of
    equals wins); None when none beats standing aside."""
    z = fit.standardise(validation.features)
    best: LinearModel | None = None
    for h, horizon in enumerate(horizons):
        for k, ridge_lambda in enumerate(RIDGE_LAMBDAS):
            beta, intercept = fit.betas[k, :, h], float(fit.intercepts[h])
            spread = fit.spread(k, h)
            band, score = choose_band(
                validation,
                intercept + z @ beta,
                spread,
                (0, validation.n_rows),
                env_config,
                spec,
                capital=capital,
            )
            if score > (best.validation_sharpe if best is not None else 0.0):
                multiple = band / spread if spread > 0 else 0.0
                best = LinearModel(
                    fit.mean,
                    fit.scale,
                    beta,
                    intercept,
                    horizon,
                    ridge_lambda,
                    band,
                    multiple,
                    score,
                )
    return best


def fit_linear(
    market: Market,
    fold: Fold,
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
) -> LinearModel:
    """Fit the ridge on the fold's training rows at every horizon of
    :func:`linear_horizons`; choose the horizon, λ and the band on its validation slice.

    Reads features and closes of the training part and the validation slice only. Without a
    validation slice the horizon nearest :data:`FALLBACK_HORIZON_BARS`, the smallest λ and
    no band are kept; when nothing beats standing aside on validation, the policy is flat.
    """
    horizons = linear_horizons(market)
    rows, moves = training_moves(market, *fold.train, horizons)
    features = market.features
    n_features = features.shape[1]
    fallback = _fallback(horizons)
    if len(rows) < n_features + 2:  # nothing to fit on: stand aside
        return _stand_aside(n_features, horizons[fallback])
    val_lo, val_hi = fold.validation
    if val_hi - val_lo < 2:
        fit = fit_ridge_paths(features[rows], moves[:, [fallback]], RIDGE_LAMBDAS[:1])
        beta, intercept = fit.betas[0, :, 0], float(fit.intercepts[0])
        lam = RIDGE_LAMBDAS[0]
        return LinearModel(
            fit.mean, fit.scale, beta, intercept, horizons[fallback], lam, 0.0, 0.0, math.nan
        )
    fit = fit_ridge_paths(features[rows], moves, RIDGE_LAMBDAS)
    best = _choose(fit, horizons, _window(market, val_lo, val_hi), env_config, spec, capital)
    if best is None:  # nothing beat standing aside on validation
        beta, intercept = fit.betas[-1, :, fallback], float(fit.intercepts[fallback])
        lam, flat = RIDGE_LAMBDAS[-1], math.inf
        best = LinearModel(
            fit.mean, fit.scale, beta, intercept, horizons[fallback], lam, flat, flat, 0.0
        )
    logger.debug(
        "fold %d linear: horizon %d bars, lambda %g, band %g sd, validation Sharpe %.2f",
        fold.index,
        best.horizon_bars,
        best.ridge_lambda,
        best.band_multiple,
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
    needs_feature: str | None = None

    def positions(self, inputs: ReferenceInputs) -> ReferencePositions:
        model = inputs.linear
        if model is None:
            model = fit_linear(
                inputs.market, inputs.fold, inputs.env, inputs.spec, capital=inputs.capital
            )
        return ReferencePositions(
            linear_positions(model, inputs.market, *inputs.fold.test),
            linear_positions(model, inputs.market, *inputs.fold.train),
            model.choice,
        )


LINEAR: Final = _Linear()
