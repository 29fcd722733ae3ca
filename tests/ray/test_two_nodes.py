"""Ingest on a Ray cluster of two nodes (two raylets on this machine, one CPU each)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from fxstore.config import BarConfig, IngestConfig
from fxstore.config.executor import ExecutorConfig
from fxstore.ingest.run.pipeline import ingest
from tests.conftest import SynthMarket
from tests.ray.conftest import digests, ray, ray_options


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[str]:
    from ray.cluster_utils import Cluster

    options = {k: v for k, v in ray_options().items() if k == "object_store_memory"}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, **options})
    cluster.add_node(num_cpus=1, **options)
    cluster.wait_for_nodes()
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_ingest_on_two_ray_nodes_is_byte_identical_to_one_core(
    two_nodes: str, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20))
    one_core = ingest(config, [two_roll_market.folder], tmp_path / "one")
    on_ray = dataclasses.replace(config, workers=0, executor=ExecutorConfig("ray", two_nodes))

    summary = ingest(on_ray, [two_roll_market.folder], tmp_path / "ray")

    assert digests(summary.out_dir) == digests(one_core.out_dir)
    assert not ray.is_initialized()  # the run joined the cluster and left it
