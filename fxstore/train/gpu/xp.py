"""The trainer's one array-module switch: numpy on the host, CuPy on a GPU.

Code that runs on both takes its module from its inputs (:func:`array_module`) and copies
to the host only through :func:`to_host`, so the same functions are tested on numpy.
Importing this module never imports CuPy; :func:`array_module` tries it on first use.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["F32", "F64", "I64", "Bool", "all_finite", "array_module", "to_host"]

_G = TypeVar("_G", bound=np.generic)
# Arrays of either module, as annotations read them (CuPy's arrays have numpy's interface).
F32: TypeAlias = npt.NDArray[np.float32]
F64: TypeAlias = npt.NDArray[np.float64]
I64: TypeAlias = npt.NDArray[np.int64]
Bool: TypeAlias = npt.NDArray[np.bool_]


@functools.cache
def _cupy() -> ModuleType | None:
    """CuPy, or None where it does not import. Tried once: a failed import is not cached by
    Python, and searching the path again cost about 1 ms a call (``linear`` asks hundreds
    of times a fold)."""
    try:
        import cupy
    except ImportError:
        return None
    module: ModuleType = cupy
    return module


def array_module(*arrays: object) -> ModuleType:
    """The array module of `arrays`: ``cupy.get_array_module`` when CuPy imports, else numpy."""
    cupy = _cupy()
    if cupy is None:
        return np
    module: ModuleType = cupy.get_array_module(*arrays)
    return module


def to_host(x: npt.NDArray[_G], *, copy: bool = False) -> npt.NDArray[_G]:
    """`x` as a numpy array: a copy from the device for CuPy; numpy as it is, or a copy.

    Pass ``copy=True`` when the result must not alias `x` (state snapshots, checkpoints).
    """
    get = getattr(x, "get", None)
    if get is not None and not isinstance(x, np.ndarray):
        return np.asarray(get())
    return np.array(x, copy=True) if copy else np.asarray(x)


def all_finite(x: npt.NDArray[np.floating]) -> bool:
    """Whether every value of `x` is finite, checked on the host (a CuPy array is copied).

    CuPy's own ``isfinite(x).all()`` compiles a CUB reduction the first time on a machine,
    about 1.4 s a pass and dtype on the H200 (`bench/diag_compile.py`), for checks of a few
    thousand values that copy in microseconds."""
    return bool(np.isfinite(to_host(x)).all())
