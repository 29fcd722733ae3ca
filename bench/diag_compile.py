"""What a machine's first training run compiles: each CuPy kernel compile, its seconds.

The 9-fold year took 72 s with an empty CuPy kernel cache and 46 s from that
cache right after (`bench/results/learn_gpu_act_cold_cache.json`, `_warm_cache.json`), so a
fresh machine (a new container, each worker of a cluster) pays about 26 s of compiling
before its first run trains at speed. This runs a short training (one fold by default) with
an empty kernel cache of its own (``CUPY_CACHE_DIR``, set before CuPy is imported), times
every compile CuPy makes (its NVRTC and NVCC entry points, wrapped), and prints them by
seconds with the kernels each defines, against the run's wall time. Run it twice with the
same ``--cache`` to see the warm run's (which should compile nothing).

Run:  FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/diag_compile.py \\
          --store S --profile bench/profiles/learn_gpu.toml [--max-folds 1] [--env-steps N]
          [--cache DIR] [--name compile_cold]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import profile_config, write_result

_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)")


def _names(source: str) -> list[str]:
    """The kernels `source` defines (CuPy's own kernels are named in their source too)."""
    return _KERNEL.findall(source)


#: CuPy's compile entry points by version (the outermost one called is timed): each takes
#: the source first. The first builds a module (compiling it, or loading its binary from the
#: kernel cache); the others compile.
_ENTRY_POINTS = (
    "_compile_module_with_cache",
    "_compile_with_cache_cuda",
    "compile_using_nvrtc",
    "_compile_using_nvrtc",
    "compile_using_nvcc",
    "_compile_using_nvcc",
)


def _wrap(
    compiles: list[dict[str, Any]], depth: list[int], entry: str, func: Callable[..., Any]
) -> Any:
    @functools.wraps(func)
    def timed(source: str, *args: Any, **kwargs: Any) -> Any:
        depth[0] += 1
        start = time.perf_counter()
        try:
            return func(source, *args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:  # not inside another entry point
                compiles.append(
                    {
                        "entry": entry,
                        "seconds": time.perf_counter() - start,
                        "kernels": _names(source),
                        "source_chars": len(source),
                    }
                )

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--profile", default="learn_gpu")
    parser.add_argument("--max-folds", type=int, default=1)
    parser.add_argument("--env-steps", type=int, default=None)
    parser.add_argument("--cache", type=Path, default=None, help="kernel cache (default: new)")
    parser.add_argument("--name", default="compile_cold")
    args = parser.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp(prefix="fxstore-kernel-cache-"))
    cache.mkdir(parents=True, exist_ok=True)
    cached_before = len(list(cache.iterdir()))
    os.environ["CUPY_CACHE_DIR"] = str(cache)  # read when CuPy first compiles

    import cupy.cuda.compiler as compiler

    import fxstore.train.loop as loop_module

    compiles: list[dict[str, Any]] = []
    depth = [0]
    wrapped = [name for name in _ENTRY_POINTS if callable(getattr(compiler, name, None))]
    for name in wrapped:
        setattr(compiler, name, _wrap(compiles, depth, name, getattr(compiler, name)))
    config = profile_config(args.profile, max_folds=args.max_folds, env_steps=args.env_steps)
    start = time.perf_counter()
    loop_module.train(config, args.store)
    wall = time.perf_counter() - start
    total = sum(c["seconds"] for c in compiles)
    compiles.sort(key=lambda c: -c["seconds"])
    print(
        f"wall {wall:.1f} s; {len(compiles)} kernel modules built (compiled, or loaded from the "
        f"cache) in {total:.1f} s "
        f"(kernel cache {cache}: {cached_before} files before, {len(list(cache.iterdir()))} "
        f"after; CuPy's entry points timed: {', '.join(wrapped) or 'none found'})"
    )
    for c in compiles:
        names = ", ".join(c["kernels"][:4]) + (" ..." if len(c["kernels"]) > 4 else "")
        print(f"{c['seconds']:7.2f} s  {c['source_chars']:7d} chars  {names}")
    write_result(
        args.name,
        {
            "store": str(args.store),
            "profile": config.profile,
            "config": config.to_json(),
            "cache_files_before": cached_before,
            "cache_files_after": len(list(cache.iterdir())),
            "entry_points_timed": wrapped,
            "wall_s": wall,
            "compile_s": total,
            "compiles": compiles,
        },
    )


if __name__ == "__main__":
    main()
