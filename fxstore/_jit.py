"""numba compilation wrappers, one place: every kernel module compiles through these.

Each keeps the decorated function's signature for mypy (numba ships no stubs) and caches
the machine code on disk, so a fresh process pays the compile only once per machine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba

__all__ = ["njit", "njit_fma", "njit_inline", "njit_inner", "njit_numpy_errors"]

_F = TypeVar("_F", bound=Callable[..., Any])


def njit(func: _F) -> _F:
    """Compile `func` in numba's nopython mode, cached on disk, releasing the GIL."""
    return cast(_F, numba.njit(cache=True, nogil=True)(func))


def njit_inline(func: _F) -> _F:
    """:func:`njit` for a per-record helper, inlined into its callers (numba IR inlining)."""
    return cast(_F, numba.njit(cache=True, nogil=True, inline="always")(func))


def njit_numpy_errors(func: _F) -> _F:
    """:func:`njit` with numpy's error model: a float division by zero gives inf or NaN."""
    return cast(_F, numba.njit(cache=True, nogil=True, error_model="numpy")(func))


def njit_inner(func: _F) -> _F:
    """:func:`njit` for helpers called only from other kernels: no CPython wrapper.

    Skipping the wrapper (argument unboxing) roughly halves compile time for kernels that
    take named tuples of arrays.
    """
    options: dict[str, Any] = {"cache": True, "nogil": True, "no_cpython_wrapper": True}
    return cast(_F, numba.njit(**options)(func))


def njit_fma(func: _F) -> _F:
    """:func:`njit_inner` with numpy's error model (a float division by zero gives inf or
    NaN, no check per division: loops with divisions vectorise) that may fuse a multiply and
    an add into one FMA instruction (LLVM's 'contract' flag only: NaN, infinities and the
    order of operations are kept), for recursions bound by their chain's latency. The
    rounding is then the machine's: results are reproducible on one machine, not bit for
    bit across CPUs with and without FMA.
    """
    options: dict[str, Any] = {
        "cache": True,
        "nogil": True,
        "no_cpython_wrapper": True,
        "error_model": "numpy",
        "fastmath": {"contract"},
    }
    return cast(_F, numba.njit(**options)(func))
