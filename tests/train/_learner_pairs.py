"""Helpers of tests/train/test_learner*.py: an agent and a filled replay on one array module."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import numpy as np

from fxstore.config import AgentConfig
from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.replay import PrioritizedReplay
from tests.train.test_agent import make_batch

CONFIG = AgentConfig(hidden=32, layers=2, n_atoms=11, v_min=-3.0, v_max=3.0, lr=1e-3, seed=2)
N_OBS, N_ACTIONS = 7, 3


def learner_pair(
    xp: ModuleType, *, cuda_graph: bool = True, capacity: int = 600, filled: int = 500
) -> tuple[Agent, PrioritizedReplay]:
    """An agent and a replay holding `filled` transitions (the same for the same arguments)."""
    agent = Agent(dataclasses.replace(CONFIG, cuda_graph=cuda_graph), N_OBS, N_ACTIONS, xp=xp)
    replay = PrioritizedReplay(capacity, N_OBS, alpha=0.6, eps=1e-6, xp=xp, seed=4)
    add(replay, filled, seed=1)
    return agent, replay


def add(replay: PrioritizedReplay, n: int, *, seed: int) -> None:
    """Add `n` transitions made from `seed` (on the replay's array module)."""
    xp = replay.xp
    b = make_batch(n, N_OBS, N_ACTIONS, seed=seed)
    replay.add(*(xp.asarray(x) for x in (b.obs, b.action, b.reward, b.discount, b.next_obs)))


def host(x: object) -> np.ndarray:
    get = getattr(x, "get", None)
    return np.asarray(get() if get is not None else x)
