"""cuBLAS GEMMs for the agent on CuPy, called directly so that an update can be graph-captured.

CuPy 14 refuses every cuBLAS call made while a stream is capturing (its ``setStream`` raises
``NotImplementedError``), although cuBLAS itself supports stream capture when the handle has a
user workspace (NVIDIA's cuBLAS guide, "CUDA Graphs Support"; PyTorch captures its GEMMs the
same way). So the agent keeps a cuBLAS handle of its own, gives it a fixed workspace, points it
at the current stream before each call and calls ``cublasGemmEx`` through ctypes: the same
library CuPy loaded, no new dependency. Only :mod:`fxstore.train.gpu.update_kernels` imports this
module, and only when CuPy is in use.

Row-major arrays are column-major transposes, so ``C = A @ B`` (row-major) is computed as
``C^T = B^T A^T`` in cuBLAS's terms; a transposed view (``x.T`` of a C-contiguous ``x``) is
passed as the original memory with the transpose flag, never copied.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from typing import Final

import cupy

from fxstore.errors import InvalidInputError

__all__ = ["Cublas"]

logger = logging.getLogger(__name__)

_OP_N: Final = 0
_OP_T: Final = 1
_CUDA_R_32F: Final = 0
_COMPUTE_32F: Final = 68
_COMPUTE_32F_FAST_TF32: Final = 77
_GEMM_DEFAULT: Final = -1
#: cuBLAS's own recommendation for Hopper is 32 MiB of workspace (cuBLAS guide, cublasSetWorkspace).
_WORKSPACE_BYTES: Final = 32 << 20


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    """The libcublas CuPy loaded (found in this process's maps), else the system's."""
    cupy.cuda.device.get_cublas_handle()  # CuPy loads its libcublas on first use
    path = None
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                name = line.rsplit(" ", 1)[-1].strip()
                if "/libcublas.so" in name:
                    path = name
                    break
    except OSError:
        path = None
    path = path or ctypes.util.find_library("cublas")
    if path is None:
        raise InvalidInputError(
            "cannot find libcublas, which CuPy should have loaded; reinstall cupy for this "
            "CUDA version, or train on the CPU (--device cpu)."
        )
    lib = ctypes.CDLL(path)
    handle_p, void_p, size_t = ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t
    lib.cublasCreate_v2.argtypes = [ctypes.POINTER(handle_p)]
    lib.cublasDestroy_v2.argtypes = [handle_p]
    lib.cublasSetStream_v2.argtypes = [handle_p, void_p]
    lib.cublasSetWorkspace_v2.argtypes = [handle_p, void_p, size_t]
    i32 = ctypes.c_int
    lib.cublasGemmEx.argtypes = [
        handle_p, i32, i32, i32, i32, i32,  # handle, opA, opB, m, n, k
        void_p, void_p, i32, i32,  # alpha, A, Atype, lda
        void_p, i32, i32,  # B, Btype, ldb
        void_p, void_p, i32, i32,  # beta, C, Ctype, ldc
        i32, i32,  # computeType, algo
    ]  # fmt: skip
    i64 = ctypes.c_int64
    lib.cublasGemmStridedBatchedEx.argtypes = [
        handle_p, i32, i32, i32, i32, i32,  # handle, opA, opB, m, n, k
        void_p, void_p, i32, i32, i64,  # alpha, A, Atype, lda, strideA
        void_p, i32, i32, i64,  # B, Btype, ldb, strideB
        void_p, void_p, i32, i32, i64,  # beta, C, Ctype, ldc, strideC
        i32, i32, i32,  # batchCount, computeType, algo
    ]  # fmt: skip
    logger.debug("cuBLAS for captured GEMMs: %s", path)
    return lib


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"{call} failed with cuBLAS status {status}")


def _operand(x: cupy.ndarray) -> tuple[int, int]:
    """(op, leading dimension) of a 2-D row-major operand or a transposed view of one.

    A dimension of length 1 may have any stride (CuPy gives ``v[None, :]`` stride 0 there)."""
    rows, cols = x.shape
    s0, s1 = (stride // x.itemsize for stride in x.strides)
    if (cols == 1 or s1 == 1) and (rows == 1 or s0 >= cols):
        return _OP_N, max(s0 if rows > 1 else cols, cols, 1)  # row-major, rows may be padded
    if (rows == 1 or s0 == 1) and (cols == 1 or s1 >= rows):
        return _OP_T, max(s1 if cols > 1 else rows, rows, 1)  # .T of a row-major array
    raise ValueError(f"GEMM operand of shape {x.shape} and strides {x.strides} is not dense")


class Cublas:
    """A cuBLAS handle with its own workspace: ``gemm`` works eagerly and under capture.

    Parameters
    ----------
    tf32
        Let the GEMMs round float32 inputs to TF32 (tensor cores); accumulation stays float32.
    """

    def __init__(self, *, tf32: bool) -> None:
        self._lib = _library()
        handle = ctypes.c_void_p()
        _check(self._lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self._handle = handle
        self._workspace = cupy.empty(_WORKSPACE_BYTES, dtype=cupy.uint8)
        self.workspace = self._workspace
        """The handle's workspace (a cuBLASLt handle on the same stream may share it)."""
        _check(
            self._lib.cublasSetWorkspace_v2(
                handle, ctypes.c_void_p(self._workspace.data.ptr), _WORKSPACE_BYTES
            ),
            "cublasSetWorkspace",
        )
        self._compute = _COMPUTE_32F_FAST_TF32 if tf32 else _COMPUTE_32F
        self._alpha, self._beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        self._stream = -1

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            self._lib.cublasDestroy_v2(handle)

    def _follow_stream(self) -> None:
        """Point the handle at the current stream (a capture's, under graph capture)."""
        stream = cupy.cuda.get_current_stream().ptr
        if stream != self._stream:
            _check(self._lib.cublasSetStream_v2(self._handle, stream), "cublasSetStream")
            self._stream = stream

    def gemm(self, a: cupy.ndarray, b: cupy.ndarray, out: cupy.ndarray) -> None:
        """``out = a @ b`` for float32 2-D arrays; `out` row-major, `a` and `b` may be ``.T``."""
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2 or out.shape != (m, n):
            raise ValueError(f"GEMM shapes {a.shape} @ {b.shape} -> {out.shape} do not agree")
        if m == 0 or n == 0:  # an empty output (CuPy gives it strides 0): nothing to do
            return
        op_c, ldc = _operand(out)
        if op_c != _OP_N:
            raise ValueError(f"GEMM output of strides {out.strides} is not row-major")
        if k == 0:
            out.fill(0)
            return
        op_a, lda = _operand(a)
        op_b, ldb = _operand(b)
        self._follow_stream()
        status = self._lib.cublasGemmEx(
            self._handle, op_b, op_a, n, m, k,
            ctypes.byref(self._alpha), b.data.ptr, _CUDA_R_32F, ldb,
            a.data.ptr, _CUDA_R_32F, lda,
            ctypes.byref(self._beta), out.data.ptr, _CUDA_R_32F, ldc,
            self._compute, _GEMM_DEFAULT,
        )  # fmt: skip
        _check(status, "cublasGemmEx")

    def gemm_split_k(
        self, a: cupy.ndarray, b: cupy.ndarray, partials: cupy.ndarray, splits: int
    ) -> None:
        """``partials[s] = a[:, K_s] @ b[K_s, :]`` for the `splits` equal chunks ``K_s`` of
        the inner dimension, in one strided-batched GEMM (`partials`: C-contiguous
        ``(splits, m, n)``; the caller adds them). For GEMMs of a long inner dimension and a
        small output, such as weight gradients over a batch, whose few output tiles would
        leave most of the GPU idle."""
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2 or partials.shape != (splits, m, n) or not partials.flags.c_contiguous:
            raise ValueError(
                f"split-K GEMM shapes {a.shape} @ {b.shape} -> {partials.shape} do not agree"
            )
        if splits < 1 or k % splits or m == 0 or n == 0:
            raise ValueError(f"cannot split an inner dimension of {k} into {splits} chunks")
        chunk = k // splits
        op_a, lda = _operand(a)
        op_b, ldb = _operand(b)
        # a chunk of a's columns (b's rows) starts `chunk` columns (rows) further on
        stride_a = chunk * lda if op_a == _OP_T else chunk
        stride_b = chunk if op_b == _OP_T else chunk * ldb
        self._follow_stream()
        status = self._lib.cublasGemmStridedBatchedEx(
            self._handle, op_b, op_a, n, m, chunk,
            ctypes.byref(self._alpha), b.data.ptr, _CUDA_R_32F, ldb, stride_b,
            a.data.ptr, _CUDA_R_32F, lda, stride_a,
            ctypes.byref(self._beta), partials.data.ptr, _CUDA_R_32F, n, m * n,
            splits, self._compute, _GEMM_DEFAULT,
        )  # fmt: skip
        _check(status, "cublasGemmStridedBatchedEx")
