"""SplitMix64, defined once: the constants and the finaliser of every counter-based draw.

fxstore never keeps random state: draw ``k`` of a stream is a hash, ``mix64(base + k * GOLDEN)``
(mod 2**64), and a uniform number on [0, 1) is its top 53 bits times 2**-53. The same
arithmetic runs on Python ints (:func:`mix64`), on uint64 arrays of any array module
(:func:`mix64_array`: numpy or CuPy, :mod:`fxstore.train.gpu.rng`), in numba scalar kernels
(:mod:`fxstore.synth.rng`) and in the CUDA source of :mod:`fxstore.train.gpu.env_kernels`, all
built from the constants here and equal bit for bit (tests/test_rng.py).
"""

from __future__ import annotations

from types import ModuleType
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "GOLDEN",
    "MASK",
    "MUL1",
    "MUL2",
    "SHIFTS",
    "TO_UNIT",
    "UNIT_SHIFT",
    "mix64",
    "mix64_array",
    "to_unit_array",
]

#: 2**64 / golden ratio, odd: the Weyl-sequence step between draws.
GOLDEN: Final = 0x9E3779B97F4A7C15
#: The finaliser's two multipliers and three xor-shifts (Stafford's "Mix13").
MUL1: Final = 0xBF58476D1CE4E5B9
MUL2: Final = 0x94D049BB133111EB
SHIFTS: Final = (30, 27, 31)
MASK: Final = (1 << 64) - 1
#: A uniform draw keeps the top 53 bits (``z >> 11``) and scales them by 2**-53: exact in float64.
UNIT_SHIFT: Final = 11
TO_UNIT: Final = 2.0**-53

U64 = npt.NDArray[np.uint64]


def mix64(z: int) -> int:
    """SplitMix64's finaliser of `z` (a Python int in [0, 2**64))."""
    s1, s2, s3 = SHIFTS
    z = (z ^ (z >> s1)) * MUL1 & MASK
    z = (z ^ (z >> s2)) * MUL2 & MASK
    return z ^ (z >> s3)


def mix64_array(xp: ModuleType, z: U64) -> U64:
    """:func:`mix64` of every item of the uint64 array `z` of module `xp` (wraps mod 2**64)."""
    s1, s2, s3 = (xp.uint64(s) for s in SHIFTS)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> s1)) * xp.uint64(MUL1)
        z = (z ^ (z >> s2)) * xp.uint64(MUL2)
        out: U64 = z ^ (z >> s3)
    return out


def to_unit_array(xp: ModuleType, z: U64) -> npt.NDArray[np.float64]:
    """Hashes `z` (uint64, module `xp`) as float64 uniform numbers on [0, 1)."""
    out: npt.NDArray[np.float64] = (z >> xp.uint64(UNIT_SHIFT)).astype(xp.float64) * TO_UNIT
    return out
