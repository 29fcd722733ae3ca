"""The day's bridge (fxstore.synth.signal.bridge_terms): it ends the day at the next anchor
and does not take a persistent signal's moves back.

A bridge of the drift alone (slope ``gap / n``) closes the gap left by the signal's drift by
a drift against it, so the signal at midday predicted the rest of the day's move far less
than the free model says (a day-scale reversal a policy could trade). Conditioning the
signal as well keeps the free model's prediction.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fxstore.synth.events import DayConsts, advance_walk
from fxstore.synth.signal import bridge_terms

pytestmark = pytest.mark.quick

N = 4_000  # records a day
PHI = 0.5 ** (1 / 400)  # a half-life of 400 records: a tenth of the day
SIGMA, LOAD = 0.05, 1.0
KAPPA = LOAD * math.sqrt((1 - PHI) / (1 + PHI))


def _consts(day: int, slope: float = 0.0, shift: float = 0.0) -> DayConsts:
    return DayConsts(
        n_records=N,
        anchor=0.0,
        bridge_slope=slope,
        signal_shift=shift,
        sigma=SIGMA,
        kappa=KAPPA,
        phi=PHI,
        bias=0.0,
        key_fair=np.uint64(2 * day + 1),
        key_signal=np.uint64(2 * day + 2),
        key_event=np.uint64(0),
        tick_fixed=1,
        instrument_id=np.zeros(1, np.int64),
        beta=np.ones(1),
        offset=np.zeros(1),
        sweep_weight=np.ones(1),
    )


def _midday_regression(*, condition_signal: bool, n_days: int = 1_500) -> float:
    """Slope of the second half-day's bridged move on the signal at midday, over the free
    model's slope (1: the bridge keeps what the signal predicts)."""
    rng = np.random.default_rng(0)
    free_var = SIGMA**2 * N * (1 + LOAD**2)
    x_mid, y_rest = np.empty(n_days), np.empty(n_days)
    for day in range(n_days):
        s0 = rng.standard_normal()
        walk = np.array([0.0, s0])
        advance_walk(walk, 0, N, _consts(day))
        gap = rng.normal(0.0, math.sqrt(free_var)) - walk[0]
        shift, slope = (
            bridge_terms(gap, N, SIGMA, KAPPA, PHI)
            if condition_signal
            else (
                0.0,
                gap / N,
            )
        )
        consts = _consts(day, slope, shift)
        walk = np.array([0.0, s0])
        advance_walk(walk, 0, N // 2, consts)
        x_mid[day] = walk[1] + shift
        before = walk[0] + slope * (N // 2)
        advance_walk(walk, N // 2, N - N // 2, consts)
        y_rest[day] = walk[0] + slope * N - before
    free = SIGMA * KAPPA * (1 - PHI ** (N // 2)) / (1 - PHI)
    return float(np.polyfit(x_mid, y_rest, 1)[0] / free)


def test_bridge_terms_without_a_signal_is_the_straight_line() -> None:
    assert bridge_terms(12.0, 4_000, SIGMA, 0.0, PHI) == (0.0, 12.0 / 4_000)


def test_bridge_terms_ends_the_day_at_the_anchor() -> None:
    walk = np.array([0.0, 0.7])
    advance_walk(walk, 0, N, _consts(0))
    gap = 3.0 - walk[0]
    shift, slope = bridge_terms(gap, N, SIGMA, KAPPA, PHI)
    bridged = np.array([0.0, 0.7])

    advance_walk(bridged, 0, N, _consts(0, slope, shift))

    assert bridged[0] + slope * N == pytest.approx(3.0, abs=1e-9)


def test_bridge_keeps_what_the_signal_predicts_for_the_rest_of_the_day() -> None:
    assert _midday_regression(condition_signal=True) == pytest.approx(1.0, abs=0.25)


def test_bridge_of_the_drift_alone_would_take_the_signal_back() -> None:
    # the case the conditioning exists for: without it the midday signal predicts much less
    assert _midday_regression(condition_signal=False) < 0.6
