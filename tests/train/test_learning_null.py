"""Without a planted signal nothing is predictable: the agent's out-of-sample Sharpe must not
be significantly above 0, nor its deflated Sharpe (a leak of future data into features, folds
or evaluation would show up here); the planted-signal half is test_learning.py.
"""

from __future__ import annotations

import math

import pytest

from fxstore.train.evaluate.results import BacktestResult
from tests.train._learning import learning_store, train_on

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def null_result(tmp_path_factory: pytest.TempPathFactory) -> BacktestResult:
    return train_on(learning_store(tmp_path_factory, 0.0))


def test_train_no_signal_out_of_sample_sharpe_not_above_zero(null_result: BacktestResult) -> None:
    agent = null_result.totals["agent"]
    low, _high = agent.sharpe_daily_ci
    # NaN: the agent stood aside in every fold (validation never beat flat): no Sharpe at all.
    assert math.isnan(low) or low <= 0.0


def test_train_no_signal_deflated_sharpe_not_significant(null_result: BacktestResult) -> None:
    (significance,) = null_result.significance
    # NaN: the agent stood aside in every fold
    assert not significance.dsr > 0.95
