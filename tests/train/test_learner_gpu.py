"""fxstore.train.agent.learner.LearnerStep on CuPy: the learner step captured as one CUDA graph
gives the bits of its three parts run one by one.

Every test here needs CuPy and a CUDA device; tests/train/conftest.py skips them otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

from fxstore.errors import TrainingDivergedError
from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.learner import LearnerStep
from fxstore.train.agent.replay import PrioritizedReplay
from tests.train._learner_pairs import add, host, learner_pair

pytestmark = pytest.mark.gpu


def separate(agent: Agent, replay: PrioritizedReplay, size: int, beta: float) -> None:
    batch = replay.sample(size, beta, out=agent.input_buffers(size))
    replay.update_priorities(batch.index, agent.update_async(batch))


def assert_same(a1: Agent, r1: PrioritizedReplay, a2: Agent, r2: PrioritizedReplay) -> None:
    assert a1.step == a2.step
    for key, value in a2.state_dict().items():
        np.testing.assert_array_equal(a1.state_dict()[key], value, err_msg=key)
    for key, value in r2.state_dict().items():
        np.testing.assert_array_equal(r1.state_dict()[key], value, err_msg=key)
    assert a1.loss_totals() == a2.loss_totals()


def test_graphed_learner_step_equals_its_parts_run_one_by_one() -> None:
    import cupy

    (a1, r1), (a2, r2) = learner_pair(cupy), learner_pair(cupy)
    learn = LearnerStep(a1, r1, 64)
    for i in range(8):
        beta = 0.4 + 0.05 * i
        learn(beta)
        assert learn.graphed
        separate(a2, r2, 64, beta)
        add(r1, 9, seed=20 + i)  # new slots at the running maximum priority, between steps
        add(r2, 9, seed=20 + i)
    assert_same(a1, r1, a2, r2)
    np.testing.assert_array_equal(host(r1.max_priority), host(r2.max_priority))


def test_graphed_learner_step_survives_a_resume_in_place() -> None:
    """load_state_dict writes into the buffers the graph holds, so after a resume the same
    LearnerStep goes on as a fresh one on freshly loaded objects."""
    import cupy

    (a1, r1), (a2, r2) = learner_pair(cupy), learner_pair(cupy)
    learn1 = LearnerStep(a1, r1, 64)
    for _ in range(3):
        learn1(0.5)
    saved_agent, saved_replay = a1.state_dict(), r1.state_dict()
    for _ in range(3):
        learn1(0.5)  # then thrown away by the resume below
    a1.load_state_dict(saved_agent)
    r1.load_state_dict(saved_replay)
    a2.load_state_dict(saved_agent)
    r2.load_state_dict(saved_replay)
    for agent in (a1, a2):  # the loss totals are the loop's to restore (not agent state)
        agent.set_loss_totals(1.5, 3)
    learn2 = LearnerStep(a2, r2, 64)
    for _ in range(4):
        learn1(0.6)
        learn2(0.6)
    assert learn1.graphed and learn2.graphed
    assert_same(a1, r1, a2, r2)


def test_learner_step_without_graphs_and_with_another_batch_size() -> None:
    """With cuda_graph off the parts run one by one; two batch sizes on one agent each get
    their own capture; the results match the separate calls."""
    import cupy

    (a1, r1), (a2, r2) = learner_pair(cupy), learner_pair(cupy, cuda_graph=False)
    small, large = LearnerStep(a1, r1, 32), LearnerStep(a1, r1, 96)
    plain = LearnerStep(a2, r2, 32)
    for _ in range(3):
        small(0.4)
        large(0.4)
        plain(0.4)
        separate(a2, r2, 96, 0.4)
    assert small.graphed and large.graphed and not plain.graphed
    assert_same(a1, r1, a2, r2)


def test_graphed_learner_step_reports_a_diverged_update() -> None:
    import cupy

    agent, replay = learner_pair(cupy)
    replay.reward[:] = cupy.nan
    learn = LearnerStep(agent, replay, 64)
    learn(0.4)
    with pytest.raises(TrainingDivergedError, match="step 1: loss is not finite"):
        agent.check_finite()
