"""What the GPU room's kernels read of the other rooms' objects, as protocols.

The kernels take the agent's, replay's and market's arrays through these shapes, so the GPU
room imports no other room of the trainer: :class:`fxstore.train.agent.ops.C51Inputs`,
:class:`~fxstore.train.agent.ops.AdamInputs`, :class:`fxstore.train.agent.replay.Batch`,
:class:`fxstore.train.env.market.Market` and its costs fit them as they are.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from fxstore.train.gpu.xp import F32, F64, I64, Bool

__all__ = ["AdamArrays", "BatchArrays", "C51Arrays", "CostArrays", "MarketArrays"]


class BatchArrays(Protocol):
    """What the C51 kernel reads of a replay batch (:class:`fxstore.train.agent.replay.Batch`)."""

    @property
    def action(self) -> I64: ...
    @property
    def reward(self) -> F32: ...
    @property
    def discount(self) -> F32: ...
    @property
    def weight(self) -> F32: ...


class C51Arrays(Protocol):
    """The C51 kernel's inputs (:class:`fxstore.train.agent.ops.C51Inputs`)."""

    @property
    def head(self) -> F32: ...
    @property
    def head_target(self) -> F32: ...
    @property
    def bias(self) -> F32: ...
    @property
    def bias_target(self) -> F32: ...
    @property
    def batch(self) -> BatchArrays: ...
    @property
    def support(self) -> F32: ...
    @property
    def n_actions(self) -> int: ...


class AdamArrays(Protocol):
    """The Adam kernel's inputs (:class:`fxstore.train.agent.ops.AdamInputs`)."""

    @property
    def params(self) -> F32: ...
    @property
    def grad(self) -> F32: ...
    @property
    def m(self) -> F32: ...
    @property
    def v(self) -> F32: ...
    @property
    def target(self) -> F32: ...
    @property
    def step(self) -> F32: ...
    @property
    def beta1(self) -> np.float32: ...
    @property
    def one_minus_beta1(self) -> np.float32: ...
    @property
    def beta2(self) -> np.float32: ...
    @property
    def one_minus_beta2(self) -> np.float32: ...
    @property
    def lr(self) -> np.float32: ...
    @property
    def eps(self) -> np.float32: ...
    @property
    def keep(self) -> np.float32: ...


class MarketArrays(Protocol):
    """What the kernels read of a market (:class:`fxstore.train.env.market.Market`)."""

    @property
    def features(self) -> F32: ...
    @property
    def close(self) -> F64: ...
    @property
    def is_roll(self) -> Bool: ...


class CostArrays(Protocol):
    """What the kernels read of the market's per-row trading costs."""

    @property
    def cost(self) -> F64: ...
    @property
    def unit(self) -> F64: ...
    @property
    def multiplier(self) -> F64: ...
