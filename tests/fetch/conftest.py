"""The fake Databento API (TLS on 127.0.0.1) and a runner of `fxstore fetch` against it."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fxstore.cli import cli
from tests.fetch.fake_databento import KEY, FakeDatabento

trustme = pytest.importorskip("trustme")

FetchRun = Callable[..., Result]


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, Path]:
    """A server context with a certificate for 127.0.0.1, and the CA file that trusts it."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    bundle = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    return context, bundle


@pytest.fixture
def server(
    tls: tuple[ssl.SSLContext, Path], monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeDatabento]:
    """The fake API, trusted by requests, with the key in DATABENTO_API_KEY and no waits."""
    context, bundle = tls
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    monkeypatch.setenv("DATABENTO_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("FXSTORE_HOME", raising=False)
    monkeypatch.setattr("fxstore.fetch.api._pause", lambda _s: None)
    # The client writes what it read in 4 KiB chunks; the real test files are smaller, so a
    # download cut after 100 bytes leaves 100 bytes on disk only with smaller chunks.
    monkeypatch.setattr("databento.historical.api.batch.HTTP_STREAMING_READ_SIZE", 50)
    fake = FakeDatabento(context)
    yield fake
    fake.close()


@pytest.fixture
def run_fetch(server: FakeDatabento, tmp_path: Path) -> FetchRun:
    """Run ``fxstore fetch`` on the fake API into ``tmp_path/store``."""

    def run(
        *args: str, input: str | None = None, catch: bool = True, verbose: bool = False
    ) -> Result:
        argv = [
            *(["-vv"] if verbose else []),
            "fetch",
            "--symbol",
            "ES.FUT",
            "--start",
            "2020-12-28",
            "--end",
            "2020-12-28",
            "--gateway",
            server.url,
            "--poll-seconds",
            "0",
            "--store",
            str(tmp_path / "store"),
            *args,
        ]
        return CliRunner().invoke(cli, argv, input=input, catch_exceptions=catch)

    return run
