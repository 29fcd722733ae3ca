"""A local Ray cluster shared by a test module (tests skip where Ray is not installed)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

# The moto server of the session and the small market, for the nodes that share no folder.
from tests.remote.conftest import moto_endpoint, small_market  # noqa: E402, F401


def ray_options() -> dict[str, object]:
    """A small local Ray: quiet, no dashboard, a small object store (CI's /dev/shm)."""
    return {
        "include_dashboard": False,
        "log_to_driver": False,
        "object_store_memory": 80 << 20,
    }


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A two-CPU Ray instance on this machine for the module: a new one ("local"), never
    the cluster another test module (test_two_nodes) may run at the same time in another
    pytest worker, which ray.init() would otherwise join."""
    ray.init(address="local", num_cpus=2, **ray_options())
    try:
        yield
    finally:
        ray.shutdown()


def digests(out_dir: Path) -> dict[str, str]:
    """SHA-256 of every day file of a bar version."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out_dir.glob("*.parquet")}
