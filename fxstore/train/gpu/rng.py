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

from fxstore.rng import GOLDEN, MASK, MUL1, MUL2, mix64, mix64_array, to_unit_array

__all__ = ["CUDA_SOURCE", "CounterRng", "counter_base", "derive_key", "uniform"]

#: :func:`uniform` in CUDA C, bit for bit: ``fx_uniform(counter_base(key, counter), i)`` is
#: ``uniform(xp, key, counter, n)[i]`` (with the ``i64``/``u64`` typedefs; the GPU kernels
#: that draw, in :mod:`fxstore.train.gpu.env_kernels` and :mod:`fxstore.train.gpu.act`,
#: start from it).
CUDA_SOURCE = (
    f"""
typedef long long i64;
typedef unsigned long long u64;

#define GOLDEN 0x{GOLDEN:016X}ULL
#define MIX1 0x{MUL1:016X}ULL
#define MIX2 0x{MUL2:016X}ULL
"""
    + r"""
// rng.uniform(xp, key, counter, n)[i], with base = key + GOLDEN * (counter << 32) (mod 2**64)
__device__ __forceinline__ double fx_uniform(u64 base, u64 i) {
    u64 z = i * GOLDEN + base;
    z = (z ^ (z >> 30)) * MIX1;
    z = (z ^ (z >> 27)) * MIX2;
    z = z ^ (z >> 31);
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);  // top 53 bits * 2**-53: exact
}
"""
)


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


class CounterRng:
    """The generator calls :meth:`fxstore.train.agent.dqn.Agent.act` makes (``random``, then
    ``integers``), as counter-based draws of one key: its state is one int, the calls so far.

    Call c draws ``uniform(xp, key, c, n)``. On CuPy ``Agent.act`` makes its two calls in one
    kernel, taking their bases from :meth:`next_bases`: the same draws.
    """

    def __init__(self, xp: ModuleType, key: int, counter: int = 0) -> None:
        self.xp, self.key, self.counter = xp, key, counter

    def random(self, size: int) -> npt.NDArray[np.float64]:
        self.counter += 1
        return uniform(self.xp, self.key, self.counter, size)

    def integers(self, low: int, high: int, size: int) -> npt.NDArray[np.int64]:
        draws = self.random(size) * (high - low)
        out: npt.NDArray[np.int64] = self.xp.minimum(draws.astype(self.xp.int64), high - low - 1)
        return out + low

    def next_bases(self, calls: int) -> list[int]:
        """The :func:`counter_base` of the next `calls` calls, counted as made."""
        bases = [counter_base(self.key, self.counter + c + 1) for c in range(calls)]
        self.counter += calls
        return bases
