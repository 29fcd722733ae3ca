"""Ridge regression on standardised features: the fits every linear reader of the features
shares (``linear``, the ``ceiling`` reference, the agent's forecast), and ``linear``'s fitted
model.

Closed form, float64 numpy, one Gram matrix for every target and penalty:

    beta = (Zᵀ Z + λ n I)⁻¹ Zᵀ (y − ȳ),   prediction = ȳ + z · beta

with Z the features standardised by the fitted rows' mean and standard deviation (NaN and
infinities read as 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.train.gpu.xp import to_host

__all__ = [
    "RIDGE_LAMBDAS",
    "LinearModel",
    "RidgePaths",
    "correlation",
    "fit_ridge",
    "fit_ridge_paths",
]

#: Ridge penalties tried (per row: λ n on the standardised features' Gram matrix).
RIDGE_LAMBDAS: Final = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class LinearModel:
    """A fitted ridge model and the horizon, penalty and band chosen on validation."""

    mean: F64
    """``(n_features,)`` training means of the features."""
    scale: F64
    """``(n_features,)`` training standard deviations (1 where a feature is constant)."""
    beta: F64
    """``(n_features,)`` coefficients on the standardised features."""
    intercept: float
    """Mean training target (index points)."""
    horizon_bars: int
    """Bars of the move predicted."""
    ridge_lambda: float
    band: float
    """No-trade band in index points of predicted move; inf when the policy stands aside."""
    band_multiple: float
    """`band` in standard deviations of the training predictions (inf: standing aside)."""
    validation_sharpe: float
    """Per-bar annualised Sharpe of the chosen (horizon, λ, band) on validation (0: flat)."""

    def predict(self, features: npt.NDArray[np.floating]) -> F64:
        """Predicted move over the next :attr:`horizon_bars` bars (index points)."""
        out: F64 = self.intercept + _standardise(features, self.mean, self.scale) @ self.beta
        return out

    @property
    def choice(self) -> Mapping[str, float]:
        """What was chosen, for the run's records: horizon (bars), λ, the band (standard
        deviations of the training predictions; inf: flat) and its validation Sharpe."""
        return {
            "horizon_bars": float(self.horizon_bars),
            "ridge_lambda": self.ridge_lambda,
            "band_sd": self.band_multiple,
            "validation_sharpe": self.validation_sharpe,
        }


def _clean(features: npt.NDArray[np.floating]) -> F64:
    return np.nan_to_num(to_host(features).astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)


def _standardise(features: npt.NDArray[np.floating], mean: F64, scale: F64) -> F64:
    """`features` (NaN and infinities read as 0) less `mean`, over `scale`."""
    z: F64 = (_clean(features) - mean) / scale
    return z


@dataclass(frozen=True, slots=True, eq=False)
class RidgePaths:
    """Ridge fits of several targets at several penalties on one standardised design."""

    mean: F64
    """``(n_features,)`` means of the features."""
    scale: F64
    """``(n_features,)`` standard deviations (1 where a feature is constant)."""
    betas: F64
    """``(n_lambdas, n_features, n_targets)`` coefficients on the standardised features."""
    intercepts: F64
    """``(n_targets,)`` mean of each target."""
    covariance: F64
    """``(n_features, n_features)`` covariance of the standardised features (``Zᵀ Z / n``):
    a prediction's variance on the fitted rows is ``betaᵀ C beta``."""

    def standardise(self, features: npt.NDArray[np.floating]) -> F64:
        """`features` standardised as the fit's were (NaN and infinities read as 0)."""
        return _standardise(features, self.mean, self.scale)

    def predict(self, features: npt.NDArray[np.floating], k: int = 0, target: int = 0) -> F64:
        """The fit of column `target` at penalty number `k`, read on `features`."""
        out: F64 = self.intercepts[target] + self.standardise(features) @ self.betas[k, :, target]
        return out

    def predict_all(self, features: npt.NDArray[np.floating]) -> F64:
        """``(rows, penalty, target)``: every fit read on `features`."""
        out: F64 = self.intercepts + np.einsum(
            "nf,kft->nkt", self.standardise(features), self.betas
        )
        return out

    def spread(self, k: int = 0, target: int = 0) -> float:
        """Standard deviation of the fit of column `target` at penalty number `k` over the
        fitted rows (``sqrt(betaᵀ C beta)``); 0 for a fit that reads nothing."""
        beta = self.betas[k, :, target]
        return math.sqrt(max(float(beta @ self.covariance @ beta), 0.0))


def correlation(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> float:
    """Pearson correlation of `a` and `b`; -inf where either is constant or has fewer than 3
    values (so a choice by the largest never picks it)."""
    if len(a) < 3 or float(np.std(a)) == 0.0 or float(np.std(b)) == 0.0:
        return -math.inf
    return float(np.corrcoef(a, b)[0, 1])


def fit_ridge_paths(
    features: npt.NDArray[np.floating], targets: F64, ridge_lambdas: Sequence[float]
) -> RidgePaths:
    """Ridge fits of every column of `targets` on standardised `features`, at every penalty.

    One Gram matrix ``Zᵀ Z`` serves every fit; each penalty is one linear solve with the
    targets as its right-hand sides.

    Parameters
    ----------
    features : (n, n_features) float
    targets : (n, n_targets) float64
    ridge_lambdas
        Penalties per row (>= 0); the Gram matrix gets ``λ n`` on its diagonal.
    """
    x = _clean(features)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (x - mean) / scale
    intercepts = targets.mean(axis=0)
    gram = z.T @ z
    rhs = z.T @ (targets - intercepts)
    eye = np.eye(z.shape[1])
    betas = np.stack([np.linalg.solve(gram + lam * len(z) * eye, rhs) for lam in ridge_lambdas])
    return RidgePaths(mean, scale, betas, intercepts, gram / max(len(z), 1))


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
    fit = fit_ridge_paths(features, target[:, None], (ridge_lambda,))
    return fit.mean, fit.scale, fit.betas[0, :, 0], float(fit.intercepts[0])
