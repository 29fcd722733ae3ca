"""What ingest on nodes without a shared folder asks of the bucket: a push commits day files
that only the bucket holds (written there by tasks on other nodes) when they hold the bytes
their manifest records, and refuses them otherwise; input objects are listed, not fetched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import boto3
import pytest

from fxstore.config import BarConfig, IngestConfig
from fxstore.errors import StoreAccessError
from fxstore.ingest.run.pipeline import ingest
from fxstore.remote import CommitConflictError, list_input_objects, open_store
from tests.conftest import SynthMarket
from tests.remote.conftest import S3Store

CONFIG = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=13.0), workers=1)


def _day_digests(root: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.glob("bars/*/*/*/v*/*.parquet"))
    }


def _move_into_bucket(store: S3Store, root: Path, day: Path, body: bytes) -> str:
    """Put `body` under the key of the mirror's day file `day` and delete the local file, as
    a task on another node leaves it; return the key."""
    key = f"store/{day.relative_to(root).as_posix()}"
    client = boto3.client("s3", endpoint_url=store.endpoint)
    client.put_object(Bucket=store.bucket, Key=key, Body=body, ChecksumAlgorithm="SHA256")
    day.unlink()
    return key


def test_push_commits_a_day_file_only_the_bucket_holds_with_its_recorded_bytes(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    ingest(CONFIG, [small_market.folder], tmp_path / "local")
    with open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=s3_store.cache_dir) as root:
        summary = ingest(CONFIG, [small_market.folder], root)
        day = sorted(summary.out_dir.glob("*.parquet"))[3]
        _move_into_bucket(s3_store, root, day, day.read_bytes())

    with open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=tmp_path / "r") as fresh:
        assert _day_digests(fresh) == _day_digests(tmp_path / "local")


def test_push_refuses_a_day_file_only_the_bucket_holds_with_other_bytes(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    client = boto3.client("s3", endpoint_url=s3_store.endpoint)

    with (
        pytest.raises(CommitConflictError, match="holds other bytes than the SHA-256"),
        open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=s3_store.cache_dir) as root,
    ):
        summary = ingest(CONFIG, [small_market.folder], root)
        day = sorted(summary.out_dir.glob("*.parquet"))[3]
        key = _move_into_bucket(s3_store, root, day, b"other bytes")

    listed = client.list_objects_v2(Bucket=s3_store.bucket, Prefix="store/")["Contents"]
    assert not [o["Key"] for o in listed if o["Key"].endswith("manifest.json")]
    assert key in {o["Key"] for o in listed}


def test_list_input_objects_takes_the_dbn_objects_right_under_a_prefix(
    s3_store: S3Store,
) -> None:
    client = boto3.client("s3", endpoint_url=s3_store.endpoint)
    for key in ("raw/a.dbn.zst", "raw/b.dbn", "raw/manifest.json", "raw/deeper/c.dbn.zst"):
        client.put_object(Bucket=s3_store.bucket, Key=key, Body=b"DBN")

    found = list_input_objects(f"s3://{s3_store.bucket}/raw", endpoint=s3_store.endpoint)

    assert [o.url for o in found] == [
        f"s3://{s3_store.bucket}/raw/a.dbn.zst",
        f"s3://{s3_store.bucket}/raw/b.dbn",
    ]
    assert [o.size for o in found] == [3, 3]
    one = list_input_objects(f"s3://{s3_store.bucket}/raw/b.dbn", endpoint=s3_store.endpoint)
    assert [o.url for o in one] == [found[1].url]


def test_list_input_objects_of_a_prefix_without_dbn_objects_is_one_error(
    s3_store: S3Store,
) -> None:
    client = boto3.client("s3", endpoint_url=s3_store.endpoint)
    client.put_object(Bucket=s3_store.bucket, Key="raw/manifest.json", Body=b"{}")

    with pytest.raises(StoreAccessError, match=r"no DBN object \(\*\.dbn, \*\.dbn\.zst\) at or"):
        list_input_objects(f"s3://{s3_store.bucket}/raw", endpoint=s3_store.endpoint)
