"""bench/diag_reward_slope.py: what each fold's forecast is worth on its training rows."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.train._tiny import TINY
from tests.train.test_linear import ES, FOLD, signal_market

pytestmark = pytest.mark.quick

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture()
def diag(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("diag_reward_slope", None)
    return importlib.import_module("diag_reward_slope")


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


def test_too_few_rows_give_nan(diag: ModuleType) -> None:
    close = np.arange(10.0)
    forecast = np.ones(10, np.float32)

    assert math.isnan(diag._correlation(forecast, close, 0, 3, 1))
    assert math.isnan(diag._correlation(forecast, close, 0, 10, 1))  # the forecast is flat
