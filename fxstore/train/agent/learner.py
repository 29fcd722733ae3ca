"""One learner step: a prioritized batch from the replay into the agent's input buffers, the
agent's update on it, and the new priorities written back to the replay.

On CuPy with CUDA graphs (the default on a GPU) the device work of all three is captured once
as one CUDA graph: a step is then the host's stratified uniforms (numpy's generator, as
:meth:`PrioritizedReplay.sample` draws them), their copy to the device and one graph launch,
instead of about a dozen launches (the sampler's four kernels, the update's graph, the
write-back). At batch 16,384 the host's side of the step was measured as its limit. The
graph runs the same kernels in the same order as the separate calls, so the results are the
same bits (tests/train/test_learner_gpu.py). On numpy, or with graphs off, the step is the
three calls one after another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.replay import Batch, PrioritizedReplay, fused_write_back

__all__ = ["LearnerStep"]

logger = logging.getLogger(__name__)


class LearnerStep:
    """``step(beta)``: sample `batch_size` transitions from `replay` with importance
    exponent `beta`, update `agent` on them, write their new priorities back.

    The graph is captured at the first step on CuPy and again whenever the agent's input
    buffers change (another batch size); the replay's and the agent's buffers are updated
    in place by their ``load_state_dict``, so a resumed run replays the same graph.
    """

    def __init__(self, agent: Agent, replay: PrioritizedReplay, batch_size: int) -> None:
        self._agent, self._replay, self._batch_size = agent, replay, batch_size
        self._graph: Callable[[], None] | None = None
        # the buffers the graph was captured on, held (not their id()s: a freed object's id
        # may be reused by the next one, and a graph must not replay on freed buffers)
        self._captured: tuple[object, ...] = (None, None, None)
        self.graphed = False
        """Whether the last step ran as one CUDA graph."""

    def __call__(self, beta: float) -> None:
        agent, replay, size = self._agent, self._replay, self._batch_size
        inputs = agent.input_buffers(size)
        if agent.xp is np or not agent.config.cuda_graph:
            self._separate(inputs, beta)
            return
        replay.stage_sample(size, beta, inputs)
        key = (inputs, replay.priority, replay.max_priority)
        if any(a is not b for a, b in zip(key, self._captured, strict=True)):
            self._graph = None
            if fused_write_back(replay, inputs.index, agent.priority_buffer(size)):
                self._graph = agent.capture_with(
                    inputs,
                    lambda: replay.launch_sample(size, inputs),
                    lambda priority: replay.update_priorities(inputs.index, priority),
                    (replay.priority, replay.max_priority),
                )
            self._captured = key
            logger.debug("learner step %s", "captured" if self._graph else "not captured")
        if self._graph is None:
            replay.launch_sample(size, inputs)
            replay.update_priorities(inputs.index, agent.update_async(inputs))
            self.graphed = False
            return
        self._graph()
        self.graphed = True

    def _separate(self, inputs: Batch, beta: float) -> None:
        agent, replay = self._agent, self._replay
        batch = replay.sample(self._batch_size, beta, out=inputs)
        replay.update_priorities(batch.index, agent.update_async(batch))
        self.graphed = False
