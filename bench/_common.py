"""Shared helpers of the benchmark scripts: timing, machine facts, result files, and the
moves and correlations the learning diagnostics read."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from fxstore.config import TrainConfig
    from fxstore.train.env.market import Market

    F64 = npt.NDArray[np.float64]

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, object]:
    """Facts about the machine a result was measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = _gpu_names()
    kind = os.environ.get("FXSTORE_BENCH_MACHINE") or _machine_kind(gpus)
    return {
        "hostname_kind": kind,
        "platform": platform.platform(),
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "gpus": gpus,
    }


def _gpu_names() -> list[str]:
    """The names nvidia-smi gives the machine's GPUs; empty without one (or without it)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def _machine_kind(gpus: list[str]) -> str:
    """ "nvidia-h100", "nvidia-h200" (with "-xN" for N cards) from the GPUs' names, else
    "dev-cpu" (the machine without a GPU)."""
    if not gpus:
        return "dev-cpu"
    name = gpus[0].lower()
    model = next((m for m in ("h200", "h100", "a100", "l4") if m in name), "gpu")
    return f"nvidia-{model}" + (f"-x{len(gpus)}" if len(gpus) > 1 else "")


def profile_config(profile: str, **overrides: object) -> TrainConfig:
    """The TrainConfig of `profile` (a built-in name or a TOML file path) with `overrides`
    applied, but for those that are None (a bench's flags left unset)."""
    from fxstore.train.profiles import load_profile

    changes = {key: value for key, value in overrides.items() if value is not None}
    return dataclasses.replace(load_profile(profile), **changes)  # type: ignore[arg-type]


def next_moves(market: Market, lo: int, hi: int, h: int) -> tuple[npt.NDArray[np.int64], F64]:
    """Rows t in [lo, hi - h) whose next h bars are one contract, and close[t+h] - close[t]
    (:func:`fxstore.train.evaluate.references.linear.training_moves`)."""
    from fxstore.train.evaluate.references.linear import training_moves

    rows, moves = training_moves(market, lo, hi, (h,))
    return rows, moves[:, 0]


def correlation(a: F64, b: F64) -> float:
    """:func:`fxstore.train.evaluate.references.ridge.correlation`, NaN (not -inf) where it
    is undefined (fewer than 3 values, or either constant), for the record."""
    from fxstore.train.evaluate.references.ridge import correlation as ridge_correlation

    value = ridge_correlation(a, b)
    return value if math.isfinite(value) else float("nan")


def median_seconds(func: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    """Run `func` `repeat` times; return the median wall time and all times."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def run_shell_seconds(command: str) -> float:
    """Wall time of one shell command (must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, shell=True, check=True)
    return time.perf_counter() - start


#: Environment variables that change what a bench measures (recorded with its command).
_SETTINGS = ("FXSTORE_BENCH_SPLIT", "FXSTORE_BENCH_CHUNK", "FXSTORE_BENCH_DAY_SPREAD")


def _settings() -> list[str]:
    return [f"{k}={os.environ[k]}" for k in _SETTINGS if os.environ.get(k)]


def write_result(name: str, payload: dict[str, object]) -> Path:
    """Write `payload` (plus machine facts and the command line) to results/<name>.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "command": " ".join([*_settings(), Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **payload,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


@contextlib.contextmanager
def local_s3() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 for the block (dummy credentials set when absent); yields
    its endpoint URL and stops it after."""
    from moto.server import ThreadedMotoServer

    for key, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
