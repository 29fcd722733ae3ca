"""fxstore.train.env.loader on the CPU: zero-copy mapping, range selection, checksums, lifetimes."""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.errors import InvalidInputError, SchemaError, SymbolNotFoundError
from fxstore.store import manifest_path
from fxstore.train.env.loader import FxCacheView, open_fxcache
from tests.train._fxcache import (
    FEATURESET,
    SYMBOL,
    Fxcache,
    read_shard,
    shard_columns,
    write_fxcache,
    write_shard,
)

pytestmark = pytest.mark.quick


def mapped_ranges(path: Path) -> list[tuple[int, int]]:
    """Address ranges at which this process maps `path` (from /proc/self/maps)."""
    ranges = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.endswith(" " + str(path)):
            lo, hi = line.split()[0].split("-")
            ranges.append((int(lo, 16), int(hi, 16)))
    return ranges


def mapped_files(folder: Path) -> set[str]:
    """Names of the files of `folder` this process maps."""
    lines = Path("/proc/self/maps").read_text().splitlines()
    return {
        Path(line.split()[-1]).name
        for line in lines
        if line.endswith(".arrow") and str(folder) in line
    }


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def all_ts(cache: Fxcache) -> npt.NDArray[np.int64]:
    return np.concatenate([read_shard(p)["ts_close"].to_numpy() for p in cache.paths])


def reference(
    cache: Fxcache, names: list[str], mask: npt.NDArray[np.bool_]
) -> npt.NDArray[np.float32]:
    """Rows under `mask` of the named columns, read with pyarrow, as a (rows, names) matrix."""
    tables = [read_shard(p) for p in cache.paths]
    cols = [np.concatenate([t[n].to_numpy() for t in tables]) for n in names]
    return np.stack(cols, axis=1)[mask] if cols else np.empty((int(mask.sum()), 0), np.float32)


def test_open_fxcache_columns_are_read_only_views_of_the_mapped_shard(cache: Fxcache) -> None:
    with open_fxcache(cache.root, SYMBOL, device="cpu") as view:
        column = view.shards[1].columns["f_03"]
        address = column.__array_interface__["data"][0]
        ranges = mapped_ranges(cache.paths[1])
        assert any(lo <= address and address + column.nbytes <= hi for lo, hi in ranges)
        assert not column.flags.writeable
        np.testing.assert_array_equal(column, read_shard(cache.paths[1])["f_03"].to_numpy())


def test_open_fxcache_without_range_selects_every_row_in_order(cache: Fxcache) -> None:
    with open_fxcache(cache.root, SYMBOL, device="cpu") as view:
        assert view.n_rows == 1500
        assert [s.file for s in view.shards] == ["2024-01.arrow", "2024-02.arrow", "2024-03.arrow"]
        assert [s.row_offset for s in view.shards] == [0, 500, 1000]
        np.testing.assert_array_equal(np.concatenate(view.columns["ts_close"]), all_ts(cache))
        assert list(view.columns) == [
            "ts_close", "trading_day", "is_roll", "session_start", "mkt_close",
            "mkt_half_spread", *cache.features, *cache.targets,
        ]  # fmt: skip


def test_open_fxcache_time_range_maps_only_overlapping_shards(cache: Fxcache) -> None:
    ts = all_ts(cache)
    with open_fxcache(cache.root, SYMBOL, start=int(ts[510]), end=int(ts[990]), device="cpu") as v:
        assert mapped_files(cache.folder) == {"2024-02.arrow"}
        assert [s.file for s in v.shards] == ["2024-02.arrow"]
        np.testing.assert_array_equal(v.columns["ts_close"][0], ts[510:990])
    assert mapped_files(cache.folder) == set()


@pytest.mark.parametrize(
    ("start_row", "end_row"),
    [
        (0, 1500),
        (10, 20),
        (499, 501),
        (500, 1000),
        (250, 1250),
        (None, 700),
        (800, None),
        (1499, None),
    ],
)
def test_open_fxcache_time_range_selects_half_open_rows(
    cache: Fxcache, start_row: int | None, end_row: int | None
) -> None:
    ts = all_ts(cache)
    start = None if start_row is None else int(ts[start_row])
    end = None if end_row is None or end_row >= len(ts) else int(ts[end_row])
    with open_fxcache(cache.root, SYMBOL, start=start, end=end, device="cpu") as view:
        selected = np.concatenate(view.columns["ts_close"])
    keep = np.ones(len(ts), dtype=bool)
    if start is not None:
        keep &= ts >= start
    if end is not None:
        keep &= ts < end
    np.testing.assert_array_equal(selected, ts[keep])


def test_open_fxcache_datetime_bounds_equal_int_ns_bounds(cache: Fxcache) -> None:
    start = dt.datetime(2024, 1, 20, 6, 30, tzinfo=dt.UTC)
    end = np.datetime64("2024-02-10T00:00:00")
    start_ns = int(start.timestamp()) * 1_000_000_000
    end_ns = int(end.astype("datetime64[ns]").astype(np.int64))
    with (
        open_fxcache(cache.root, SYMBOL, start=start, end=end, device="cpu") as a,
        open_fxcache(cache.root, SYMBOL, start=start_ns, end=end_ns, device="cpu") as b,
    ):
        assert a.n_rows == b.n_rows > 0
        ts = np.concatenate(a.columns["ts_close"])
        assert ts[0] >= start_ns and ts[-1] < end_ns


def test_features_to_device_on_cpu_equals_pyarrow_read(cache: Fxcache) -> None:
    ts = all_ts(cache)
    mask = (ts >= ts[123]) & (ts < ts[1456])
    with open_fxcache(cache.root, SYMBOL, start=int(ts[123]), end=int(ts[1456]), device="cpu") as v:
        x, y = v.features_to_device()
    assert x.dtype == y.dtype == np.float32 and x.flags.c_contiguous and y.flags.c_contiguous
    np.testing.assert_array_equal(x, reference(cache, cache.features, mask))
    np.testing.assert_array_equal(y, reference(cache, cache.targets, mask))


def test_features_to_device_on_cpu_spans_several_copy_blocks(tmp_path: Path) -> None:
    big = write_fxcache(
        tmp_path,
        rows_per_shard=[70_000, 3],
        n_features=3,
        n_targets=1,
        months=((2024, 5), (2024, 6)),
    )
    with open_fxcache(big.root, SYMBOL, device="cpu") as view:
        x, y = view.features_to_device()
    everything = np.ones(70_003, dtype=bool)
    np.testing.assert_array_equal(x, reference(big, big.features, everything))
    np.testing.assert_array_equal(y, reference(big, big.targets, everything))


def test_features_to_device_output_exports_dlpack_without_copy(cache: Fxcache) -> None:
    with open_fxcache(cache.root, SYMBOL, device="cpu") as view:
        x, _ = view.features_to_device()
        column = view.shards[0].columns["f_00"]
        assert np.shares_memory(np.from_dlpack(x), x)
        assert np.shares_memory(np.from_dlpack(column), column)


def test_open_fxcache_checksum_mismatch_names_the_shard(cache: Fxcache) -> None:
    damaged = cache.paths[2]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(InvalidInputError, match=r"2024-03\.arrow: SHA-256 .* precompute --force"):
        open_fxcache(cache.root, SYMBOL, device="cpu")


def test_open_fxcache_checksums_only_selected_shards_and_verify_false_skips(cache: Fxcache) -> None:
    data = bytearray(cache.paths[2].read_bytes())
    data[len(data) // 2] ^= 0xFF
    cache.paths[2].write_bytes(bytes(data))
    end = int(all_ts(cache)[1000])
    with open_fxcache(cache.root, SYMBOL, end=end, device="cpu") as view:
        assert view.n_rows == 1000
    with open_fxcache(cache.root, SYMBOL, device="cpu", verify=False) as view:
        assert view.n_rows == 1500


def test_open_close_1000_times_leaks_no_mapping_or_descriptor(cache: Fxcache) -> None:
    gc.collect()
    maps, fds = mapped_files(cache.folder), open_fds()
    for _ in range(1000):
        with open_fxcache(cache.root, SYMBOL, device="cpu", verify=False) as view:
            view.features_to_device()
            assert view.shards[0].columns["f_00"].size == 500
    assert maps == set() and mapped_files(cache.folder) == set()
    assert open_fds() == fds


def test_arrays_outliving_the_view_stay_valid_and_unmap_when_dropped(cache: Fxcache) -> None:
    expected = read_shard(cache.paths[0])["f_01"].to_numpy()
    with open_fxcache(cache.root, SYMBOL, device="cpu") as view:
        column = view.shards[0].columns["f_01"]
        x, _ = view.features_to_device()
    assert view.closed
    np.testing.assert_array_equal(column, expected)
    assert mapped_files(cache.folder) == {"2024-01.arrow"}
    del column
    assert mapped_files(cache.folder) == set()
    np.testing.assert_array_equal(x[:500, 1], expected)


@pytest.mark.parametrize(
    "use", [lambda v: v.shards, lambda v: v.columns, FxCacheView.features_to_device]
)
def test_closed_view_raises(cache: Fxcache, use: object) -> None:
    view = open_fxcache(cache.root, SYMBOL, device="cpu")
    view.close()
    view.close()
    with pytest.raises(InvalidInputError, match=r"view of 'ES\.FUT' is closed; open it again"):
        use(view)  # type: ignore[operator]


def test_open_fxcache_unknown_symbol_lists_known(cache: Fxcache) -> None:
    write_fxcache(cache.root, symbol="NQ.FUT")
    with pytest.raises(
        SymbolNotFoundError, match=r"symbol 'CL.FUT' in .*; known: ES\.FUT, NQ\.FUT\."
    ):
        open_fxcache(cache.root, "CL.FUT")


def test_open_fxcache_empty_store_says_none_known(tmp_path: Path) -> None:
    with pytest.raises(SymbolNotFoundError, match=r"known: none\. Run `fxstore precompute`"):
        open_fxcache(tmp_path, SYMBOL)


def test_open_fxcache_several_featuresets_need_one_named(cache: Fxcache) -> None:
    write_fxcache(cache.root, featureset="fs000other")
    with pytest.raises(
        InvalidInputError,
        match=rf"2 fxcaches \(fs000other, {FEATURESET}\) and none .*: pick one with --featureset",
    ):
        open_fxcache(cache.root, SYMBOL, device="cpu")
    with open_fxcache(cache.root, SYMBOL, featureset=FEATURESET, device="cpu") as view:
        assert view.manifest["featureset"] == {"hash": FEATURESET, "features": cache.features}
    with pytest.raises(InvalidInputError, match=r"was 'fs999' \(`fxstore ls` lists them\)\."):
        open_fxcache(cache.root, SYMBOL, featureset="fs999")


def test_open_fxcache_missing_shard_file_says_rerun(cache: Fxcache) -> None:
    cache.paths[1].unlink()
    with pytest.raises(InvalidInputError, match=r"2024-02\.arrow: shard of 'ES\.FUT' .* missing"):
        open_fxcache(cache.root, SYMBOL, device="cpu")


def test_open_fxcache_shard_with_wrong_schema_raises_schema_error(cache: Fxcache) -> None:
    cols = shard_columns(2024, 2, 500, cache.features, cache.targets, np.random.default_rng(1))
    cols["f_02"] = cols["f_02"].astype(np.float64)
    write_shard(cache.paths[1], cols)
    with pytest.raises(SchemaError, match=r"2024-02\.arrow: columns are \[.*f_02:double"):
        open_fxcache(cache.root, SYMBOL, device="cpu", verify=False)


def test_open_fxcache_manifest_of_other_format_raises_schema_error(cache: Fxcache) -> None:
    manifest = dict(cache.manifest, format="fxcache/0")
    (cache.folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SchemaError, match=r"format is 'fxcache/0', expected 'fxcache/1'\.$"):
        open_fxcache(cache.root, SYMBOL, device="cpu")


@pytest.mark.parametrize("absolute", [False, True])
def test_open_fxcache_shard_entry_outside_the_cache_folder_is_refused(
    cache: Fxcache, absolute: bool
) -> None:
    outside = cache.root / "fxcache" / "outside.arrow"  # a valid shard: only the path is wrong
    outside.write_bytes(cache.paths[0].read_bytes())
    name = str(outside) if absolute else "../../outside.arrow"
    shards = [dict(s) for s in cache.manifest["shards"]]  # type: ignore[attr-defined]
    shards[0]["file"] = name
    manifest_path(cache.folder).write_text(json.dumps(dict(cache.manifest, shards=shards)))

    with pytest.raises(SchemaError) as info:
        open_fxcache(cache.root, SYMBOL, device="cpu")

    assert str(info.value) == (
        f"{manifest_path(cache.folder)}: file entry {name!r} is not a file inside "
        f"{cache.folder}; refusing to read it (the manifest is damaged or was edited): re-run "
        "with --force."
    )
    assert mapped_files(cache.root / "fxcache") == set()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": 10, "end": 10}, r"`start` must be before `end`, was 10 >= 10 ns\."),
        ({"start": dt.datetime(2024, 1, 2)}, r"`start` must be timezone-aware"),
        ({"end": "2024-01-02"}, r"`end` must be int ns UTC, .* was '2024-01-02'\."),
        ({"end": np.datetime64("NaT", "ns")}, r"`end` must be int ns UTC"),
        ({"device": "tpu"}, r"`device` must be 'auto', 'cpu' or 'cuda', was 'tpu'\."),
        (
            {"start": 0, "end": 1},
            r"no rows of 'ES\.FUT' with 0 <= ts_close < 1 ns; the cache spans",
        ),
    ],
)
def test_open_fxcache_bad_arguments_raise(
    cache: Fxcache, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        open_fxcache(cache.root, SYMBOL, **kwargs)  # type: ignore[arg-type]


def test_open_fxcache_range_between_two_bars_raises(cache: Fxcache) -> None:
    ts = all_ts(cache)
    with pytest.raises(InvalidInputError, match="no rows"):
        open_fxcache(cache.root, SYMBOL, start=int(ts[600]) + 1, end=int(ts[601]), device="cpu")


def test_open_fxcache_cuda_without_cupy_raises(cache: Fxcache) -> None:
    if _cupy_importable():
        pytest.skip("CuPy is installed here")
    with pytest.raises(InvalidInputError, match=r"device='cuda' needs CuPy .* device='cpu'"):
        open_fxcache(cache.root, SYMBOL, device="cuda")
    with open_fxcache(cache.root, SYMBOL) as view:
        assert view.device == "cpu"


def _cupy_importable() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


def test_importing_fxstore_and_the_loader_never_imports_cupy() -> None:
    code = "import sys, fxstore, fxstore.train.env.loader; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
