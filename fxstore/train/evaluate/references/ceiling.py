"""The ``ceiling`` reference: what the fold's features could have traded of the planted signal.

On a synthetic market the oracle trades the planted signal itself; no policy that sees only
the fxcache's features can do that. The ceiling trades the part of the signal the features
carry: on the fold's training rows it fits the signal's least-squares (ridge) projection on
the features, ``signal ≈ ȳ + z · beta`` with the features standardised on those rows, its
penalty (from :data:`~fxstore.train.evaluate.references.ridge.RIDGE_LAMBDAS`) chosen by the
projection's correlation with the signal on the validation slice; then it trades that
projection exactly as the oracle trades the signal (the band rule, the band chosen on the
validation slice, the same costs:
:func:`~fxstore.train.evaluate.references.oracle.oracle_positions`). Its PnL answers "what
could a perfect linear model of these features have traded?"; its share of the oracle's says
how much of the learnable signal the feature set lets a model see. The test window's signal
is never read: positions there come from the features alone. On real data there is no
planted signal and the reports say the ceiling is absent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.train.env.market import Market
from fxstore.train.evaluate.references.base import ReferenceInputs, ReferencePositions
from fxstore.train.evaluate.references.oracle import oracle_positions
from fxstore.train.evaluate.references.ridge import RIDGE_LAMBDAS, correlation, fit_ridge_paths
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.gpu.xp import to_host

__all__ = ["CEILING", "project_signal"]

logger = logging.getLogger(__name__)

F64 = npt.NDArray[np.float64]


def project_signal(signal: F64, market: Market, fold: Fold) -> F64:
    """The planted `signal`'s ridge projection on the features, fitted on `fold`'s training
    rows, at every market row (rows outside the fit read only their own features).

    Parameters
    ----------
    signal : (n_rows,) float64
        The planted signal per market row; only its training and validation rows are read.

    Returns
    -------
    float64 ``(n_rows,)``; zeros when the training part has too few rows to fit.
    """
    features = to_host(market.features)
    lo, hi = fold.train
    n_features = features.shape[1]
    if hi - lo < n_features + 2:
        return np.zeros(market.n_rows)
    v_lo, v_hi = fold.validation
    lambdas = RIDGE_LAMBDAS if v_hi - v_lo >= 3 else RIDGE_LAMBDAS[:1]
    fit = fit_ridge_paths(features[lo:hi], signal[lo:hi, None], lambdas)
    chosen = 0
    if len(lambdas) > 1:
        val = features[v_lo:v_hi]
        scores = [correlation(fit.predict(val, k), signal[v_lo:v_hi]) for k in range(len(lambdas))]
        chosen = int(np.argmax(scores))
    return fit.predict(features, chosen)


@dataclass(frozen=True, slots=True)
class _Ceiling:
    """``ceiling`` as a reference: absent (None) without a planted signal."""

    name: str = "ceiling"
    needs_planted: bool = True
    needs_feature: str | None = None

    def positions(self, inputs: ReferenceInputs) -> ReferencePositions | None:
        if inputs.planted is None:
            return None
        projection = project_signal(inputs.planted, inputs.market, inputs.fold)
        test, train, _band = oracle_positions(
            projection,
            inputs.market,
            inputs.fold,
            inputs.env,
            inputs.spec,
            capital=inputs.capital,
        )
        return ReferencePositions(test, train)


CEILING: Final = _Ceiling()
