"""train.evaluate.significance: PSR and DSR against the published worked example, by hand."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest

from fxstore.errors import InvalidInputError
from fxstore.train.evaluate.significance import (
    deflated_sharpe_ratio,
    expected_max_sharpe,
    probabilistic_sharpe_ratio,
    return_moments,
    sharpe_significance,
)

pytestmark = pytest.mark.quick

# Bailey & López de Prado (2014), "The Deflated Sharpe Ratio", numerical example: the best of
# N = 100 trials has an annualised Sharpe of 2.5 over T = 1250 daily returns (250 a year in
# the paper), skewness -3, kurtosis 10; the trials' annualised Sharpes have variance 0.5.
# The paper gets SR0 ≈ 0.1132 (per day) and DSR ≈ 0.9004.
DAYS_PER_YEAR_PAPER = 250
SR_DAILY = 2.5 / math.sqrt(DAYS_PER_YEAR_PAPER)
VARIANCE_DAILY = 0.5 / DAYS_PER_YEAR_PAPER


def test_expected_max_sharpe_paper_example_is_0_1132() -> None:
    assert expected_max_sharpe(100, VARIANCE_DAILY) == pytest.approx(0.1132, abs=5e-5)


def test_deflated_sharpe_ratio_paper_example_is_0_9004() -> None:
    dsr = deflated_sharpe_ratio(
        SR_DAILY, 1250, n_trials=100, sharpe_variance=VARIANCE_DAILY, skew=-3.0, kurtosis=10.0
    )

    assert dsr == pytest.approx(0.9004, abs=5e-4)


def test_deflated_sharpe_ratio_one_trial_is_psr_against_zero() -> None:
    psr = probabilistic_sharpe_ratio(0.05, 500, skew=-1.0, kurtosis=6.0)
    dsr = deflated_sharpe_ratio(0.05, 500, n_trials=1, sharpe_variance=0.3, skew=-1.0, kurtosis=6.0)

    assert dsr == psr


def test_probabilistic_sharpe_ratio_normal_returns_hand_case() -> None:
    # skew 0, kurtosis 3: the variance term is 1 + SR²/2 (Lo 2002); SR 0.1, T 101:
    # z = 0.1 * 10 / sqrt(1.005)
    z = 0.1 * 10.0 / math.sqrt(1.005)

    psr = probabilistic_sharpe_ratio(0.1, 101)

    assert psr == pytest.approx(NormalDist().cdf(z), rel=1e-12)


def test_probabilistic_sharpe_ratio_benchmark_hand_case() -> None:
    # SR 0.2, SR* 0.1, T 50, skew -0.5, kurtosis 5: spread 1 + 0.1 + 1 * 0.04 = 1.14
    z = 0.1 * 7.0 / math.sqrt(1.14)

    psr = probabilistic_sharpe_ratio(0.2, 50, benchmark=0.1, skew=-0.5, kurtosis=5.0)

    assert psr == pytest.approx(NormalDist().cdf(z), rel=1e-12)


def test_probabilistic_sharpe_ratio_negative_skew_fat_tails_lower_it() -> None:
    normal = probabilistic_sharpe_ratio(0.1, 100)
    skewed = probabilistic_sharpe_ratio(0.1, 100, skew=-3.0, kurtosis=10.0)

    assert skewed < normal


@pytest.mark.parametrize("n_obs", [1, 0, 2.5, True])
def test_probabilistic_sharpe_ratio_bad_n_obs_raises(n_obs: object) -> None:
    with pytest.raises(InvalidInputError, match="`n_obs` must be an int >= 2"):
        probabilistic_sharpe_ratio(0.1, n_obs)  # type: ignore[arg-type]


def test_expected_max_sharpe_grows_with_trials_and_is_mean_for_one() -> None:
    values = [expected_max_sharpe(n, 1.0) for n in (1, 2, 10, 100, 1000)]

    assert values[0] == 0.0
    assert all(a < b for a, b in itertools.pairwise(values))


def test_return_moments_hand_case() -> None:
    # x = [1, 2, 3, 6]: mean 3, deviations -2 -1 0 3; ddof-1 std sqrt(14/3);
    # ddof-0 variance 14/4; third moment (-8 - 1 + 27)/4 = 4.5; fourth (16 + 1 + 81)/4 = 24.5
    sharpe, skew, kurt = return_moments(np.array([1.0, 2.0, 3.0, 6.0]))

    assert sharpe == pytest.approx(3.0 / math.sqrt(14 / 3))
    assert skew == pytest.approx(4.5 / 3.5**1.5)
    assert kurt == pytest.approx(24.5 / 3.5**2)


def test_return_moments_constant_series_is_nan() -> None:
    assert all(math.isnan(v) for v in return_moments(np.full(10, 0.1)))


def test_sharpe_significance_annualises_with_252_and_counts_trials() -> None:
    rng = np.random.default_rng(0)
    daily = rng.normal(0.001, 0.01, 500)
    sharpe, skew, kurt = return_moments(daily)

    one = sharpe_significance("agent", daily, n_trials=1, trial_sharpe_variance_annual=0.0)
    many = sharpe_significance("agent", daily, n_trials=50, trial_sharpe_variance_annual=1.0)

    assert one.sharpe_annual == pytest.approx(sharpe * math.sqrt(252))
    assert one.dsr == one.psr == probabilistic_sharpe_ratio(sharpe, 500, skew=skew, kurtosis=kurt)
    assert many.benchmark_annual == pytest.approx(
        expected_max_sharpe(50, 1.0 / 252) * math.sqrt(252)
    )
    assert many.dsr < many.psr
    assert many.dsr_p_value == pytest.approx(1.0 - many.dsr)
