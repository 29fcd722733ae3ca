"""Counter-based random numbers: a pure function of (key, counter, index), on any array module.

Training must give the same result for a seed on a device, and ``--resume`` must continue to
the same result as an uninterrupted run. A stateful generator would have to be saved and
restored on every module (CuPy's cannot be), so every random draw here is a hash instead:
``uniform(xp, key, counter, n)[i] = splitmix64(key, counter, i)`` mapped to [0, 1). The
caller keeps a counter (the step number); nothing else is state. The hash is SplitMix64, as
defined in :mod:`fxstore.rng`.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import numpy.typing as npt

from fxstore.rng import GOLDEN, MASK, mix64, mix64_array, to_unit_array

__all__ = ["counter_base", "derive_key", "uniform"]


def derive_key(seed: int, *streams: int) -> int:
    """A 64-bit key for one stream of draws, e.g. ``derive_key(seed, fold, STREAM_ENV)``."""
    key = mix64((seed & MASK) ^ GOLDEN)
    for stream in streams:
        key = mix64((key + GOLDEN * (stream + 1)) & MASK)
    return key


def counter_base(key: int, counter: int) -> int:
    """What :func:`uniform` adds to ``i * GOLDEN`` for draw i of (`key`, `counter`)."""
    return (key + GOLDEN * ((counter & 0xFFFFFFFF) << 32)) & MASK


def uniform(xp: ModuleType, key: int, counter: int, n: int) -> npt.NDArray[np.float64]:
    """`n` float64 draws in [0, 1) for (`key`, `counter`), on module `xp`; same on every module.

    Draw i hashes ``key + golden * (counter * 2**32 + i)`` with splitmix64 and keeps its top
    53 bits, so distinct (counter, i) pairs (i < 2**32) give independent-looking draws.
    """
    base = counter_base(key, counter)
    with np.errstate(over="ignore"):
        z = xp.arange(n, dtype=xp.uint64) * xp.uint64(GOLDEN) + xp.uint64(base)
    return to_unit_array(xp, mix64_array(xp, z))
