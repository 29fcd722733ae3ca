"""The interface every reference implements (see :mod:`fxstore.train.evaluate.references`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.walkforward import Fold

if TYPE_CHECKING:
    from fxstore.train.evaluate.references.ridge import LinearModel

__all__ = ["Reference", "ReferenceInputs", "ReferencePositions"]

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ReferenceInputs:
    """What a reference may read to choose its positions on one fold."""

    market: Market
    fold: Fold
    env: EnvConfig
    spec: ContractSpec
    capital: float
    seed: int
    """The run's seed (``random`` mixes it with the window's first row)."""
    planted: F64 | None = None
    """The planted signal per market row on a synthetic market; None on real data."""
    linear: LinearModel | None = None
    """The fold's ``linear`` model where the trainer has fitted it already (for the agent's
    forecast); None: ``linear`` fits it."""


@dataclass(frozen=True, slots=True)
class ReferencePositions:
    """Contracts held over the fold's test window, and its training part when fitted."""

    test: F64
    train: F64 | None = None
    """None for a reference that is not fitted (no in-sample Sharpe to show)."""
    choice: Mapping[str, float] | None = None
    """What a fitted reference chose on the fold's validation slice (``linear``: horizon in
    bars, ridge penalty, band), for the run's records; None when it chose nothing."""


class Reference(Protocol):
    """One reference policy: its name and its positions on a fold."""

    @property
    def name(self) -> str: ...

    @property
    def needs_planted(self) -> bool:
        """Whether it trades the planted signal (absent on real data)."""
        ...

    @property
    def needs_feature(self) -> str | None:
        """The feature column it reads by name (absent from a set without it), if any."""
        ...

    def positions(self, inputs: ReferenceInputs) -> ReferencePositions | None:
        """The positions on `inputs.fold`, or None when this market cannot have them."""
        ...
