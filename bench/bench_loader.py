"""fxcache shards -> device matrices on a GPU (the loader).

Generates >= 2 GiB of feature + target columns as monthly fxcache shards on local disk, then
measures, in one run and on one GPU (medians of --repeat runs, page cache warm):
  (a) the loader: ``features_to_device()`` on an open view (shards registered), in GB/s of
      float32 feature + target bytes; also the direct zero-copy variant, and open + copy + close;
  (b) the naive path a user writes: pyarrow ``feather.read_table`` -> numpy ``column_stack`` ->
      ``cupy.asarray``, per shard;
  (c) the PCIe limit: one ``cudaMemcpyAsync`` of the same number of bytes from pinned memory;
plus the registration cost (open on "cuda" minus open on "cpu") and the zero-copy streaming read
rate (a reduction reading the mapped shards in place). Targets on an H200: (a) >= 45 GB/s,
(a)/(c) >= 0.80, (a)/(b) >= 15.

Run:  FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/bench_loader.py
      [--gib 2.25] [--months 24] [--features 60] [--targets 4] [--repeat 5] [--folder DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import cupy
import numpy as np
from _common import median_seconds, write_result
from pyarrow import feather

from fxstore.train.env.loader import FxCacheView, open_fxcache
from fxstore.train.gpu import cuda_host as _cuda_host
from tests.train._fxcache import SYMBOL, Fxcache, write_fxcache


def make_cache(folder: Path, gib: float, months: int, n_features: int, n_targets: int) -> Fxcache:
    """Write `months` shards holding `gib` GiB of float32 features + targets in total."""
    shutil.rmtree(folder, ignore_errors=True)
    rows = int(gib * 2**30 / (4 * (n_features + n_targets)) / months)
    month_list = [(2022 + m // 12, 1 + m % 12) for m in range(months)]
    return write_fxcache(
        folder, months=month_list, rows_per_shard=rows, n_features=n_features, n_targets=n_targets
    )


def gpu_seconds(func: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    """Median seconds of `func` timed with CUDA events on the current stream."""
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        func()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times), times


def pinned_limit(nbytes: int, repeat: int) -> tuple[float, list[float]]:
    """(c): one host-to-device copy of `nbytes` from pinned memory."""
    pinned = cupy.cuda.alloc_pinned_memory(nbytes)
    np.frombuffer(pinned, dtype=np.uint8, count=nbytes)[:] = 7  # touch every page
    device = cupy.empty(nbytes, dtype=np.uint8)
    stream = cupy.cuda.get_current_stream()

    def copy() -> None:
        cupy.cuda.runtime.memcpyAsync(device.data.ptr, pinned.ptr, nbytes, 1, stream.ptr)

    copy()
    return gpu_seconds(copy, repeat)


def naive(cache: Fxcache) -> tuple[cupy.ndarray, cupy.ndarray]:
    """(b): what a user writes by hand, shard by shard."""
    xs, ys = [], []
    for path in cache.paths:
        table = feather.read_table(path, columns=cache.features + cache.targets)
        xs.append(cupy.asarray(np.column_stack([table[n].to_numpy() for n in cache.features])))
        ys.append(cupy.asarray(np.column_stack([table[n].to_numpy() for n in cache.targets])))
    x, y = cupy.concatenate(xs), cupy.concatenate(ys)
    cupy.cuda.get_current_stream().synchronize()
    return x, y


def streaming_read(view: FxCacheView, repeat: int) -> tuple[float, int]:
    """Zero-copy: sum every mapped feature + target byte on the GPU, in place; (seconds, bytes)."""
    spans = []
    for block in view._column_blocks():
        first, last = block.column_offsets[0], block.column_offsets[-1]
        count = (last - first) // 4 + block.n_rows
        spans.append(
            _cuda_host.mapped_array(block.registration, first, np.dtype(np.float32), count)
        )
    out = cupy.empty(len(spans), dtype=np.float32)

    def read() -> None:
        for i, span in enumerate(spans):
            cupy.sum(span, out=out[i])

    read()
    seconds, _ = gpu_seconds(read, repeat)
    return seconds, sum(s.nbytes for s in spans)


STARTED = time.perf_counter()


def log(message: str) -> None:
    """Progress on stdout, with seconds since the script started."""
    print(f"[{time.perf_counter() - STARTED:6.1f} s] {message}", flush=True)


def open_seconds(open_view: Callable[[str], FxCacheView], device: str, repeat: int) -> float:
    """Median seconds to open a view (its close, which unregisters, is not timed)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        view = open_view(device)
        times.append(time.perf_counter() - start)
        view.close()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--gib", type=float, default=2.25)
    parser.add_argument("--months", type=int, default=24)
    parser.add_argument("--features", type=int, default=60)
    parser.add_argument("--targets", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/fxstore-bench-loader"))
    args = parser.parse_args()
    r = args.repeat
    cache = make_cache(args.folder, args.gib, args.months, args.features, args.targets)
    log(f"wrote {len(cache.paths)} shards")
    shard_bytes = sum(p.stat().st_size for p in cache.paths)

    def open_view(device: str, verify: bool = False) -> FxCacheView:
        return open_fxcache(cache.root, SYMBOL, device=device, verify=verify)  # type: ignore[arg-type]

    verify_s, _ = median_seconds(lambda: open_view("cpu", verify=True).close(), 1)
    log(f"verified open (sha256 of every shard) in {verify_s:.2f} s")
    view = open_view("cuda")
    nbytes = view.n_rows * 4 * (len(view.feature_names) + len(view.target_names))
    gb = nbytes / 1e9

    c_s, c_all = pinned_limit(nbytes, r)
    log(f"(c) pinned memcpy {gb / c_s:.1f} GB/s")
    view.features_to_device()  # warm-up: kernel compile, memory pool
    a_s, a_all = median_seconds(view.features_to_device, r)
    log(f"(a) loader {gb / a_s:.1f} GB/s")
    direct = partial(
        _cuda_host.copy_blocks_to_device,
        view._column_blocks(),
        args.features,
        args.targets,
        staged=False,
    )
    direct_s, _ = median_seconds(direct, r)
    stream_s, stream_bytes = streaming_read(view, r)
    x, y = view.features_to_device()
    n_rows = view.n_rows
    del direct  # holds the registrations
    view.close()
    cpu_open_s = open_seconds(open_view, "cpu", r)
    cuda_open_s = open_seconds(open_view, "cuda", r)
    e2e_s, _ = median_seconds(lambda: _open_copy_close(open_view), r)
    log(f"opens and open+copy+close done ({gb / e2e_s:.1f} GB/s end to end)")
    xb, yb = naive(cache)  # warm-up, and the values to compare
    same = bool(cupy.array_equal(x, xb)) and bool(cupy.array_equal(y, yb))
    del x, y, xb, yb
    b_s, b_all = median_seconds(lambda: naive(cache), max(3, r // 2))

    props = cupy.cuda.runtime.getDeviceProperties(0)
    registration_s = cuda_open_s - cpu_open_s
    result: dict[str, object] = {
        "device": props["name"].decode(),
        "cupy": cupy.__version__,
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "shards": len(cache.paths),
        "shard_bytes": shard_bytes,
        "rows": n_rows,
        "features": args.features,
        "targets": args.targets,
        "feature_target_bytes": nbytes,
        "repeat": r,
        "a_loader_s": a_s,
        "a_loader_GBps": gb / a_s,
        "a_loader_all_s": a_all,
        "a_direct_zero_copy_GBps": gb / direct_s,
        "a_open_copy_close_GBps": gb / e2e_s,
        "b_naive_s": b_s,
        "b_naive_GBps": gb / b_s,
        "b_naive_all_s": b_all,
        "c_pinned_memcpy_s": c_s,
        "c_pinned_memcpy_GBps": gb / c_s,
        "c_pinned_all_s": c_all,
        "a_over_c": c_s / a_s,
        "a_over_b_speedup": b_s / a_s,
        "registration_s": registration_s,
        "registration_GBps": shard_bytes / 1e9 / registration_s,
        "open_cpu_s": cpu_open_s,
        "open_cuda_s": cuda_open_s,
        "verify_sha256_open_s": verify_s,
        "streaming_read_GBps": stream_bytes / 1e9 / stream_s,
        "loader_equals_naive": same,
    }
    path = write_result("loader", result)
    print(
        f"{result['device']}: {nbytes / 2**30:.2f} GiB features+targets, {len(cache.paths)} shards"
    )
    for key, value in result.items():
        if key.endswith(("GBps", "_over_c", "speedup", "_s", "equals_naive")):
            print(
                f"  {key:28s} {value:.3f}" if isinstance(value, float) else f"  {key:28s} {value}"
            )
    print(f"wrote {path}")
    shutil.rmtree(args.folder, ignore_errors=True)


def _open_copy_close(open_view: Callable[[str], FxCacheView]) -> None:
    with open_view("cuda") as view:
        view.features_to_device()


if __name__ == "__main__":
    main()
