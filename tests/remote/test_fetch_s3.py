"""`fxstore fetch --store s3://...` against the fake Databento API and a moto S3 server: what
is bought lands in the bucket, and a fetch from another machine (another cache) finds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fetch.conftest import FetchRun, run_fetch, server, tls  # noqa: F401 - fixtures
from tests.fetch.fake_databento import DATA, SCHEMA_FILES, FakeDatabento
from tests.remote.conftest import S3Store
from tests.remote.test_store_s3 import bucket_files

JOB = "GLBX-20240101-JOB0000001"
MBP_FILE = "glbx-mdp3-20201228.mbp-10.dbn.zst"


def _store(s3_store: S3Store, cache: Path) -> tuple[str, ...]:
    """The options of the store with the cache folder `cache` (another machine's)."""
    return ("--store", s3_store.url, "--s3-endpoint", s3_store.endpoint, "--cache-dir", str(cache))


def test_fetch_into_an_s3_store_writes_the_files_and_the_purchase_into_the_bucket(
    run_fetch: FetchRun,  # noqa: F811
    server: FakeDatabento,  # noqa: F811
    s3_store: S3Store,
) -> None:
    result = run_fetch("--yes", "--via", "batch", *s3_store.cli, catch=False)

    assert result.exit_code == 0, result.output
    found = bucket_files(s3_store)
    folder = f"raw/GLBX.MDP3/{JOB}"
    assert found[f"{folder}/{MBP_FILE}"] == (DATA / SCHEMA_FILES["mbp-10"]).read_bytes()
    assert f"{folder}/fxstore-fetch.json" in found
    records = [k for k in found if k.startswith("raw/GLBX.MDP3/.requests/")]
    assert len(records) == 1 and JOB.encode() in found[records[0]]
    assert not [k for k in found if "/.partial/" in k or "/.quarantine/" in k]
    fetched = result.stdout.splitlines()[-1]
    assert fetched.startswith("Fetched: mbp-10 5 files (")
    assert fetched.endswith(f" bytes) -> {s3_store.url}/{folder}")


@pytest.mark.parametrize("via", ["batch", "stream"])
def test_fetch_from_another_cache_of_the_same_s3_store_buys_nothing(
    run_fetch: FetchRun,  # noqa: F811
    server: FakeDatabento,  # noqa: F811
    s3_store: S3Store,
    tmp_path: Path,
    via: str,
) -> None:
    first = run_fetch("--yes", "--via", via, *_store(s3_store, tmp_path / "machine-1"))
    assert first.exit_code == 0, first.output
    n_calls = len(server.state.calls)

    second = run_fetch("--yes", "--via", via, *_store(s3_store, tmp_path / "machine-2"))

    assert second.exit_code == 0, second.output
    assert "have it" in second.stdout and "total to buy" in second.stdout
    assert "$0.00" in second.stdout.split("total to buy")[1]
    assert "Up to date: mbp-10" in second.stdout and f"-> {s3_store.url}/raw/" in second.stdout
    assert len(server.state.calls) == n_calls  # not bought, not downloaded from Databento
    assert not (tmp_path / "machine-2" / "inputs").exists()  # nor from the bucket


def test_fetch_ingest_from_another_cache_reads_the_files_from_the_bucket(
    run_fetch: FetchRun,  # noqa: F811
    server: FakeDatabento,  # noqa: F811
    s3_store: S3Store,
    tmp_path: Path,
) -> None:
    first = run_fetch("--yes", "--via", "batch", *_store(s3_store, tmp_path / "machine-1"))
    assert first.exit_code == 0, first.output
    n_calls = len(server.state.calls)

    second = run_fetch(
        "--yes", "--via", "batch", "--ingest", "-q", *_store(s3_store, tmp_path / "machine-2")
    )

    assert second.exit_code == 0, second.output
    assert len(server.state.calls) == n_calls
    assert "Ingested 1 trading days" in second.stdout
    assert any(k.startswith("bars/ES.FUT/") for k in bucket_files(s3_store))


def test_fetch_that_failed_after_buying_is_resumed_from_another_cache_without_buying(
    run_fetch: FetchRun,  # noqa: F811
    server: FakeDatabento,  # noqa: F811
    s3_store: S3Store,
    tmp_path: Path,
) -> None:
    server.state.cut_after[MBP_FILE] = (100, -1)
    first = run_fetch("--yes", "--via", "batch", *_store(s3_store, tmp_path / "machine-1"))
    assert first.exit_code == 1 and "Error: the download of" in first.output
    records = [k for k in bucket_files(s3_store) if "/.requests/" in k]
    assert len(records) == 1  # the purchase reached the bucket before the download failed
    server.state.cut_after.clear()

    second = run_fetch("--yes", "--via", "batch", *_store(s3_store, tmp_path / "machine-2"))

    assert second.exit_code == 0, second.output
    assert "paid" in second.stdout and "Buy it" not in second.output
    assert server.state.calls_to("batch.submit_job") == 1
    assert f"{JOB}/{MBP_FILE}" in "".join(bucket_files(s3_store))
