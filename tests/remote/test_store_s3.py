"""`--store s3://bucket/prefix` against a moto S3 server on 127.0.0.1: the same store as a
local one, files downloaded once and checked, paths that stay inside the root."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import boto3
import numpy as np
import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.errors import FxStoreWarning, SchemaError
from fxstore.remote import fetch_inputs, open_store
from fxstore.remote.s3 import S3Bucket
from fxstore.train.env.loader import open_fxcache
from tests.conftest import SynthMarket
from tests.remote.conftest import S3Store

_SERIES = "bars/ES.FUT/mbp10_front_month"


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def local_files(root: Path) -> dict[str, bytes]:
    """What a store folder holds, by store-relative path (lock files left out)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def bucket_files(store: S3Store) -> dict[str, bytes]:
    client = boto3.client("s3", endpoint_url=store.endpoint)
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket):
        for obj in page.get("Contents", []):
            body = client.get_object(Bucket=store.bucket, Key=obj["Key"])["Body"].read()
            found[obj["Key"].removeprefix("store/")] = body
    return found


def without_commit_times(data: bytes) -> object:
    """A series manifest without its commit times (they differ between two builds)."""
    obj = json.loads(data)
    for entry in obj.get("versions", []):
        entry.pop("committed_ns", None)
        entry.pop("committed_at", None)
    return obj


def build(market: SynthMarket, *store: str) -> None:
    code, out = run_cli("ingest", str(market.folder), "--workers", "1", "-q", *store)
    assert code == 0, out
    code, out = run_cli("precompute", *store)
    assert code == 0, out


def count_downloads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    download = S3Bucket.download

    def counted(self: S3Bucket, rel: str, dest: Path) -> None:
        seen.append(rel)
        download(self, rel, dest)

    monkeypatch.setattr(S3Bucket, "download", counted)
    return seen


def test_store_on_s3_holds_the_files_of_the_same_local_store(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    build(small_market, "--store", str(tmp_path / "local"))
    build(small_market, *s3_store.cli)

    local, remote = local_files(tmp_path / "local"), bucket_files(s3_store)

    assert sorted(local) == sorted(remote)
    assert any(k.endswith(".parquet") for k in remote) and any(k.endswith(".arrow") for k in remote)
    for rel, data in local.items():
        is_series = rel.startswith(_SERIES) and rel.count("/") == 4
        if is_series:  # the list of versions: equal but for the time of the commit
            assert without_commit_times(remote[rel]) == without_commit_times(data)
        else:
            assert remote[rel] == data, rel


def test_store_on_s3_second_run_downloads_nothing_and_is_up_to_date(
    s3_store: S3Store, small_market: SynthMarket, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(small_market, *s3_store.cli)
    before = bucket_files(s3_store)
    seen = count_downloads(monkeypatch)

    code, out = run_cli("ingest", str(small_market.folder), "--workers", "1", *s3_store.cli)

    assert code == 0, out
    assert out.startswith("Up to date")
    assert seen == []
    assert bucket_files(s3_store) == before


def test_cli_lines_name_the_s3_urls_of_what_was_committed(
    s3_store: S3Store, small_market: SynthMarket
) -> None:
    code, ingested = run_cli(
        "ingest", str(small_market.folder), "--workers", "1", "-q", *s3_store.cli
    )
    assert code == 0, ingested
    code, precomputed = run_cli("precompute", *s3_store.cli)
    assert code == 0, precomputed
    days = ("--train-days", "3", "--test-days", "2", "--embargo-days", "0", "--no-plots")
    code, backtested = run_cli("backtest", *days, "--min-train-days", "1", *s3_store.cli)
    assert code == 0, backtested

    line = next(line for line in ingested.splitlines() if line.startswith("Ingested "))
    assert f" -> {s3_store.url}/{_SERIES}/" in line
    assert f" -> {s3_store.url}/fxcache/ES.FUT/" in precomputed
    assert f"Wrote {s3_store.url}/runs/" in backtested


def test_training_reads_shards_downloaded_once_into_the_cache_folder(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(small_market, *s3_store.cli)
    fresh = tmp_path / "fresh-cache"
    seen = count_downloads(monkeypatch)

    training = ("fxcache", "runs", "synth")  # what `train` mirrors: no bars
    with open_store(
        s3_store.url, endpoint=s3_store.endpoint, cache_dir=fresh, areas=training
    ) as root:
        assert root.is_relative_to(fresh)
        with open_fxcache(root, "ES.FUT", device="cpu") as view:
            close = np.array(view.columns["mkt_close"][0])
    shards = [rel for rel in seen if rel.endswith(".arrow")]
    assert len(shards) == 1
    assert not [rel for rel in seen if rel.startswith("bars/")]
    with (
        open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=fresh) as root,
        open_fxcache(root, "ES.FUT", device="cpu") as view,
    ):
        np.testing.assert_array_equal(view.columns["mkt_close"][0], close)
    assert [rel for rel in seen if rel.endswith(".arrow")] == shards  # not again


def test_changed_object_in_the_bucket_is_left_out_and_a_damaged_local_copy_downloaded_again(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    build(small_market, *s3_store.cli)
    (shard,) = [k for k in bucket_files(s3_store) if k.endswith(".arrow")]
    cached = next(s3_store.cache_dir.glob(f"stores/*/{shard}"))
    good = cached.read_bytes()
    cached.write_bytes(good[:-8] + b"damaged!")

    with open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=s3_store.cache_dir):
        assert cached.read_bytes() == good

    client = boto3.client("s3", endpoint_url=s3_store.endpoint)
    client.put_object(Bucket=s3_store.bucket, Key=f"store/{shard}", Body=good[:-1] + b"x")
    fresh = tmp_path / "c2"
    with (
        pytest.warns(FxStoreWarning, match=r"do not match the SHA-256.*left out"),
        open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=fresh) as root,
    ):
        assert not (root / shard).exists()
    code, out = run_cli("ls", *s3_store.cli[:4], "--cache-dir", str(tmp_path / "c3"))
    assert code == 0, out


_ESCAPE_DAY = b'{"days": [{"file": "../../../../escape.parquet", "sha256": "00"}]}'
_SERIES_OF_ESCAPE = {
    "format": "fxstore-bar-series/1",
    "current": 1,
    "versions": [
        {
            "version": 1,
            "committed_ns": 1,
            "manifest_sha256": hashlib.sha256(_ESCAPE_DAY).hexdigest(),
        }
    ],
}


@pytest.mark.parametrize(
    ("objects", "why"),
    [
        ({"runs/../../escape.txt": b"x"}, "would leave the store root"),
        (
            {
                f"{_SERIES}/dib-x/manifest.json": json.dumps(_SERIES_OF_ESCAPE).encode(),
                f"{_SERIES}/dib-x/v0001/manifest.json": _ESCAPE_DAY,
            },
            "is not a file inside",
        ),
    ],
    ids=["object-key", "manifest-entry"],
)
def test_paths_from_the_bucket_never_leave_the_store_root(
    s3_store: S3Store, tmp_path: Path, objects: dict[str, bytes], why: str
) -> None:
    client = boto3.client("s3", endpoint_url=s3_store.endpoint)
    for key, body in objects.items():
        client.put_object(Bucket=s3_store.bucket, Key=f"store/{key}", Body=body)

    with (
        pytest.raises(SchemaError, match=why),
        open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=tmp_path / "c"),
    ):
        pass
    assert not list(tmp_path.rglob("escape*"))


def test_ingest_reads_dbn_files_from_a_bucket(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = boto3.client("s3", endpoint_url=s3_store.endpoint)
    for path in sorted(small_market.folder.iterdir()):
        client.upload_file(str(path), s3_store.bucket, f"raw/GLBX/{path.name}")
    url = f"s3://{s3_store.bucket}/raw/GLBX"
    local = tmp_path / "local"

    code, out = run_cli(
        "ingest", str(small_market.folder), "--workers", "1", "-q", "--store", str(local)
    )
    assert code == 0, out
    code, out = run_cli("ingest", url, "--workers", "1", "-q", *s3_store.cli)
    assert code == 0, out

    days = {k: v for k, v in bucket_files(s3_store).items() if k.endswith(".parquet")}
    assert days and days == {k: v for k, v in local_files(local).items() if k.endswith(".parquet")}
    seen = count_downloads(monkeypatch)
    (folder,) = fetch_inputs([url], endpoint=s3_store.endpoint, cache_dir=s3_store.cache_dir)
    assert seen == []
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        p.name for p in small_market.folder.iterdir()
    )


def test_synth_files_written_into_an_s3_store_are_uploaded(s3_store: S3Store) -> None:
    code, out = run_cli(
        "synth", "--start", "2024-03-04", "--end", "2024-03-06", "-q", *s3_store.cli
    )

    assert code == 0, out
    assert any(k.startswith("synth/ES.FUT/") and ".dbn" in k for k in bucket_files(s3_store))


def test_backtest_on_an_s3_store_writes_its_run_into_the_bucket(
    s3_store: S3Store, small_market: SynthMarket
) -> None:
    build(small_market, *s3_store.cli)
    days = ("--train-days", "3", "--test-days", "2", "--embargo-days", "0")

    code, out = run_cli("backtest", *days, "--min-train-days", "1", "--no-plots", *s3_store.cli)

    assert code == 0, out
    assert f"--store {s3_store.url}" in out  # the report command names the bucket
    runs = {k.split("/")[1] for k in bucket_files(s3_store) if k.startswith("runs/")}
    assert len(runs) == 1
    code, listed = run_cli("runs", *s3_store.cli[:4], "--cache-dir", str(s3_store.cache_dir / "x"))
    assert code == 0, listed
    assert runs.pop() in listed


def test_a_cached_file_damaged_before_another_writers_commit_is_downloaded_again(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    build(small_market, *s3_store.cli)
    day = next(s3_store.cache_dir.glob("stores/*/bars/*/*/*/v0001/2024-03-05.parquet"))
    good = day.read_bytes()
    day.write_bytes(good[:-8] + b"damaged!")
    other = ("--cache-dir", str(tmp_path / "other-writer"))
    args = ("ingest", str(small_market.folder), "--force", "--workers", "1", "-q")
    code, out = run_cli(*args, *s3_store.cli[:4], *other)
    assert code == 0, out  # version 2: this mirror's series manifest is rewritten at its pull

    with open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=s3_store.cache_dir):
        assert day.read_bytes() == good
