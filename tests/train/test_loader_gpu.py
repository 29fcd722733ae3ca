"""fxstore.train.env.loader on a GPU: registration, zero-copy mapped views, the bulk copy, DLPack.

Every test here needs CuPy and a CUDA device; tests/train/conftest.py skips them otherwise.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from fxstore.train.env.loader import open_fxcache
from tests.train._fxcache import SYMBOL, Fxcache, read_shard, write_fxcache
from tests.train.test_loader import all_ts, mapped_files, mapped_ranges, open_fds, reference

pytestmark = pytest.mark.gpu

MEMORY_TYPE_HOST = 1  # cudaMemoryTypeHost


@pytest.fixture
def wide(tmp_path: Path) -> Fxcache:
    """Shapes that cross the kernel's 32x32 tiles: 37 features, 3 targets, odd row counts."""
    return write_fxcache(tmp_path, rows_per_shard=[4099, 2053, 3001], n_features=37, n_targets=3)


def host_pointer(array: object) -> int:
    import cupy

    return int(cupy.cuda.runtime.pointerGetAttributes(array.data.ptr).hostPointer)  # type: ignore[attr-defined]


def test_cuda_columns_are_zero_copy_views_of_registered_mapped_shards(wide: Fxcache) -> None:
    import cupy

    with open_fxcache(wide.root, SYMBOL, device="cuda") as view:
        assert view.device == "cuda"
        column = view.shards[2].columns["f_36"]
        assert isinstance(column, cupy.ndarray)
        attrs = cupy.cuda.runtime.pointerGetAttributes(column.data.ptr)
        assert attrs.type == MEMORY_TYPE_HOST
        assert any(lo <= attrs.hostPointer < hi for lo, hi in mapped_ranges(wide.paths[2]))
        np.testing.assert_array_equal(
            cupy.asnumpy(column), read_shard(wide.paths[2])["f_36"].to_numpy()
        )
        assert float(column.sum()) == pytest.approx(
            float(read_shard(wide.paths[2])["f_36"].to_numpy().sum()), rel=1e-4
        )


@pytest.mark.parametrize("rows", [(0, 9153), (17, 9100), (4099, 6152), (4098, 4100)])
def test_features_to_device_cuda_equals_host_data(wide: Fxcache, rows: tuple[int, int]) -> None:
    import cupy

    ts = all_ts(wide)
    start, end = int(ts[rows[0]]), (int(ts[rows[1]]) if rows[1] < len(ts) else None)
    mask = (ts >= start) & (ts < (end if end is not None else ts[-1] + 1))
    with open_fxcache(wide.root, SYMBOL, start=start, end=end, device="cuda") as view:
        x, y = view.features_to_device()
    assert isinstance(x, cupy.ndarray) and x.flags.c_contiguous and x.dtype == np.float32
    assert cupy.cuda.runtime.pointerGetAttributes(x.data.ptr).type == 2  # device memory
    np.testing.assert_array_equal(cupy.asnumpy(x), reference(wide, wide.features, mask))
    np.testing.assert_array_equal(cupy.asnumpy(y), reference(wide, wide.targets, mask))


def test_direct_zero_copy_transpose_equals_staged_copy(wide: Fxcache) -> None:
    import cupy

    from fxstore.train.gpu import cuda_host as _cuda_host

    with open_fxcache(wide.root, SYMBOL, start=int(all_ts(wide)[100]), device="cuda") as view:
        staged = view.features_to_device()
        blocks = view._column_blocks()
        direct = _cuda_host.copy_blocks_to_device(blocks, 37, 3, staged=False)
    for a, b in zip(staged, direct, strict=True):
        assert bool(cupy.array_equal(a, b))


def _open_close(wide: Fxcache, times: int) -> None:
    from fxstore.train.gpu import cuda_host as _cuda_host

    for _ in range(times):
        with open_fxcache(wide.root, SYMBOL, device="cuda", verify=False) as view:
            pointers = [host_pointer(s.columns["ts_close"]) for s in view.shards]
            assert all(_cuda_host.is_registered(p) for p in pointers)
        assert not any(_cuda_host.is_registered(p) for p in pointers)


def test_open_close_1000_times_leaks_no_registration(wide: Fxcache) -> None:
    fds = open_fds()
    _open_close(wide, 1000)
    assert mapped_files(wide.folder) == set()
    assert open_fds() == fds


# The device's free memory is the whole GPU's: other processes' GPU tests (pytest-xdist
# workers) move it. Left out of the suite (`pytest -q -n 0 -m "gpu and alone"` runs it).
@pytest.mark.alone
def test_open_close_1000_times_leaves_the_device_memory_as_it_was(wide: Fxcache) -> None:
    import cupy

    gc.collect()
    cupy.cuda.runtime.deviceSynchronize()
    free_before, _ = cupy.cuda.runtime.memGetInfo()
    _open_close(wide, 1000)
    free_after, _ = cupy.cuda.runtime.memGetInfo()
    assert free_before - free_after < 64 << 20


def test_cuda_arrays_outliving_the_view_keep_their_registration_until_dropped(
    wide: Fxcache,
) -> None:
    import cupy

    from fxstore.train.gpu import cuda_host as _cuda_host

    expected = read_shard(wide.paths[1])["target_r2"].to_numpy()
    with open_fxcache(wide.root, SYMBOL, device="cuda") as view:
        column = view.shards[1].columns["target_r2"]
        _, y = view.features_to_device()
    pointer = host_pointer(column)
    assert _cuda_host.is_registered(pointer)
    np.testing.assert_array_equal(cupy.asnumpy(column), expected)
    assert mapped_files(wide.folder) == {"2024-02.arrow"}
    del column
    assert not _cuda_host.is_registered(pointer)
    assert mapped_files(wide.folder) == set()
    np.testing.assert_array_equal(cupy.asnumpy(y[4099:6152, 2]), expected)


def test_device_matrices_go_to_torch_through_dlpack_without_copy(wide: Fxcache) -> None:
    torch = pytest.importorskip("torch")
    import cupy

    with open_fxcache(wide.root, SYMBOL, device="cuda") as view:
        x, _ = view.features_to_device()
        column = view.shards[0].columns["f_00"]
        tx, tcol = torch.from_dlpack(x), torch.from_dlpack(column)
    assert tx.is_cuda and tx.data_ptr() == x.data.ptr and tuple(tx.shape) == x.shape
    assert torch.equal(tx.cpu(), torch.from_numpy(cupy.asnumpy(x)))
    assert tcol.data_ptr() == column.data.ptr
    assert float(tcol.double().sum()) == pytest.approx(float(column.astype(cupy.float64).sum()))
    back = cupy.from_dlpack(tx)
    assert back.data.ptr == x.data.ptr
