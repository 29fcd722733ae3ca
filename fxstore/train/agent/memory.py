"""Host memory a training run will allocate, checked before anything is allocated.

Sizes are the user's to choose (``--n-envs``, ``--hidden``, ``--replay-size``, ``--batch-size``);
an absurd one must end in one ``Error:`` line naming the option, not in a MemoryError halfway
through a fold. The estimate counts the big arrays only (float32 everywhere); it is a lower bound
of what training really uses, so a run it refuses could never have fitted. On a GPU the device's
free memory is sized by the train loop itself; this checks host (CPU) memory.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np

from fxstore.config import TrainConfig
from fxstore.errors import InvalidInputError

if TYPE_CHECKING:
    from fxstore.train.env.market import Market

__all__ = ["available_host_bytes", "check_host_memory", "host_bytes_needed", "resolve_sizes"]

logger = logging.getLogger(__name__)

_F32: Final = 4
#: Copies of the network's parameters: online, target, gradient, two Adam moments, the best
#: weights of early stopping and the checkpoint's host copy.
_PARAM_COPIES: Final = 7
_MEMINFO: Final = Path("/proc/meminfo")


def host_bytes_needed(
    config: TrainConfig, sizes: Mapping[str, int], n_obs: int, n_actions: int
) -> dict[str, int]:
    """Bytes of the largest arrays of one fold, by the option that sizes them.

    Keys are ``hidden`` (network and its copies), ``batch_size`` (activations of one update),
    ``n_envs`` (environment and n-step state) and ``replay_size`` (the replay buffer). With
    ``concurrent_seeds`` every one of the fold's seeds holds its own at once.
    """
    agent = config.agent
    hidden, layers = agent.hidden, agent.layers
    width = hidden if layers else n_obs  # what the head reads
    head = width * agent.n_atoms * (1 + n_actions)
    params = (n_obs * hidden + (layers - 1) * hidden * hidden if layers else 0) + head
    params += layers * hidden
    transition = 2 * n_obs * _F32 + 8 + 3 * _F32
    # Online and target forward passes over obs and next obs, kept for the backward pass.
    activations = 3 * sizes["batch_size"] * (layers * hidden + head) * _F32 * 2
    one = {
        "hidden": _PARAM_COPIES * params * _F32,
        "batch_size": activations + sizes["batch_size"] * transition,
        "n_envs": sizes["n_envs"] * ((agent.n_step + 2) * (n_obs * _F32 + 16) + 64),
        "replay_size": sizes["replay_size"] * (transition + 2 * _F32),
    }
    agents = config.seeds if config.concurrent_seeds else 1
    return {option: agents * size for option, size in one.items()}


def available_host_bytes() -> int | None:
    """Memory the system can give without swapping (MemAvailable), None if unknown."""
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def check_host_memory(
    config: TrainConfig, sizes: Mapping[str, int], n_obs: int, n_actions: int
) -> None:
    """Raise InvalidInputError if the sizes need more host memory than is available.

    The message names the option that asks for the most.
    """
    available = available_host_bytes()
    if available is None:
        return
    needed = host_bytes_needed(config, sizes, n_obs, n_actions)
    total = sum(needed.values())
    logger.debug("training needs about %.3g bytes of host memory, %d available", total, available)
    if total <= available:
        return
    option = max(needed, key=lambda k: needed[k])
    value = config.agent.hidden if option == "hidden" else sizes[option]
    whole, fix = f"{_human(total)} for the whole run", f"lower --{option.replace('_', '-')}"
    if config.concurrent_seeds and config.seeds > 1:
        whole += f", {config.seeds} seeds side by side"
        fix += " or train the seeds one after another (--no-concurrent-seeds)"
    raise InvalidInputError(
        f"`{option}` {value} needs about {_human(needed[option])} of host memory ({whole}), "
        f"more than the {_human(available)} available; {fix}."
    )


def _human(n_bytes: float) -> str:
    units = ("B", "KB", "MB", "GB", "TB")
    i = 0
    while n_bytes >= 1024 and i < len(units) - 1:
        n_bytes /= 1024
        i += 1
    return f"{n_bytes:.3g} {units[i]}"


def resolve_sizes(config: TrainConfig, market: Market) -> dict[str, int]:
    """n_envs, batch_size and replay_size: as set, or sized from the device's free memory.

    Raises
    ------
    InvalidInputError
        `batch_size` larger than `replay_size`.
    """
    n_obs = market.features.shape[1] + 1
    on_gpu = market.xp is not np
    free = int(market.xp.cuda.runtime.memGetInfo()[0]) if on_gpu else 0
    # One transition: two observations, action, reward, discount, priority.
    per_transition = 2 * n_obs * 4 + 8 + 4 + 4 + 4
    if config.replay_size is not None:
        replay_size = config.replay_size
    elif on_gpu:
        replay_size = int(min(2_000_000, free // 4 // per_transition))
    else:
        replay_size = config.agent.replay_size
    if config.batch_size is not None:
        batch_size = config.batch_size
    else:
        batch_size = 16_384 if on_gpu and free >= 8 << 30 else config.agent.batch_size
    n_envs = config.n_envs if config.n_envs is not None else (4096 if on_gpu else 64)
    if batch_size > replay_size:
        raise InvalidInputError(
            f"`batch_size` ({batch_size}) must be <= `replay_size` ({replay_size})."
        )
    return {"n_envs": n_envs, "batch_size": batch_size, "replay_size": replay_size}
