"""Ingest on two Ray nodes that share no folder: inputs from S3, the store in S3 (moto).

The head node (the driver's) offers no CPU, so every task runs on the second node, whose
tasks get a temporary folder of their own (TMPDIR) and the credentials in their own
environment: they can read none of the driver's files, and the driver downloads no input
and writes no day file.
"""

from __future__ import annotations

import hashlib
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config import BarConfig, IngestConfig
from fxstore.ingest.run.pipeline import ingest
from fxstore.remote import open_store
from tests.conftest import SynthMarket
from tests.ray.conftest import ray, ray_options
from tests.remote.conftest import S3Store

pytestmark = pytest.mark.slow

#: The test credentials of the moto server, for the driver and for the second node.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
CONFIG = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20))


@pytest.fixture(scope="module")
def node_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The second node's temporary folder (its tasks' scratch)."""
    return tmp_path_factory.mktemp("node2-tmp")


@pytest.fixture(scope="module")
def cluster_address(node_tmp: Path) -> Iterator[str]:
    """A head node without CPUs and a second node with one CPU, its own TMPDIR and the
    test credentials in its environment."""
    from ray.cluster_utils import Cluster

    options = {k: v for k, v in ray_options().items() if k == "object_store_memory"}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, **options})
    try:
        env = {**CREDENTIALS, "TMPDIR": str(node_tmp)}
        cluster.add_node(num_cpus=1, env_vars=env, **options)
        cluster.wait_for_nodes(timeout=120)
        ray.init(address=cluster.address, **ray_options_joining())
        try:  # a task runs on the second node, in its temporary folder
            where = ray.get(ray.remote(num_cpus=1)(tempfile.gettempdir).remote(), timeout=120)
        finally:
            ray.shutdown()
        assert where == str(node_tmp)
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def bucket_store(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[S3Store]:
    """A new bucket; the driver's credentials are the test ones, its cache folder its own
    (a relative path, as a user may give it)."""
    import boto3

    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "FXSTORE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    bucket = f"fxstore-{secrets.token_hex(6)}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/store"
    monkeypatch.chdir(tmp_path)  # the cache folder is given relative to it
    cli_args = ("--store", url, "--s3-endpoint", moto_endpoint, "--cache-dir", "driver-cache")
    yield S3Store(moto_endpoint, bucket, url, cli_args, tmp_path / "driver-cache")


def ray_options_joining() -> dict[str, object]:
    """What a driver joining the cluster sets: quiet, no dashboard of its own."""
    return {k: v for k, v in ray_options().items() if k == "log_to_driver"}


def _dbn_files(market: SynthMarket) -> list[Path]:
    return sorted(p for p in market.folder.iterdir() if p.name.endswith((".dbn", ".dbn.zst")))


def _upload(store: S3Store, files: list[Path], *, cut: str | None = None) -> str:
    """Put `files` under ``raw/`` of the bucket (the one named `cut` cut to half its bytes);
    return the prefix's URL."""
    import boto3

    client = boto3.client("s3", endpoint_url=store.endpoint)
    for path in files:
        data = path.read_bytes()
        body = data[: len(data) // 2] if path.name == cut else data
        client.put_object(Bucket=store.bucket, Key=f"raw/{path.name}", Body=body)
    return f"s3://{store.bucket}/raw"


def _run_ingest(inputs: str, *options: str) -> tuple[int, str]:
    args = ["ingest", inputs, "--symbol", "ES.FUT", "--target-bars-per-day", "20", "-q"]
    result = CliRunner().invoke(cli, [*args, *options])
    return result.exit_code, result.output


def _ingest_on_cluster(address: str, inputs: str, store: S3Store) -> tuple[int, str]:
    return _run_ingest(inputs, "--executor", "ray", "--ray-address", address, *store.cli)


def _day_digests(root: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.glob("bars/*/*/*/v*/*.parquet"))
    }


def _keys(store: S3Store) -> list[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=store.endpoint)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix="store/")
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def test_ingest_on_two_nodes_from_s3_into_s3_writes_the_local_pools_files_and_nothing_here(
    cluster_address: str,
    bucket_store: S3Store,
    small_market: SynthMarket,
    node_tmp: Path,
    tmp_path: Path,
) -> None:
    files = _dbn_files(small_market)
    local = str(tmp_path / "local")
    assert _run_ingest(str(small_market.folder), "--workers", "2", "--store", local)[0] == 0
    inputs = _upload(bucket_store, files)

    code, out = _ingest_on_cluster(cluster_address, inputs, bucket_store)

    assert code == 0, out
    with open_store(
        bucket_store.url, endpoint=bucket_store.endpoint, cache_dir=tmp_path / "reader"
    ) as root:
        assert _day_digests(root) == _day_digests(tmp_path / "local")
        assert len(_day_digests(root)) == len(files) - 1  # a day a file, less the definitions
    driver_files = [p.name for p in bucket_store.cache_dir.rglob("*") if p.is_file()]
    assert not [n for n in driver_files if n.endswith((".parquet", ".dbn", ".dbn.zst"))]
    assert not [k for k in _keys(bucket_store) if "/.parts/" in k]
    assert list(node_tmp.glob("fxstore-task-*")) == []  # the tasks' scratch is gone
    assert not ray.is_initialized()


def test_ingest_on_two_nodes_from_s3_into_a_shared_local_store_writes_the_same_files(
    cluster_address: str, bucket_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    # the store is a folder both nodes see (this machine's): only the inputs are objects
    inputs = _upload(bucket_store, _dbn_files(small_market))
    store = ("--store", str(tmp_path / "shared"), *bucket_store.cli[2:])  # endpoint, cache
    local = str(tmp_path / "local")
    assert _run_ingest(str(small_market.folder), "--workers", "1", "--store", local)[0] == 0

    code, out = _run_ingest(inputs, "--executor", "ray", "--ray-address", cluster_address, *store)

    assert code == 0, out
    assert _day_digests(tmp_path / "shared") == _day_digests(tmp_path / "local")
    assert not list(bucket_store.cache_dir.rglob("*.dbn.zst"))  # nothing downloaded here


def test_failed_task_on_two_nodes_commits_nothing_and_names_the_object(
    cluster_address: str, bucket_store: S3Store, small_market: SynthMarket
) -> None:
    files = _dbn_files(small_market)
    cut = files[len(files) // 2].name
    inputs = _upload(bucket_store, files, cut=cut)

    code, out = _ingest_on_cluster(cluster_address, inputs, bucket_store)

    assert code == 1
    assert out.startswith("Error: ") and f"{inputs}/{cut}" in out, out
    assert not [k for k in _keys(bucket_store) if k.endswith((".json", ".parquet"))]


def test_s3_inputs_without_ray_are_refused_by_the_library(tmp_path: Path) -> None:
    from fxstore.errors import InvalidInputError
    from fxstore.remote import InputObject

    item = InputObject("s3://bucket/raw/a.dbn.zst", 10, 0, None)

    with pytest.raises(InvalidInputError, match="--executor ray"):
        ingest(CONFIG, [item], tmp_path)
