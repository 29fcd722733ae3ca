"""cuBLASLt GEMMs with fused epilogues for the agent on CuPy: bias + ReLU in the forward GEMM
(with the ReLU's bit mask kept for the backward pass) and ReLU gradient + bias gradient in the
backward GEMM, so the update needs no separate bias/ReLU, ReLU-gradient or column-sum passes.

Like :mod:`fxstore.train.gpu.cublas`, this calls the library CuPy loaded (``libcublasLt``, which
``libcublas`` itself links) through ctypes, with a fixed workspace so that the calls can be
graph-captured. Row-major arrays are column-major transposes: ``out = a @ b`` is
``out^T = b^T a^T``, so the epilogue's bias (one value per row of cuBLASLt's output) is one
value per column of ``out``, and the ReLU mask is a column-major bit matrix of ``out^T``.

Each distinct GEMM (shapes, strides, transposes, epilogue) gets a plan once: its descriptors
and the algorithm cuBLASLt's heuristic picks, restricted to reductions through the workspace
(never in place in the output with atomics), so that results repeat bit for bit.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from dataclasses import dataclass
from typing import Final

import cupy

from fxstore.train.gpu.cublas import (
    _COMPUTE_32F,
    _COMPUTE_32F_FAST_TF32,
    _CUDA_R_32F,
    _OP_N,
    _operand,
)

__all__ = [
    "EPILOGUE_DEFAULT",
    "EPILOGUE_DRELU_BGRAD",
    "EPILOGUE_RELU_AUX_BIAS",
    "EPILOGUE_RELU_BIAS",
    "CublasLt",
]

logger = logging.getLogger(__name__)

# cublasLt.h
EPILOGUE_DEFAULT: Final = 1  # a plain product
EPILOGUE_RELU_BIAS: Final = 6
EPILOGUE_RELU_AUX_BIAS: Final = 134
EPILOGUE_DRELU_BGRAD: Final = 152
_DESC_TRANSA: Final = 3
_DESC_TRANSB: Final = 4
_DESC_EPILOGUE: Final = 7
_DESC_BIAS_POINTER: Final = 8
_DESC_AUX_POINTER: Final = 11
_DESC_AUX_LD: Final = 12
_PREF_MAX_WORKSPACE_BYTES: Final = 1
_PREF_REDUCTION_SCHEME_MASK: Final = 3
#: COMPUTE_TYPE | OUTPUT_TYPE: split-K partials reduced through the workspace, never in
#: place in the output (INPLACE = 1 adds them there with atomics: not repeatable).
_DETERMINISTIC_REDUCTIONS: Final = 6
#: Bits of a ReLU mask column are a multiple of this (cuBLASLt's rule for its leading dim).
MASK_BITS_ALIGN: Final = 128


class _HeuristicResult(ctypes.Structure):
    _fields_ = [
        ("algo", ctypes.c_uint64 * 8),
        ("workspace_size", ctypes.c_size_t),
        ("state", ctypes.c_int),
        ("waves_count", ctypes.c_float),
        ("reserved", ctypes.c_int * 4),
    ]


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    """The libcublasLt this process loaded with CuPy's libcublas (from /proc/self/maps)."""
    cupy.cuda.device.get_cublas_handle()
    path = None
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            name = line.rsplit(" ", 1)[-1].strip()
            if "/libcublasLt.so" in name:
                path = name
                break
    if path is None:
        raise OSError("libcublasLt is not loaded in this process")
    lib = ctypes.CDLL(path)
    p, i32, u64, i64, size_t = (
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_uint64,
        ctypes.c_int64,
        ctypes.c_size_t,
    )
    lib.cublasLtCreate.argtypes = [ctypes.POINTER(p)]
    lib.cublasLtDestroy.argtypes = [p]
    lib.cublasLtMatmulDescCreate.argtypes = [ctypes.POINTER(p), i32, i32]
    lib.cublasLtMatmulDescSetAttribute.argtypes = [p, i32, p, size_t]
    lib.cublasLtMatrixLayoutCreate.argtypes = [ctypes.POINTER(p), i32, u64, u64, i64]
    lib.cublasLtMatmulPreferenceCreate.argtypes = [ctypes.POINTER(p)]
    lib.cublasLtMatmulPreferenceSetAttribute.argtypes = [p, i32, p, size_t]
    lib.cublasLtMatmulAlgoGetHeuristic.argtypes = [
        p, p, p, p, p, p, p, i32, ctypes.POINTER(_HeuristicResult), ctypes.POINTER(i32)
    ]  # fmt: skip
    lib.cublasLtMatmul.argtypes = [
        p, p, p, p, p, p, p, p, p, p, p, p, p, p, size_t, p
    ]  # fmt: skip
    logger.debug("cuBLASLt for fused epilogues: %s", path)
    return lib


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"{call} failed with cuBLAS status {status}")


def _layout(x: cupy.ndarray) -> tuple[int, int, int, int]:
    """(op, rows, cols, ld) of a row-major operand (or a ``.T`` view of one) as the stored
    column-major matrix cuBLASLt reads (see ``_cublas._operand``)."""
    op, ld = _operand(x)
    rows, cols = (x.shape[1], x.shape[0]) if op == _OP_N else (x.shape[0], x.shape[1])
    return op, rows, cols, ld


@dataclass(slots=True)
class _Plan:
    desc: ctypes.c_void_p
    a: ctypes.c_void_p
    b: ctypes.c_void_p
    d: ctypes.c_void_p
    algo: _HeuristicResult


class CublasLt:
    """A cuBLASLt handle whose matmuls work eagerly and under CUDA graph capture.

    Parameters
    ----------
    tf32
        Round float32 inputs to TF32 (tensor cores); accumulation stays float32.
    workspace
        Device bytes the GEMMs may use (shared with ``_cublas.Cublas``: both run on one
        stream, one at a time).
    """

    def __init__(self, *, tf32: bool, workspace: cupy.ndarray) -> None:
        self._lib = _library()
        handle = ctypes.c_void_p()
        _check(self._lib.cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
        self._handle = handle
        self._workspace = workspace
        self._compute = _COMPUTE_32F_FAST_TF32 if tf32 else _COMPUTE_32F
        self._alpha, self._beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        self._plans: dict[tuple[object, ...], _Plan] = {}
        pref = ctypes.c_void_p()
        _check(self._lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "preference")
        self._set(
            self._lib.cublasLtMatmulPreferenceSetAttribute,
            pref,
            _PREF_MAX_WORKSPACE_BYTES,
            ctypes.c_uint64(workspace.nbytes),
        )
        self._set(
            self._lib.cublasLtMatmulPreferenceSetAttribute,
            pref,
            _PREF_REDUCTION_SCHEME_MASK,
            ctypes.c_uint32(_DETERMINISTIC_REDUCTIONS),
        )
        self._pref = pref

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            self._lib.cublasLtDestroy(handle)

    @staticmethod
    def _set(setter: object, obj: ctypes.c_void_p, attr: int, value: ctypes._SimpleCData) -> None:  # type: ignore[type-arg]
        status = setter(obj, attr, ctypes.byref(value), ctypes.sizeof(value))  # type: ignore[operator]
        _check(status, f"set attribute {attr}")

    def _matrix(self, rows: int, cols: int, ld: int) -> ctypes.c_void_p:
        layout = ctypes.c_void_p()
        status = self._lib.cublasLtMatrixLayoutCreate(
            ctypes.byref(layout), _CUDA_R_32F, rows, cols, ld
        )
        _check(status, "cublasLtMatrixLayoutCreate")
        return layout

    def _plan(
        self, a: cupy.ndarray, b: cupy.ndarray, out: cupy.ndarray, epilogue: int, aux_ld: int
    ) -> _Plan:
        # out^T (n x m) = b^T a^T: cuBLASLt's A is our b, its B our a
        op_b, *shape_b = _layout(b)
        op_a, *shape_a = _layout(a)
        _, ldc = _operand(out)
        key = (op_b, *shape_b, op_a, *shape_a, out.shape, ldc, epilogue, aux_ld)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        lib = self._lib
        desc = ctypes.c_void_p()
        _check(
            lib.cublasLtMatmulDescCreate(ctypes.byref(desc), self._compute, _CUDA_R_32F),
            "cublasLtMatmulDescCreate",
        )
        setter = lib.cublasLtMatmulDescSetAttribute
        self._set(setter, desc, _DESC_TRANSA, ctypes.c_int32(op_b))
        self._set(setter, desc, _DESC_TRANSB, ctypes.c_int32(op_a))
        self._set(setter, desc, _DESC_EPILOGUE, ctypes.c_uint32(epilogue))
        if aux_ld:
            self._set(setter, desc, _DESC_AUX_LD, ctypes.c_int64(aux_ld))
        layout_a = self._matrix(*shape_b)
        layout_b = self._matrix(*shape_a)
        layout_d = self._matrix(out.shape[1], out.shape[0], ldc)
        result = _HeuristicResult()
        found = ctypes.c_int(0)
        status = lib.cublasLtMatmulAlgoGetHeuristic(
            self._handle, desc, layout_a, layout_b, layout_d, layout_d, self._pref, 1,
            ctypes.byref(result), ctypes.byref(found),
        )  # fmt: skip
        if status != 0 or found.value == 0:
            raise RuntimeError(
                f"cuBLASLt has no algorithm for a {out.shape} GEMM with epilogue {epilogue} "
                f"(status {status})"
            )
        plan = self._plans[key] = _Plan(desc, layout_a, layout_b, layout_d, result)
        return plan

    def matmul(
        self,
        a: cupy.ndarray,
        b: cupy.ndarray,
        out: cupy.ndarray,
        *,
        epilogue: int,
        bias: cupy.ndarray | None = None,
        aux: cupy.ndarray | None = None,
        aux_ld: int = 0,
    ) -> None:
        """``out = epilogue(a @ b)``: float32 2-D arrays, `out` row-major, `a` and `b` may be
        ``.T`` views. `bias` is the bias (RELU_BIAS, RELU_AUX_BIAS) or receives the bias
        gradient (DRELU_BGRAD), one value per column of `out`, and None with DEFAULT (a
        plain product: cuBLASLt refuses a bias pointer its epilogue does not use); `aux` is
        the ReLU bit mask (written by RELU_AUX_BIAS, read by DRELU_BGRAD), `aux_ld` bits per
        row of `out`."""
        (m, k), (k2, n) = a.shape, b.shape
        bias_shape = None if bias is None else bias.shape
        if (
            k != k2
            or out.shape != (m, n)
            or bias_shape != (None if epilogue == EPILOGUE_DEFAULT else (n,))
        ):
            raise ValueError(
                f"GEMM shapes {a.shape} @ {b.shape} -> {out.shape} (bias {bias_shape}, "
                f"epilogue {epilogue}) disagree"
            )
        plan = self._plan(a, b, out, epilogue, aux_ld)
        setter = self._lib.cublasLtMatmulDescSetAttribute
        if bias is not None:
            self._set(setter, plan.desc, _DESC_BIAS_POINTER, ctypes.c_void_p(bias.data.ptr))
        if aux is not None:
            self._set(setter, plan.desc, _DESC_AUX_POINTER, ctypes.c_void_p(aux.data.ptr))
        status = self._lib.cublasLtMatmul(
            self._handle, plan.desc,
            ctypes.byref(self._alpha), b.data.ptr, plan.a, a.data.ptr, plan.b,
            ctypes.byref(self._beta), out.data.ptr, plan.d, out.data.ptr, plan.d,
            ctypes.byref(plan.algo.algo), self._workspace.data.ptr, self._workspace.nbytes,
            cupy.cuda.get_current_stream().ptr,
        )  # fmt: skip
        _check(status, "cublasLtMatmul")
