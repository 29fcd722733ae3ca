"""Counter-based random numbers for the synthetic market's numba kernels.

Draw ``i`` of stream ``key`` is ``mix64(key + (i + 1) * GOLDEN)`` (the SplitMix64 finaliser of
:mod:`fxstore.rng`, here as numba scalar kernels on the same constants): a pure function of two
integers. A kernel can therefore stop at a chunk boundary and resume from a counter alone, and
the same (key, index) gives the same number on every machine and numpy/numba version, which is
what makes the generated files byte-identical for a seed.
"""

from __future__ import annotations

import logging
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore import rng
from fxstore._jit import njit, njit_inner

__all__ = [
    "geometric",
    "next_uniform",
    "normal_at",
    "stream_keys",
    "uniform_at",
]

logger = logging.getLogger(__name__)

# numba folds these globals into the kernels as uint64 constants: uint64 arithmetic wraps
# mod 2**64 exactly as fxstore.rng.mix64 masks it.
_GOLDEN: Final = np.uint64(rng.GOLDEN)
_MUL1: Final = np.uint64(rng.MUL1)
_MUL2: Final = np.uint64(rng.MUL2)
_S1: Final = np.uint64(rng.SHIFTS[0])
_S2: Final = np.uint64(rng.SHIFTS[1])
_S3: Final = np.uint64(rng.SHIFTS[2])
_UNIT_SHIFT: Final = np.uint64(rng.UNIT_SHIFT)
_TO_UNIT: Final = rng.TO_UNIT


@njit_inner
def _mix64(z: np.uint64) -> np.uint64:
    z = (z ^ (z >> _S1)) * _MUL1
    z = (z ^ (z >> _S2)) * _MUL2
    return z ^ (z >> _S3)


@njit
def uniform_at(key: np.uint64, index: int) -> float:
    """Draw `index` (>= 0) of stream `key`, uniform on [0, 1)."""
    z = _mix64(key + np.uint64(index + 1) * _GOLDEN)
    return float(z >> _UNIT_SHIFT) * _TO_UNIT


@njit
def normal_at(key: np.uint64, index: int) -> float:
    """Standard normal number `index` of stream `key` (Box-Muller on draws 2i and 2i+1)."""
    u1 = 1.0 - uniform_at(key, 2 * index)  # (0, 1]: log is finite
    u2 = uniform_at(key, 2 * index + 1)
    return float(np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2))


@njit_inner
def next_uniform(key: np.uint64, counter: npt.NDArray[np.int64], slot: int) -> float:
    """Advance ``counter[slot]`` and return that draw of stream `key`, uniform on [0, 1)."""
    counter[slot] += 1
    return uniform_at(key, counter[slot])


@njit
def geometric(u: float, mean: float) -> int:
    """Geometric number >= 1 with the given `mean` (>= 1), from one uniform draw `u`."""
    if mean <= 1.0:
        return 1
    p = 1.0 / mean
    return 1 + int(np.log(1.0 - u) / np.log(1.0 - p))


def stream_keys(*entropy: int, n_keys: int) -> npt.NDArray[np.uint64]:
    """Derive `n_keys` independent 64-bit stream keys from integers (seed, day ordinal, tag).

    numpy's SeedSequence hashing is specified and stable across numpy versions.
    """
    seq = np.random.SeedSequence([int(value) for value in entropy])
    return np.asarray(seq.generate_state(n_keys, dtype=np.uint64), dtype=np.uint64)
