"""bench/diag_reward_slope.py: what each fold's forecast is worth on its training rows."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

from tests.train._tiny import TINY
from tests.train.test_linear import ES, FOLD, signal_market

pytestmark = pytest.mark.quick


@pytest.fixture()
def diag(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("diag_reward_slope")


@pytest.mark.parametrize("model", ["linear", "blend"])
def test_a_forecast_of_the_signal_has_a_positive_slope_everywhere(
    diag: ModuleType, model: str
) -> None:
    (row,) = diag.fold_slopes(signal_market(), [FOLD], TINY, ES, model)

    assert row["fold"] == 0 and row["slope"] > 0.5
    for part in ("train", "validation", "test"):
        assert row[f"{part}_ic1"] > 0.5  # the next move is feature 0 plus noise
        assert math.isfinite(row[f"{part}_ic16"])


def test_on_noise_the_slope_and_the_correlations_are_near_zero(diag: ModuleType) -> None:
    market = signal_market(strength=0.0)

    (row,) = diag.fold_slopes(market, [FOLD], TINY, ES, "blend")

    assert abs(row["train_ic1"]) < 0.1 and abs(row["test_ic1"]) < 0.15
    # the slope is in points a bar per sd of the forecast: small next to a bar's 0.5-point sd
    assert abs(row["slope"]) < 0.05


def test_a_part_too_short_to_correlate_gives_nan(diag: ModuleType) -> None:
    """Two rows of validation: too few for a correlation at 1 bar, none at 16."""
    lo = FOLD.validation[0]
    fold = dataclasses.replace(FOLD, validation=(lo, lo + 3))

    (row,) = diag.fold_slopes(signal_market(), [fold], TINY, ES, "linear")

    assert math.isnan(row["validation_ic1"]) and math.isnan(row["validation_ic16"])
    assert row["test_ic1"] > 0.5


def test_a_move_across_a_roll_is_no_move(diag: ModuleType) -> None:
    """A roll's gap inside the test window: the correlations read moves within a contract,
    so a huge gap there changes nothing."""
    market = signal_market()
    roll = FOLD.test[0] + 40
    is_roll = np.zeros(market.n_rows, dtype=bool)
    is_roll[roll] = True
    close = np.array(market.close)
    close[roll:] += 5000.0
    rolled = dataclasses.replace(market, close=close, is_roll=is_roll)
    plain = dataclasses.replace(market, is_roll=is_roll)

    (gapped,) = diag.fold_slopes(rolled, [FOLD], TINY, ES, "linear")
    (same,) = diag.fold_slopes(plain, [FOLD], TINY, ES, "linear")

    assert gapped["test_ic1"] == pytest.approx(same["test_ic1"], abs=1e-12)
    assert gapped["test_ic16"] == pytest.approx(same["test_ic16"], abs=1e-12)
