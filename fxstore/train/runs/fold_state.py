"""A fold's training state between steps, and its checkpoint: saved and restored whole.

The loop (:func:`fxstore.train.loop.train`) carries a :class:`FoldState` (step, early-stopping
state, validation evaluations, the loss totals since the last evaluation) beside its
:class:`Learner` (agent, replay, n-step window, environments and the acting generator).
:func:`save_fold` writes both into the fold's checkpoint (``fold<NN>/checkpoint*.npz``,
:mod:`fxstore.train.agent.checkpoint`) and :func:`restore_fold` reads them back, checking
what it reads, so that a resumed fold continues to the result of an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from fxstore.errors import InvalidInputError
from fxstore.train.agent.checkpoint import DAMAGED, load_checkpoint, meta_value, save_checkpoint
from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.replay import NStepAccumulator, PrioritizedReplay
from fxstore.train.env.vecenv import VecEnv
from fxstore.train.gpu import rng as crng
from fxstore.train.gpu.xp import to_host

__all__ = ["FoldState", "Learner", "restore_fold", "save_fold", "sync_losses"]


@dataclass
class FoldState:
    """Everything a fold's loop carries from step to step besides the agent and replay."""

    step: int = 0
    best_score: float = 0.0
    """Best validation Sharpe so far; it starts at the flat policy's (0): weights must beat
    standing aside on the validation slice to be kept."""
    best_params: dict[str, npt.NDArray[np.generic]] | None = None
    """The kept weights; None while no evaluation has beaten flat."""
    best_step: int | None = None
    best_band: float = 0.0
    """The no-trade band kept with `best_params` (TrainConfig.no_trade_bands)."""
    bad_evals: int = 0
    stopped: bool = False
    evals: list[dict[str, float | None]] = dataclasses.field(default_factory=list)
    """Validation evaluations so far (None where a number is undefined)."""
    loss_sum: float = 0.0
    """Sum and count of update losses since the last evaluation."""
    loss_count: int = 0

    @property
    def mean_loss(self) -> float | None:
        """Mean update loss since the last evaluation (None before the first update)."""
        return self.loss_sum / self.loss_count if self.loss_count else None


class Learner(NamedTuple):
    """The stateful parts of a fold's learning, saved and restored together."""

    agent: Agent
    replay: PrioritizedReplay
    nstep: NStepAccumulator
    env: VecEnv
    act_rng: crng.CounterRng

    def parts(self) -> dict[str, Agent | PrioritizedReplay | NStepAccumulator | VecEnv]:
        return {"agent": self.agent, "replay": self.replay, "nstep": self.nstep, "env": self.env}


def sync_losses(agent: Agent, state: FoldState) -> None:
    """Wait for the updates in flight: raise if one diverged, take their loss sum and count."""
    agent.check_finite()
    state.loss_sum, state.loss_count = agent.loss_totals()


def save_fold(path: Path, learner: Learner, state: FoldState, obs: npt.NDArray[np.float32]) -> None:
    """Write the fold's checkpoint: every part's state, the kept weights, `obs`, `state`."""
    sync_losses(learner.agent, state)
    arrays: dict[str, npt.NDArray[np.generic]] = {}
    for prefix, part in learner.parts().items():
        arrays |= {f"{prefix}/{k}": v for k, v in part.state_dict().items()}
    if state.best_params is not None:
        arrays |= {f"best/{k}": v for k, v in state.best_params.items()}
    arrays["obs"] = to_host(obs)
    meta = {
        "step": state.step,
        "best_score": state.best_score,
        "best_step": state.best_step,
        "best_band": state.best_band,
        "bad_evals": state.bad_evals,
        "stopped": state.stopped,
        "evals": state.evals,
        "act_counter": learner.act_rng.counter,
        "loss_sum": state.loss_sum,
        "loss_count": state.loss_count,
    }
    save_checkpoint(path, arrays, meta)


def restore_fold(path: Path, learner: Learner, state: FoldState) -> npt.NDArray[np.float32]:
    """Load the checkpoint at `path` into `learner` and `state`; return the observations.

    Raises
    ------
    InvalidInputError
        The checkpoint is damaged or does not fit the fold (the message names the file).
    """
    arrays, meta = load_checkpoint(path)

    def part(prefix: str) -> dict[str, npt.NDArray[np.generic]]:
        return {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(prefix + "/")}

    try:
        for prefix, component in learner.parts().items():
            component.load_state_dict(part(prefix))
    except InvalidInputError as err:  # name the file: the message names only the key
        raise InvalidInputError(f"{path}: {err}; {DAMAGED}.") from err
    lo, hi = learner.env.window
    for key in ("env/t", "env/stop"):
        values = np.asarray(arrays[key])
        if values.size and not (lo <= int(values.min()) and int(values.max()) < hi):
            raise InvalidInputError(
                f"{path}: checkpoint {key!r} must lie in {lo}..{hi - 1}, was "
                f"{int(values.min())}..{int(values.max())}; {DAMAGED}."
            )
    if "obs" not in arrays:
        raise InvalidInputError(f"{path}: checkpoint has no 'obs'; {DAMAGED}.")
    best = part("best")
    state.best_params = best or None
    state.step = int(meta_value(meta, "step", int, path))
    state.best_score = meta_value(meta, "best_score", float, path)
    step = meta.get("best_step")
    state.best_step = int(meta_value(meta, "best_step", int, path)) if step is not None else None
    state.bad_evals = int(meta_value(meta, "bad_evals", int, path))
    if "best_band" in meta:  # checkpoints before no-trade bands had none: plain greedy
        state.best_band = meta_value(meta, "best_band", float, path)
    state.stopped = bool(meta_value(meta, "stopped", bool, path))
    evals = meta.get("evals")
    if not isinstance(evals, list):
        raise InvalidInputError(f"{path}: checkpoint field `evals` must be a list; {DAMAGED}.")
    state.evals = evals
    learner.act_rng.counter = int(meta_value(meta, "act_counter", int, path))
    state.loss_sum = meta_value(meta, "loss_sum", float, path)
    state.loss_count = int(meta_value(meta, "loss_count", int, path))
    xp = learner.env.xp
    obs: npt.NDArray[np.float32] = xp.asarray(arrays["obs"], dtype=xp.float32)
    return obs
