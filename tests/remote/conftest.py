"""A real S3 API on the loopback address: a moto server for the session, a bucket per test."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fxstore.config import SynthConfig
from tests.conftest import SynthMarket

#: Three weeks around the March 2024 roll: a small market, quick to ingest.
SMALL = SynthConfig(
    start=dt.date(2024, 3, 4), end=dt.date(2024, 3, 22), events_per_day=2_000, seed=11
)


@dataclass(frozen=True)
class S3Store:
    """A fresh bucket on the moto server and the options that reach it."""

    endpoint: str
    bucket: str
    url: str
    #: The CLI options naming the store, the endpoint and a cache folder of its own.
    cli: tuple[str, ...]
    cache_dir: Path


def _atomic_put(put: Callable[..., object]) -> Callable[..., object]:
    """moto checks If-None-Match / If-Match, then writes, without a lock; S3 does both at once.
    Serialise moto's PUT so that its conditional writes are atomic as S3's are."""
    lock = threading.Lock()

    @functools.wraps(put)
    def locked(*args: object, **kwargs: object) -> object:
        with lock:
            return put(*args, **kwargs)

    return locked


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a moto S3 server running for the session."""
    from moto.s3.responses import S3Response
    from moto.server import ThreadedMotoServer

    original = S3Response.put_object
    S3Response.put_object = _atomic_put(original)  # type: ignore[method-assign]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        S3Response.put_object = original  # type: ignore[method-assign]


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Test credentials only: no profile, config file or endpoint of the user's is read."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "FXSTORE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def s3_store(moto_endpoint: str, aws_env: None, tmp_path: Path) -> S3Store:
    """A new bucket with the store at ``s3://<bucket>/store``."""
    import boto3

    bucket = f"fxstore-{secrets.token_hex(6)}"
    boto3.client("s3", endpoint_url=moto_endpoint).create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/store"
    cache = tmp_path / "cache"
    cli = ("--store", url, "--s3-endpoint", moto_endpoint, "--cache-dir", str(cache))
    return S3Store(moto_endpoint, bucket, url, cli, cache)


@pytest.fixture(scope="session")
def small_market(tmp_path_factory: pytest.TempPathFactory) -> SynthMarket:
    """ES from 2024-03-04 to 2024-03-22, one DBN file per trading day."""
    from fxstore.synth import generate_market

    folder = tmp_path_factory.mktemp("small_market")
    return SynthMarket(folder, generate_market(SMALL, folder))
