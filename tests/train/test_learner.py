"""fxstore.train.agent.learner.LearnerStep on numpy: the three calls it stands for."""

from __future__ import annotations

import numpy as np
import pytest

from fxstore.train.agent.learner import LearnerStep
from tests.train._learner_pairs import add, learner_pair

pytestmark = pytest.mark.quick


def test_learner_step_on_numpy_is_sample_update_and_write_back() -> None:
    """A LearnerStep leaves the agent, the replay and its generator as sample +
    update_async + update_priorities do, bit for bit, with adds in between."""
    (a1, r1), (a2, r2) = learner_pair(np), learner_pair(np)
    learn = LearnerStep(a1, r1, 64)
    for i in range(5):
        beta = 0.4 + 0.1 * i
        learn(beta)
        batch = r2.sample(64, beta, out=a2.input_buffers(64))
        r2.update_priorities(batch.index, a2.update_async(batch))
        add(r1, 7, seed=10 + i)
        add(r2, 7, seed=10 + i)
    assert not learn.graphed
    assert a1.step == a2.step == 5
    for key, value in a2.state_dict().items():
        np.testing.assert_array_equal(a1.state_dict()[key], value)
    for key, value in r2.state_dict().items():
        np.testing.assert_array_equal(r1.state_dict()[key], value)
