"""Counter-based random numbers for the synthetic market's numba kernels.

Draw ``i`` of stream ``key`` is ``mix64(key + (i + 1) * GOLDEN)`` (the SplitMix64 finaliser):
a pure function of two integers. A kernel can therefore stop at a chunk boundary and resume
from a counter alone, and the same (key, index) gives the same number on every machine and
numpy/numba version, which is what makes the generated files byte-identical for a seed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt

__all__ = [
    "geometric",
    "next_uniform",
    "njit_cached",
    "njit_inner",
    "normal_at",
    "stream_keys",
    "uniform_at",
]

logger = logging.getLogger(__name__)

_F = TypeVar("_F", bound=Callable[..., Any])

_GOLDEN: Final = np.uint64(0x9E3779B97F4A7C15)
_MUL1: Final = np.uint64(0xBF58476D1CE4E5B9)
_MUL2: Final = np.uint64(0x94D049BB133111EB)
_S30: Final = np.uint64(30)
_S27: Final = np.uint64(27)
_S31: Final = np.uint64(31)
_S11: Final = np.uint64(11)
_TO_UNIT: Final = 1.0 / 9007199254740992.0  # 2**-53: 53 random bits -> [0, 1)


def njit_cached(func: _F) -> _F:
    """Compile `func` with ``numba.njit(cache=True)``, keeping its signature for mypy."""
    return cast(_F, numba.njit(cache=True)(func))


def njit_inner(func: _F) -> _F:
    """Like :func:`njit_cached`, for helpers only called from other kernels.

    Skipping the CPython wrapper (argument unboxing) roughly halves compile time for
    kernels that take named tuples of arrays.
    """
    options: dict[str, Any] = {"cache": True, "no_cpython_wrapper": True}  # not in numba's stubs
    return cast(_F, numba.njit(**options)(func))


@njit_inner
def _mix64(z: np.uint64) -> np.uint64:
    z = (z ^ (z >> _S30)) * _MUL1
    z = (z ^ (z >> _S27)) * _MUL2
    return z ^ (z >> _S31)


@njit_cached
def uniform_at(key: np.uint64, index: int) -> float:
    """Draw `index` (>= 0) of stream `key`, uniform on [0, 1)."""
    z = _mix64(key + np.uint64(index + 1) * _GOLDEN)
    return float(z >> _S11) * _TO_UNIT


@njit_cached
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


@njit_cached
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
