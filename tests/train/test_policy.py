"""The greedy policy of a Q-function with a no-trade band (fxstore.train.agent.policy)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.config import EnvConfig
from fxstore.train.agent.policy import QFunction, action_values, banded_positions, greedy_positions
from tests.train.test_env import random_market

pytestmark = pytest.mark.quick

CONFIG = EnvConfig()  # positions -2..2: action j holds position j


def q_function(seed: int) -> QFunction:
    """A fixed random linear Q of the observation (features and held position)."""

    def q(obs: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        rng = np.random.default_rng(seed)
        w = rng.normal(size=(obs.shape[1], len(CONFIG.positions))).astype(np.float32)
        out: npt.NDArray[np.float32] = obs @ w
        return out

    return q


def changes(positions: npt.NDArray[np.float64]) -> int:
    return int((np.diff(np.concatenate([[0.0], positions])) != 0).sum())


def test_band_zero_is_the_plain_argmax_policy() -> None:
    market = random_market(60, seed=3, rolls=(20,))
    q = q_function(1)
    table = action_values(q, market, 0, 60, CONFIG)

    plain = greedy_positions(q, market, 0, 60, CONFIG)

    np.testing.assert_array_equal(banded_positions(table, market, 0, 60, CONFIG, 0.0), plain)
    np.testing.assert_array_equal(greedy_positions(q, market, 0, 60, CONFIG, 0.0), plain)


def test_band_keeps_the_held_position_unless_the_gain_exceeds_it() -> None:
    market = random_market(60, seed=3, rolls=(20,))
    q = q_function(2)
    table = action_values(q, market, 0, 60, CONFIG)
    gains = table.max(axis=2) - table[:, np.arange(5), np.arange(5)]

    counts = [changes(banded_positions(table, market, 0, 60, CONFIG, b)) for b in (0.0, 0.2, 1.0)]
    never = banded_positions(table, market, 0, 60, CONFIG, float(gains.max()) + 1.0)

    assert counts[0] >= counts[1] >= counts[2] and counts[0] > counts[2]
    assert not never.any()  # starts flat and no gain beats the band: stays flat
