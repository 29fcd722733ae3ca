"""CUDA side of the loader: register mapped shard files, wrap them as CuPy arrays, bulk-copy them.

Only :mod:`fxstore.train.env.loader` imports this module, and only once a GPU was asked for: it
imports CuPy at import time, so importing fxstore on a machine without CuPy never reaches it.

A mapped file is registered with CUDA as pinned, device-mapped, read-only host memory
(``cudaHostRegister`` with ``cudaHostRegisterMapped | cudaHostRegisterReadOnly``). The GPU can then
read it in place (zero-copy, over PCIe) or DMA it into device memory at the PCIe limit. Random
access must go to device memory: gathers through mapped host memory are ~100x slower (DESIGN.md).
"""

from __future__ import annotations

import itertools
import mmap
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import cupy
import numpy as np

__all__ = [
    "ColumnBlock",
    "HostRegistration",
    "copy_blocks_to_device",
    "cuda_device_count",
    "is_registered",
    "mapped_array",
]

# cudaHostRegister flags and enums of the CUDA runtime API (cupy.cuda.runtime does not export them).
HOST_REGISTER_MAPPED: Final = 0x02  # cudaHostRegisterMapped
HOST_REGISTER_READ_ONLY: Final = 0x08  # cudaHostRegisterReadOnly
MEMCPY_HOST_TO_DEVICE: Final = 1  # cudaMemcpyHostToDevice
MEMORY_TYPE_UNREGISTERED: Final = 0  # cudaMemoryTypeUnregistered

_TILE: Final = 32
_BLOCK_Y: Final = 8

# Tiled transpose of column-major float32 columns into row-major X (features) and Y (targets).
# Column c, row r of the source is src[off(c) + r], off(c) = col_off[c] if col_off else c * stride.
# The shared tile makes both the column reads and the row writes coalesced.
_COLUMNS_TO_ROWS_SRC: Final = r"""
extern "C" __global__ void fx_columns_to_rows(
    const float* __restrict__ src, const long long* __restrict__ col_off, long long col_stride,
    long long n_rows, int n_features, int n_targets,
    float* __restrict__ x, float* __restrict__ y, long long row0)
{
    __shared__ float tile[32][33];
    const int n_cols = n_features + n_targets;
    const long long r_base = (long long)blockIdx.x * 32;
    const int c_base = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        const int c = c_base + j;
        const long long r = r_base + threadIdx.x;
        if (c < n_cols && r < n_rows) {
            const long long off = col_off ? col_off[c] : (long long)c * col_stride;
            tile[j][threadIdx.x] = src[off + r];
        }
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
        const long long r = r_base + j;
        const int c = c_base + threadIdx.x;
        if (c < n_cols && r < n_rows) {
            const float v = tile[threadIdx.x][j];
            if (c < n_features) {
                x[(row0 + r) * n_features + c] = v;
            } else {
                y[(row0 + r) * n_targets + (c - n_features)] = v;
            }
        }
    }
}
"""
_columns_to_rows = cupy.RawKernel(_COLUMNS_TO_ROWS_SRC, "fx_columns_to_rows")


def cuda_device_count() -> int:
    """Number of CUDA devices CuPy sees (0 when the driver finds none)."""
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except cupy.cuda.runtime.CUDARuntimeError:  # no driver or no device: a CPU machine
        return 0


def is_registered(host_ptr: int) -> bool:
    """Whether `host_ptr` lies in host memory currently registered with (or allocated by) CUDA."""
    attrs = cupy.cuda.runtime.pointerGetAttributes(host_ptr)
    return int(attrs.type) != MEMORY_TYPE_UNREGISTERED


def _unregister(host_ptr: int) -> None:
    # Work queued on any stream may still read the range: wait for it before unpinning.
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.runtime.hostUnregister(host_ptr)


class HostRegistration:
    """A read-only memory-mapped file registered with CUDA as pinned, device-mapped host memory.

    The registration keeps the mapping alive and is released exactly once, by a finalizer, when
    the last reference to it dies (each :func:`mapped_array` holds one) or at interpreter exit.
    Unregistering first waits for the device to finish queued work, which may still read it.
    """

    __slots__ = ("__weakref__", "_finalizer", "_mapping", "device_id", "device_ptr", "host_ptr")

    def __init__(self, mapping: mmap.mmap) -> None:
        self._mapping = mapping
        probe = np.frombuffer(mapping, dtype=np.uint8)
        self.host_ptr: int = int(probe.__array_interface__["data"][0])
        del probe  # release the buffer export at once
        self.device_id: int = int(cupy.cuda.runtime.getDevice())
        flags = HOST_REGISTER_MAPPED | HOST_REGISTER_READ_ONLY
        cupy.cuda.runtime.hostRegister(self.host_ptr, len(mapping), flags)
        self._finalizer = weakref.finalize(self, _unregister, self.host_ptr)
        attrs = cupy.cuda.runtime.pointerGetAttributes(self.host_ptr)
        self.device_ptr: int = int(attrs.devicePointer)


def mapped_array(
    registration: HostRegistration, offset: int, dtype: np.dtype[np.generic], count: int
) -> cupy.ndarray:
    """Wrap `count` items of `dtype` at byte `offset` of a registered mapping as a CuPy array.

    No copy: the device reads host memory over PCIe. The array owns a reference to
    `registration`, so the mapping stays registered and mapped while the array lives. It is
    read-only memory: writing to it from a kernel is an illegal access.
    """
    nbytes = count * dtype.itemsize
    memory = cupy.cuda.UnownedMemory(
        registration.device_ptr + offset, nbytes, registration, registration.device_id
    )
    return cupy.ndarray((count,), dtype=dtype, memptr=cupy.cuda.MemoryPointer(memory, 0))


@dataclass(frozen=True, slots=True)
class ColumnBlock:
    """Rows ``[row_start, row_start + n_rows)`` of equally long float32 columns of one file."""

    registration: HostRegistration
    column_offsets: tuple[int, ...]
    """Byte offsets of the columns' data in the file: features first, then targets."""
    row_start: int
    n_rows: int


def _launch_columns_to_rows(
    src_ptr: int,
    col_off: cupy.ndarray | None,
    col_stride: int,
    block: ColumnBlock,
    out: tuple[cupy.ndarray, cupy.ndarray],
    row0: int,
) -> None:
    x, y = out
    n_features, n_targets = int(x.shape[1]), int(y.shape[1])
    grid = (
        (block.n_rows + _TILE - 1) // _TILE,
        (n_features + n_targets + _TILE - 1) // _TILE,
    )
    args = (
        np.uint64(src_ptr),
        col_off if col_off is not None else np.uint64(0),
        np.int64(col_stride),
        np.int64(block.n_rows),
        np.int32(n_features),
        np.int32(n_targets),
        x,
        y,
        np.int64(row0),
    )
    _columns_to_rows(grid, (_TILE, _BLOCK_Y), args)


def _copy_block_to_staging(block: ColumnBlock, staging_ptr: int, stream: cupy.cuda.Stream) -> None:
    """DMA the block's rows of every column into `staging_ptr`, packed column-major."""
    width = block.n_rows * 4
    offsets = block.column_offsets
    src0 = block.registration.host_ptr + block.row_start * 4
    pitches = {b - a for a, b in itertools.pairwise(offsets)}
    if len(pitches) <= 1:  # equally spaced columns (what pyarrow writes): one 2-D copy
        pitch = pitches.pop() if pitches else width
        cupy.cuda.runtime.memcpy2DAsync(
            staging_ptr,
            width,
            src0 + offsets[0],
            pitch,
            width,
            len(offsets),
            MEMCPY_HOST_TO_DEVICE,
            stream.ptr,
        )
        return
    for j, offset in enumerate(offsets):
        cupy.cuda.runtime.memcpyAsync(
            staging_ptr + j * width, src0 + offset, width, MEMCPY_HOST_TO_DEVICE, stream.ptr
        )


def _copy_staged(blocks: Sequence[ColumnBlock], out: tuple[cupy.ndarray, cupy.ndarray]) -> None:
    """DMA each block into one of two device staging buffers, transpose on device, overlapped."""
    n_cols = int(out[0].shape[1] + out[1].shape[1])
    max_rows = max(b.n_rows for b in blocks)
    staging = [cupy.empty(max_rows * n_cols, dtype=np.float32) for _ in range(2)]
    copy_stream = cupy.cuda.Stream(non_blocking=True)
    kernel_stream = cupy.cuda.Stream(non_blocking=True)
    # The outputs and staging buffers were allocated on the current stream: start after it.
    ready = cupy.cuda.get_current_stream().record()
    copy_stream.wait_event(ready)
    kernel_stream.wait_event(ready)
    copied = [cupy.cuda.Event(disable_timing=True) for _ in range(2)]
    consumed: list[cupy.cuda.Event | None] = [None, None]
    row0 = 0
    for k, block in enumerate(blocks):
        slot = k % 2
        if (event := consumed[slot]) is not None:
            copy_stream.wait_event(event)  # the kernel reading this buffer last time is done
        _copy_block_to_staging(block, staging[slot].data.ptr, copy_stream)
        copied[slot].record(copy_stream)
        kernel_stream.wait_event(copied[slot])
        with kernel_stream:
            _launch_columns_to_rows(staging[slot].data.ptr, None, block.n_rows, block, out, row0)
        consumed[slot] = kernel_stream.record()
        row0 += block.n_rows
    kernel_stream.synchronize()


def _copy_direct(blocks: Sequence[ColumnBlock], out: tuple[cupy.ndarray, cupy.ndarray]) -> None:
    """Transpose straight out of mapped host memory: one zero-copy kernel per block."""
    row0 = 0
    for block in blocks:
        # Offsets in floats from the mapped base; pyarrow aligns buffers to 8 bytes.
        col_off = cupy.asarray(
            [offset // 4 + block.row_start for offset in block.column_offsets], dtype=np.int64
        )
        _launch_columns_to_rows(block.registration.device_ptr, col_off, 0, block, out, row0)
        row0 += block.n_rows
    cupy.cuda.get_current_stream().synchronize()


def copy_blocks_to_device(
    blocks: Sequence[ColumnBlock], n_features: int, n_targets: int, *, staged: bool = True
) -> tuple[cupy.ndarray, cupy.ndarray]:
    """Copy the blocks' rows, in order, into new device matrices X and Y in one bulk pass.

    Parameters
    ----------
    blocks
        Row ranges of registered files; every block lists ``n_features + n_targets`` columns.
    n_features, n_targets
        Widths of X and Y.
    staged
        True: DMA (``cudaMemcpy2DAsync``) into device staging, then transpose on device,
        double-buffered so copies and kernels overlap. False: one kernel per block reads the
        mapped host memory directly (zero-copy).

    Returns
    -------
    tuple of cupy.ndarray
        X, float32 ``(n_rows, n_features)``, and Y, float32 ``(n_rows, n_targets)``, C-ordered
        and device-resident; complete when this returns.
    """
    n_rows = sum(b.n_rows for b in blocks)
    out = (
        cupy.empty((n_rows, n_features), dtype=np.float32),
        cupy.empty((n_rows, n_targets), dtype=np.float32),
    )
    if n_rows:
        (_copy_staged if staged else _copy_direct)(blocks, out)
    return out
