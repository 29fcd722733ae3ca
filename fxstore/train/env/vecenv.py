"""Many trading environments stepped at once, on numpy or CuPy: what the agent learns from.

The accounting (costs, rolls, the close-out at a window's end) is :mod:`fxstore.train.env.market`'s:
:class:`VecEnv` books every step with the same function as
:func:`fxstore.train.env.market.evaluate_positions`. On CuPy one fused kernel does a whole step
(:mod:`fxstore.train.gpu.env_kernels`); numpy is the reference it matches bit for bit (tested).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig
from fxstore.errors import InvalidInputError
from fxstore.train.env.market import (
    F32,
    F64,
    I64,
    Bool,
    ContractSpec,
    Market,
    _book,
    _check_window,
    _costs,
)
from fxstore.train.gpu.rng import derive_key, uniform
from fxstore.train.gpu.xp import to_host

if TYPE_CHECKING:
    from fxstore.train.gpu.env_kernels import CupyEnvKernels

__all__ = ["Step", "VecEnv"]

logger = logging.getLogger(__name__)


class Step(NamedTuple):
    """What :meth:`VecEnv.step` returns for every environment."""

    obs: F32
    """float32 ``(n_envs, n_obs)``: the next observation (a fresh episode's where done)."""
    reward: F32
    """float32 ``(n_envs,)``: PnL of the step in reward units (see EnvConfig.reward)."""
    pnl: F64
    """float64 ``(n_envs,)``: PnL of the step in dollars, net of costs (of the moves of
    `reward_close` where the env was given one)."""
    done: Bool
    """bool ``(n_envs,)``: the episode ended with this step (its position closed out)."""


class VecEnv:
    """`n_envs` episodes of `episode_bars` rows each, inside rows ``[lo, hi)``, stepped at once.

    An episode starts flat at a uniformly drawn row s and ends at row ``s + episode_bars - 1``,
    where the position is closed out; finished episodes restart at a new random row within
    the same step (the returned observation is the new episode's). Observation = the row's
    features, then the held position over `max_position` (float32).

    `reward_close`: ``(n_rows,)`` closes whose moves the steps book in place of the market's
    (a shaped training reward: :func:`fxstore.train.evaluate.forecast.reward_path`); costs and
    reward units stay the real market's.
    """

    def __init__(
        self,
        market: Market,
        config: EnvConfig,
        spec: ContractSpec,
        *,
        n_envs: int,
        window: tuple[int, int],
        episode_bars: int,
        seed: int = 0,
        reward_close: F64 | None = None,
    ) -> None:
        lo, hi = window
        _check_window(market, lo, hi)
        if n_envs < 1:
            raise InvalidInputError(f"`n_envs` must be >= 1, was {n_envs}.")
        if not 2 <= episode_bars <= hi - lo:
            raise InvalidInputError(
                f"`episode_bars` must be in 2..{hi - lo} (the window's rows), was {episode_bars}."
            )
        xp = market.xp
        self._costs = _costs(market, config, spec)  # the real market's costs and units
        if reward_close is not None:
            if reward_close.shape != (market.n_rows,):
                raise InvalidInputError(
                    f"`reward_close` must have one close per market row ({market.n_rows}), "
                    f"was shape {reward_close.shape}."
                )
            market = dataclasses.replace(market, close=xp.asarray(reward_close, xp.float64))
        self.market, self.config, self.spec = market, config, spec
        self.xp = xp
        self.n_envs = n_envs
        self.window = (lo, hi)
        self.episode_bars = episode_bars
        self.n_obs = market.features.shape[1] + 1
        self.n_actions = len(config.positions)
        self._values = xp.asarray(config.positions, dtype=xp.float64)
        self._key = derive_key(seed)
        self._draws = 0  # restarts so far: the counter of the start draws
        self._t: I64 = xp.zeros(n_envs, dtype=xp.int64)
        self._stop = xp.zeros(n_envs, dtype=xp.int64)
        self._held = xp.zeros(n_envs, dtype=xp.float64)
        self._is_started = False
        self._age, self._ended = 0, False  # see episode_ended
        self._kernels: CupyEnvKernels | None = None
        if xp is not np:  # CuPy: one fused launch per step instead of ~40 small kernels
            from fxstore.train.gpu.env_kernels import CupyEnvKernels

            args = (market, self._costs, self._values, config, (lo, hi), episode_bars)
            self._kernels = CupyEnvKernels(*args)

    @property
    def episode_ended(self) -> bool:
        """Every environment's episode ended with the last :meth:`step` (its ``done`` is all
        True), else none did: all episodes start together at :meth:`reset` and last
        `episode_bars` rows, so the host knows this without reading the device."""
        return self._ended

    def reset(self) -> F32:
        """Start every environment on a fresh episode; returns the observations."""
        self._is_started = True
        self._age, self._ended = 0, False
        if self._kernels is not None:
            state = self._kernels.reset(self._key, self._draws, self.n_envs)
            self._draws += 1
            self._t, self._stop, self._held, obs = state
            return obs
        self._restart(self.xp.ones(self.n_envs, dtype=bool))
        return self._observe()

    def _restart(self, mask: Bool) -> None:
        xp = self.xp
        lo, hi = self.window
        span = hi - lo - self.episode_bars + 1
        # counter-based draws: the same starts on numpy and CuPy, resumable from state_dict
        u = uniform(xp, self._key, self._draws, self.n_envs)
        self._draws += 1
        draw = xp.floor(u * span).astype(xp.int64)
        start = xp.minimum(draw, span - 1) + lo
        self._t = xp.where(mask, start, self._t)
        self._stop = xp.where(mask, start + self.episode_bars - 1, self._stop)
        self._held = xp.where(mask, 0.0, self._held)

    def _observe(self) -> F32:
        xp = self.xp
        obs: F32 = xp.empty((self.n_envs, self.n_obs), dtype=xp.float32)
        obs[:, :-1] = self.market.features[self._t]
        obs[:, -1] = self._held / self.config.max_position
        return obs

    @property
    def rows(self) -> I64:
        """The row each environment is at (int64 ``(n_envs,)``)."""
        return self._t

    def step(self, action: I64) -> Step:
        """Trade every environment to ``positions[action]`` and move it one row on.

        Parameters
        ----------
        action
            int ``(n_envs,)``: an index into :attr:`EnvConfig.positions` per environment, on
            the market's array module (checked against the range on numpy only: on a GPU the
            check would cost a device sync every step).

        Raises
        ------
        InvalidInputError
            :meth:`reset` was never called, or `action` has the wrong shape, dtype or range.
        """
        xp = self.xp
        self._check_action(action)
        self._age += 1  # rows since the episodes' start, on the host
        self._ended = self._age == self.episode_bars - 1
        if self._ended:
            self._age = 0
        if self._kernels is not None:  # the same book in one launch (see _env_kernels)
            out = self._kernels.step(
                self._t, self._stop, self._held, action, self._key, self._draws
            )
            self._draws += 1
            self._t, self._stop, self._held = out.t, out.stop, out.held
            return Step(out.obs, out.reward, out.pnl, out.done)
        target = self._values[action]
        t = self._t
        nxt = t + 1
        done = nxt == self._stop
        carry = ~done & (self.config.roll == "roll")
        pnl, _, carried = _book(xp, self._held, target, t, self.market, self._costs, carry)
        # The last row of an episode closes the position out at that row's cost.
        pnl = pnl - xp.where(done, xp.abs(carried) * self._costs.cost[nxt], 0.0)
        reward = (pnl / self._costs.unit[t]).astype(xp.float32)
        self._t = nxt
        self._held = carried
        self._restart(done)  # no host sync: a draw for every env, kept where done
        return Step(self._observe(), reward, pnl, done)

    def _check_action(self, action: I64) -> None:
        if not self._is_started:
            raise InvalidInputError("VecEnv.step() before reset(): call reset() first.")
        shape = getattr(action, "shape", None)
        kind = getattr(getattr(action, "dtype", None), "kind", None)
        if shape != (self.n_envs,) or kind not in ("i", "u"):
            raise InvalidInputError(
                f"`action` must be an int array of shape ({self.n_envs},), was "
                f"{getattr(action, 'dtype', type(action).__name__)} with shape {shape}."
            )
        if isinstance(action, np.ndarray) and action.size:
            low, high = int(action.min()), int(action.max())
            if low < 0 or high >= self.n_actions:
                raise InvalidInputError(
                    f"`action` must be in 0..{self.n_actions - 1}, was {low}..{high}."
                )

    def state_dict(self) -> dict[str, npt.NDArray[np.generic]]:
        """Everything that decides the next steps, as host arrays (for a checkpoint)."""
        return {
            "t": to_host(self._t, copy=True).astype(np.int64, copy=False),
            "stop": to_host(self._stop, copy=True).astype(np.int64, copy=False),
            "held": to_host(self._held, copy=True).astype(np.float64, copy=False),
            "draws": np.array(self._draws, dtype=np.int64),
            "is_started": np.array(self._is_started),
        }

    def load_state_dict(self, state: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Restore what :meth:`state_dict` returned (for an env of the same `n_envs`)."""
        n = (self.n_envs,)
        shapes: dict[str, tuple[int, ...]] = {
            "t": n,
            "stop": n,
            "held": n,
            "draws": (),
            "is_started": (),
        }
        for name, shape in shapes.items():
            if name not in state or np.shape(state[name]) != shape:
                raise InvalidInputError(
                    f"VecEnv state `{name}` must have shape {shape}, was "
                    f"{np.shape(state[name]) if name in state else 'missing'}; resume with the "
                    "same n_envs."
                )
        xp = self.xp
        self._t = xp.asarray(state["t"], dtype=xp.int64)
        self._stop = xp.asarray(state["stop"], dtype=xp.int64)
        self._held = xp.asarray(state["held"], dtype=xp.float64)
        self._draws = int(state["draws"])
        self._is_started = bool(state["is_started"])
        # rows since the episodes' start (the same for every env; 0 right after a restart)
        first = int(np.asarray(state["t"])[0]) if self.n_envs else 0
        age = first - (int(np.asarray(state["stop"])[0]) - self.episode_bars + 1)
        self._age, self._ended = age, False
