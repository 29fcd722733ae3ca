"""Slow inputs of the synthetic market: the daily index anchor, carry and intraday activity.

The index fair value at the open of each trading day (the *anchor*) follows a slowly
mean-reverting walk in log price, counted in trading days from a fixed epoch, so the anchor
of a day depends only on the seed and never on which range is generated. Within a day the
fair value is a random walk bridged from the day's anchor to the next day's (see
:mod:`fxstore.synth.events`); because the bridge's end point has the same variance as the
walk, the intraday path is still a martingale.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit
from fxstore.market.calendar import trading_days_between
from fxstore.synth.rng import normal_at, stream_keys

__all__ = [
    "ANCHOR_EPOCH",
    "anchor_levels",
    "carry_multiplier",
    "intensity_per_minute",
]

logger = logging.getLogger(__name__)

#: Day 0 of the anchor walk. Configs must start on or after it.
ANCHOR_EPOCH: Final = dt.date(2000, 1, 3)
#: Stationary standard deviation of the anchor's log distance from the base price.
_LOG_SPREAD: Final = 0.06
_TAG_ANCHOR: Final = 0xA4C0
_TAG_CARRY: Final = 0xCA22
SESSION_MINUTES: Final = 23 * 60


@njit
def _anchor_walk(key: np.uint64, n: int, phi: float, sigma: float) -> npt.NDArray[np.float64]:
    out = np.empty(n, dtype=np.float64)
    level = 0.0
    for k in range(n):
        out[k] = level
        level = phi * level + sigma * normal_at(key, k)
    return out


def anchor_levels(
    seed: int, days: list[dt.date], base_price: float, daily_log_vol: float
) -> dict[dt.date, float]:
    """Index fair value (points) at the open of each trading day in `days`.

    Parameters
    ----------
    seed
        The market's seed.
    days
        Trading days, ascending, none before :data:`ANCHOR_EPOCH`.
    base_price
        The level the walk reverts to (points).
    daily_log_vol
        Standard deviation of one day's log change; the mean reversion is set so the
        stationary spread of the log level is about 6%.
    """
    if not days:
        return {}
    every = trading_days_between(ANCHOR_EPOCH, days[-1])
    index = {day: k for k, day in enumerate(every)}
    phi = math.sqrt(max(0.0, 1.0 - (daily_log_vol / _LOG_SPREAD) ** 2))
    key = stream_keys(seed, _TAG_ANCHOR, n_keys=1)[0]
    walk = _anchor_walk(key, len(every), phi, daily_log_vol)
    return {day: base_price * math.exp(walk[index[day]]) for day in days}


def carry_multiplier(seed: int, day: dt.date) -> float:
    """Slowly varying factor (0.8-1.2) on the carry of every contract: a 173-day cycle."""
    key = stream_keys(seed, _TAG_CARRY, n_keys=1)[0]
    phase = 2.0 * math.pi * (int(key) / 2.0**64)
    return 1.0 + 0.2 * math.sin(2.0 * math.pi * day.toordinal() / 173.0 + phase)


def intensity_per_minute() -> npt.NDArray[np.float64]:
    """Relative event rate in each minute of a session (17:00 Chicago on D-1 to 16:00 on D).

    Shape (1380,). U-shaped over the US day: a burst at the 08:30 open decaying to a midday
    lull and rising into the 15:00 cash close, with quiet Asian hours, a livelier European
    morning, the 07:30 data releases and a thin last hour after 15:15.
    """
    minute = np.arange(SESSION_MINUTES, dtype=np.float64)
    hour = (17.0 + (minute + 0.5) / 60.0) % 24.0  # local clock at the middle of each minute
    rate = np.full(SESSION_MINUTES, 0.15)
    rate[(hour >= 17.0) & (hour < 18.0)] = 0.25
    rate[minute < 5] = 0.6
    rate[(hour >= 19.0) & (hour < 21.0)] = 0.22
    rate[(hour >= 2.0) & (hour < 7.0)] = 0.35
    rate[(hour >= 7.0) & (hour < 8.5)] = 0.6
    rate[(hour >= 7.5) & (hour < 7.5 + 5 / 60)] = 2.0
    day = (hour >= 8.5) & (hour < 15.0)
    t = hour[day]
    rate[day] = 0.9 + 3.0 * np.exp(-(t - 8.5) / 0.5) + 1.8 * np.exp((t - 15.0) / 0.5)
    rate[(hour >= 15.0) & (hour < 15.25)] = 2.2
    late = (hour >= 15.25) & (hour < 16.0)
    rate[late] = 0.3 + 0.5 * np.exp(-(hour[late] - 15.25) / 0.25)
    return rate
