"""Is a Sharpe ratio more than chance? Probabilistic and deflated Sharpe ratios.

Bailey & López de Prado, "The Sharpe Ratio Efficient Frontier" (Journal of Risk, 2012) and
"The Deflated Sharpe Ratio" (Journal of Portfolio Management, 2014). All Sharpe ratios here
are per observation (per trading day, *not* annualised) unless a name says ``annual``:

- PSR(SR*) = Φ( (SR − SR*) · √(T − 1) / √(1 − γ₃ · SR + (γ₄ − 1) / 4 · SR²) ), the
  probability that the true Sharpe exceeds SR* given the estimate SR from T returns with
  skewness γ₃ and kurtosis γ₄ (3 for normal returns; *not* excess kurtosis). Its p-value for
  "the true Sharpe is <= SR*" is 1 − PSR.
- Expected maximum Sharpe of N independent trials with no skill whose Sharpe estimates have
  variance V: SR₀ = √V · ((1 − γ) Φ⁻¹(1 − 1/N) + γ Φ⁻¹(1 − 1/(N e))), γ ≈ 0.5772 the
  Euler-Mascheroni constant (SR₀ = 0 for N = 1).
- DSR = PSR(SR₀): the PSR against the best Sharpe that luck alone would have given after N
  trials. With one trial DSR = PSR(0).

Sample moments: SR = mean / std (ddof 1, as :mod:`fxstore.train.evaluate.metrics`), γ₃ and γ₄ the
biased (ddof 0) standardised third and fourth moments, as in the papers' code.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.errors import InvalidInputError

__all__ = [
    "SharpeSignificance",
    "deflated_sharpe_ratio",
    "expected_max_sharpe",
    "probabilistic_sharpe_ratio",
    "return_moments",
    "sharpe_significance",
]

logger = logging.getLogger(__name__)

EULER_GAMMA: Final = 0.5772156649015329
TRADING_DAYS_PER_YEAR: Final = 252
_NORMAL: Final = NormalDist()


def return_moments(returns: npt.NDArray[np.float64]) -> tuple[float, float, float]:
    """(Sharpe per observation, skewness, kurtosis) of `returns`; NaN without variance.

    Parameters
    ----------
    returns : (n,) float
        Returns (or PnL: the three numbers do not depend on the scale), n >= 2.
    """
    x = np.asarray(returns, dtype=np.float64)
    if x.ndim != 1 or len(x) < 2:
        return math.nan, math.nan, math.nan
    centred = x - x.mean()
    var0 = float(np.mean(centred**2))
    if var0 <= 1e-24 * max(float(np.max(np.abs(x))), 1e-300) ** 2:
        return math.nan, math.nan, math.nan
    sharpe = float(x.mean() / x.std(ddof=1))
    skew = float(np.mean(centred**3)) / var0**1.5
    kurtosis = float(np.mean(centred**4)) / var0**2
    return sharpe, skew, kurtosis


def probabilistic_sharpe_ratio(
    sharpe: float,
    n_obs: int,
    *,
    benchmark: float = 0.0,
    skew: float = 0.0,
    kurtosis: float = 3.0,
) -> float:
    """PSR: the probability that the true Sharpe exceeds `benchmark` (module docstring).

    Parameters
    ----------
    sharpe, benchmark
        Estimated and benchmark Sharpe ratios per observation (not annualised).
    n_obs
        Returns the estimate was made from (>= 2).
    skew, kurtosis
        Of the returns; kurtosis 3 is normal (not excess kurtosis).

    Returns
    -------
    float
        In [0, 1]; NaN when `sharpe` is NaN or the variance term is not positive.
    """
    if isinstance(n_obs, bool) or not isinstance(n_obs, int | np.integer) or n_obs < 2:
        raise InvalidInputError(f"`n_obs` must be an int >= 2, was {n_obs!r}.")
    if not all(math.isfinite(v) for v in (sharpe, benchmark, skew, kurtosis)):
        return math.nan
    spread = 1.0 - skew * sharpe + (kurtosis - 1.0) / 4.0 * sharpe * sharpe
    if spread <= 0.0:
        return math.nan
    return _NORMAL.cdf((sharpe - benchmark) * math.sqrt(n_obs - 1) / math.sqrt(spread))


def expected_max_sharpe(n_trials: int, sharpe_variance: float, *, mean: float = 0.0) -> float:
    """Expected maximum Sharpe of `n_trials` unskilled trials (module docstring), per obs.

    Parameters
    ----------
    n_trials
        Independent trials made (>= 1); 1 gives `mean`.
    sharpe_variance
        Variance of the trials' Sharpe estimates (per-observation units, >= 0).
    mean
        Mean Sharpe of the trials under the null (0: no skill).
    """
    if isinstance(n_trials, bool) or not isinstance(n_trials, int | np.integer) or n_trials < 1:
        raise InvalidInputError(f"`n_trials` must be an int >= 1, was {n_trials!r}.")
    if not math.isfinite(sharpe_variance) or sharpe_variance < 0:
        raise InvalidInputError(f"`sharpe_variance` must be >= 0, was {sharpe_variance!r}.")
    if n_trials == 1:
        return mean
    z = (1.0 - EULER_GAMMA) * _NORMAL.inv_cdf(1.0 - 1.0 / n_trials) + EULER_GAMMA * (
        _NORMAL.inv_cdf(1.0 - 1.0 / (n_trials * math.e))
    )
    return mean + math.sqrt(sharpe_variance) * z


def deflated_sharpe_ratio(
    sharpe: float,
    n_obs: int,
    *,
    n_trials: int,
    sharpe_variance: float,
    skew: float = 0.0,
    kurtosis: float = 3.0,
) -> float:
    """DSR = PSR(SR₀), SR₀ the expected maximum Sharpe of `n_trials` unskilled trials.

    Units as :func:`probabilistic_sharpe_ratio` (per observation); `sharpe_variance` is the
    variance of the trials' Sharpe estimates in the same units.
    """
    benchmark = expected_max_sharpe(n_trials, sharpe_variance)
    return probabilistic_sharpe_ratio(
        sharpe, n_obs, benchmark=benchmark, skew=skew, kurtosis=kurtosis
    )


@dataclass(frozen=True, slots=True)
class SharpeSignificance:
    """PSR and DSR of one policy's daily returns, with the trials they account for."""

    policy: str
    n_days: int
    sharpe_annual: float
    """Daily Sharpe × √252."""
    skew: float
    kurtosis: float
    psr: float
    """P(true daily Sharpe > 0); its p-value is 1 − psr."""
    n_trials: int
    """Trials counted (see the caller: checkpoints, seeds, policies, profiles)."""
    trial_sharpe_variance_annual: float
    """Variance of the trials' annualised Sharpe estimates."""
    benchmark_annual: float
    """SR₀ × √252: the best annualised Sharpe luck gives after `n_trials` trials."""
    dsr: float
    """PSR against SR₀; its p-value is 1 − dsr."""

    @property
    def psr_p_value(self) -> float:
        return 1.0 - self.psr

    @property
    def dsr_p_value(self) -> float:
        return 1.0 - self.dsr

    def to_json(self) -> dict[str, object]:
        """The fields (NaN as None) plus both p-values."""
        out = asdict(self) | {"psr_p_value": self.psr_p_value, "dsr_p_value": self.dsr_p_value}
        return {
            k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()
        }

    def format_line(self) -> str:
        """One line for a report, e.g. ``agent: PSR 0.97 (p 0.03); deflated ... ``."""

        def f(value: float, spec: str = ".2f") -> str:
            return "n/a" if not math.isfinite(value) else format(value, spec)

        return (
            f"{self.policy}: Sharpe ann. {f(self.sharpe_annual)} over {self.n_days} days, "
            f"PSR {f(self.psr, '.3f')} (p {f(self.psr_p_value, '.3f')}); deflated Sharpe "
            f"{f(self.dsr, '.3f')} (p {f(self.dsr_p_value, '.3f')}) over {self.n_trials} "
            f"trials (trial Sharpe variance {f(self.trial_sharpe_variance_annual)}, "
            f"luck's best {f(self.benchmark_annual)})"
        )


def sharpe_significance(
    policy: str,
    daily_returns: npt.NDArray[np.float64],
    *,
    n_trials: int,
    trial_sharpe_variance_annual: float,
) -> SharpeSignificance:
    """PSR and DSR of `daily_returns` (pooled out-of-sample days) after `n_trials` trials.

    Parameters
    ----------
    daily_returns : (n_days,) float
        Daily returns (or daily PnL) of the policy, in time order.
    n_trials
        Trials made to arrive at this policy (>= 1).
    trial_sharpe_variance_annual
        Variance of the trials' annualised Sharpe ratios (0 when unknown with one trial);
        divided by 252 for per-day units.
    """
    x = np.asarray(daily_returns, dtype=np.float64)
    sharpe, skew, kurt = return_moments(x)
    n = len(x)
    variance = trial_sharpe_variance_annual / TRADING_DAYS_PER_YEAR
    benchmark = expected_max_sharpe(n_trials, variance)
    psr = probabilistic_sharpe_ratio(sharpe, n, skew=skew, kurtosis=kurt) if n >= 2 else math.nan
    dsr = (
        probabilistic_sharpe_ratio(sharpe, n, benchmark=benchmark, skew=skew, kurtosis=kurt)
        if n >= 2
        else math.nan
    )
    root = math.sqrt(TRADING_DAYS_PER_YEAR)
    return SharpeSignificance(
        policy=policy,
        n_days=n,
        sharpe_annual=sharpe * root,
        skew=skew,
        kurtosis=kurt,
        psr=psr,
        n_trials=int(n_trials),
        trial_sharpe_variance_annual=float(trial_sharpe_variance_annual),
        benchmark_annual=benchmark * root,
        dsr=dsr,
    )
