"""Commits on S3: a conditional PUT of the manifest, so of N writers exactly one wins; and the
one-line errors of a store that cannot be reached."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config import BarConfig, IngestConfig
from fxstore.errors import FxStoreError, StoreAccessError
from fxstore.ingest.run.pipeline import ingest
from fxstore.remote import CommitConflictError, open_store
from fxstore.remote.mirror import Mirror
from fxstore.remote.s3 import S3Bucket, parse_url
from fxstore.store import file_sha256
from tests.conftest import SynthMarket
from tests.remote.conftest import S3Store

N_WRITERS = 4
CONFIG = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=13.0), workers=1)


def _race(store: S3Store, folders: list[Path], tmp_path: Path) -> list[BaseException | None]:
    """Writer i ingests folders[i] with a cache of its own; all pull before any pushes."""
    pulled = threading.Barrier(len(folders))
    outcome: list[BaseException | None] = [None] * len(folders)

    def write(i: int) -> None:
        cache = tmp_path / f"writer{i}"
        try:
            with contextlib.ExitStack() as stack:
                try:
                    root = stack.enter_context(
                        open_store(store.url, endpoint=store.endpoint, cache_dir=cache)
                    )
                finally:
                    pulled.wait()
                ingest(CONFIG, [folders[i]], root)
        except FxStoreError as err:
            outcome[i] = err

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(folders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def _committed(store: S3Store) -> tuple[dict[str, object], dict[str, str]]:
    """The series manifest in the bucket, and the SHA-256 of every object of its version."""
    client = boto3.client("s3", endpoint_url=store.endpoint)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=store.bucket)["Contents"]]
    (series,) = [k for k in keys if k.count("/") == 5 and k.endswith("manifest.json")]
    manifest = json.loads(client.get_object(Bucket=store.bucket, Key=series)["Body"].read())
    number = next(v["version"] for v in manifest["versions"] if v["version"] == manifest["current"])
    version = series.rsplit("/", 1)[0] + f"/v{number:04d}/manifest.json"
    days = json.loads(client.get_object(Bucket=store.bucket, Key=version)["Body"].read())["days"]
    return manifest, {d["file"]: d["sha256"] for d in days if "file" in d}


def test_of_four_concurrent_writers_exactly_one_commits(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    outcome = _race(s3_store, [small_market.folder] * N_WRITERS, tmp_path)

    losers = [err for err in outcome if err is not None]
    assert len(losers) == N_WRITERS - 1
    for err in losers:
        assert isinstance(err, CommitConflictError)
        assert "\n" not in str(err) and "another writer" in str(err)
    manifest, days = _committed(s3_store)
    assert [v["version"] for v in manifest["versions"]] == [1]
    with open_store(
        s3_store.url, endpoint=s3_store.endpoint, cache_dir=tmp_path / "reader"
    ) as root:
        files = {p.name: file_sha256(p) for p in root.glob("bars/*/*/*/v0001/*.parquet")}
    assert files == days


def test_writers_of_different_builds_never_commit_a_mix(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    files = sorted(small_market.folder.iterdir())
    folders = []
    for i, keep in enumerate((len(files), len(files) - 3)):
        folder = tmp_path / f"inputs{i}"
        folder.mkdir()
        for path in files[:keep]:
            (folder / path.name).symlink_to(path)
        folders.append(folder)

    outcome = _race(s3_store, folders, tmp_path)

    assert sum(err is None for err in outcome) <= 1
    assert all(isinstance(err, CommitConflictError) for err in outcome if err is not None)
    if None in outcome:  # the winner's version holds the winner's bytes, every one of them
        with open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=tmp_path / "r") as root:
            got = {p.name: file_sha256(p) for p in root.glob("bars/*/*/*/v0001/*.parquet")}
        assert got == _committed(s3_store)[1]


def test_a_commit_after_another_writers_commit_builds_a_new_version(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    for i, config in enumerate((CONFIG, dataclasses.replace(CONFIG, force=True))):
        cache = tmp_path / f"writer{i}"
        with open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=cache) as root:
            ingest(config, [small_market.folder], root)

    manifest, _ = _committed(s3_store)
    assert [v["version"] for v in manifest["versions"]] == [1, 2]

    gc = CliRunner().invoke(cli, ["gc", "--keep", "1", "--delete", *s3_store.cli])

    assert gc.exit_code == 0, gc.output
    client = boto3.client("s3", endpoint_url=s3_store.endpoint)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_store.bucket)["Contents"]]
    assert not [k for k in keys if "/v0001/" in k] and [k for k in keys if "/v0002/" in k]


def _error_line(*args: str) -> str:
    result = CliRunner().invoke(cli, ["ls", *args])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    return result.output


def test_store_without_credentials_is_one_error_line(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    assert "no AWS credentials" in _error_line(*s3_store.cli)


def test_store_in_a_missing_bucket_is_one_error_line(s3_store: S3Store, tmp_path: Path) -> None:
    line = _error_line("--store", "s3://no-such-bucket-fx/x", *s3_store.cli[2:])

    assert "bucket 'no-such-bucket-fx' does not exist" in line


def test_store_at_an_unreachable_endpoint_is_one_error_line(aws_env: None, tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    line = _error_line(
        "--store",
        "s3://bkt/x",
        "--s3-endpoint",
        f"http://127.0.0.1:{port}",
        "--cache-dir",
        str(tmp_path),
    )

    assert "cannot be reached" in line and f"127.0.0.1:{port}" in line


def test_store_with_access_denied_is_one_error_line(s3_store: S3Store) -> None:
    bucket = S3Bucket(parse_url(s3_store.url), s3_store.endpoint)
    with Stubber(bucket.client) as stub:
        stub.add_client_error("list_objects_v2", "AccessDenied", "Access Denied", 403)
        with pytest.raises(StoreAccessError, match="access denied") as err:
            bucket.check()
    assert "\n" not in str(err.value)


def test_other_url_schemes_are_refused_as_not_available_yet() -> None:
    result = CliRunner().invoke(cli, ["ls", "--store", "gs://bucket/x"])

    assert result.exit_code == 1
    assert "other fsspec schemes are not yet" in result.output


def test_cli_writer_that_lost_the_commit_prints_one_error_line(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pull = Mirror.pull

    def pull_then_another_writer_commits(self: Mirror) -> None:
        pull(self)
        monkeypatch.setattr(Mirror, "pull", pull)
        with open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=tmp_path / "b") as root:
            ingest(CONFIG, [small_market.folder], root)

    monkeypatch.setattr(Mirror, "pull", pull_then_another_writer_commits)
    args = ["ingest", str(small_market.folder), "--target-bars-per-day", "13", "--workers", "1"]

    result = CliRunner().invoke(cli, [*args, "-q", *s3_store.cli])

    assert result.exit_code == 1
    [error] = result.output.splitlines()  # no "Ingested" line: nothing was committed
    assert error.startswith("Error: another writer wrote s3://") and "re-run" in error
    manifest, _ = _committed(s3_store)
    assert [v["version"] for v in manifest["versions"]] == [1]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("s3://bucket/a/../b", "'.' and '..' are not allowed"),
        ("s3:///prefix", "no bucket"),
        ("gs://bucket/x", "not yet"),
    ],
)
def test_parse_url_refuses_urls_that_name_no_store_inside_a_bucket(url: str, why: str) -> None:
    with pytest.raises(FxStoreError, match=why):
        parse_url(url)


def test_parse_url_keys_stay_below_the_prefix() -> None:
    url = parse_url("s3://bucket//data/fx/")

    assert (url.bucket, url.prefix) == ("bucket", "data/fx")
    assert url.key("bars/ES.FUT/manifest.json") == "data/fx/bars/ES.FUT/manifest.json"
    assert url.url() == "s3://bucket/data/fx"
