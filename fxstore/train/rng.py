"""Counter-based random numbers: a pure function of (key, counter, index), on any array module.

Training must give the same result for a seed on a device, and ``--resume`` must continue to
the same result as an uninterrupted run. A stateful generator would have to be saved and
restored on every module (CuPy's cannot be), so every random draw here is a hash instead:
``uniform(xp, key, counter, n)[i] = splitmix64(key, counter, i)`` mapped to [0, 1). The
caller keeps a counter (the step number); nothing else is state.
"""

from __future__ import annotations

from types import ModuleType
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["derive_key", "uniform"]

_GOLDEN: Final = 0x9E3779B97F4A7C15
_MIX1: Final = 0xBF58476D1CE4E5B9
_MIX2: Final = 0x94D049BB133111EB
_MASK: Final = (1 << 64) - 1


def _mix_int(z: int) -> int:
    """splitmix64's finaliser on a Python int."""
    z = (z ^ (z >> 30)) * _MIX1 & _MASK
    z = (z ^ (z >> 27)) * _MIX2 & _MASK
    return z ^ (z >> 31)


def derive_key(seed: int, *streams: int) -> int:
    """A 64-bit key for one stream of draws, e.g. ``derive_key(seed, fold, STREAM_ENV)``."""
    key = _mix_int((seed & _MASK) ^ _GOLDEN)
    for stream in streams:
        key = _mix_int((key + _GOLDEN * (stream + 1)) & _MASK)
    return key


def uniform(xp: ModuleType, key: int, counter: int, n: int) -> npt.NDArray[np.float64]:
    """`n` float64 draws in [0, 1) for (`key`, `counter`), on module `xp`; same on every module.

    Draw i hashes ``key + golden * (counter * 2**32 + i)`` with splitmix64 and keeps its top
    53 bits, so distinct (counter, i) pairs (i < 2**32) give independent-looking draws.
    """
    base = (key + _GOLDEN * ((counter & 0xFFFFFFFF) << 32)) & _MASK
    with np.errstate(over="ignore"):
        z = xp.arange(n, dtype=xp.uint64) * xp.uint64(_GOLDEN) + xp.uint64(base)
        z = (z ^ (z >> xp.uint64(30))) * xp.uint64(_MIX1)
        z = (z ^ (z >> xp.uint64(27))) * xp.uint64(_MIX2)
        z = z ^ (z >> xp.uint64(31))
    out: npt.NDArray[np.float64] = (z >> xp.uint64(11)).astype(xp.float64) * (2.0**-53)
    return out
