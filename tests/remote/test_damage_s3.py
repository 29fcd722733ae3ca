"""The bucket is the truth: a damaged object of an s3:// store is found in the bucket (not in
a local copy), blocks no command, and ``verify --repair`` rebuilds it; commands that read
only manifests download no day file or shard."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import boto3
import pytest

from fxstore.errors import FxStoreWarning
from fxstore.remote import open_store
from tests.conftest import SynthMarket
from tests.remote.conftest import S3Store
from tests.remote.test_store_s3 import bucket_files, build, count_downloads, run_cli


def _flip_a_byte(store: S3Store, rel: str) -> bytes:
    """Replace object `rel` by its bytes with one byte changed; return the good bytes."""
    client = boto3.client("s3", endpoint_url=store.endpoint)
    key = f"store/{rel}"
    good: bytes = client.get_object(Bucket=store.bucket, Key=key)["Body"].read()
    middle = len(good) // 2
    bad = good[:middle] + bytes([good[middle] ^ 0x01]) + good[middle + 1 :]
    client.put_object(Bucket=store.bucket, Key=key, Body=bad)
    return good


def _fresh(store: S3Store, cache: Path) -> tuple[str, ...]:
    """The store's options with another cache folder (another machine)."""
    return (*store.cli[:4], "--cache-dir", str(cache))


def test_verify_checks_the_objects_in_the_bucket_not_the_warm_cache(
    s3_store: S3Store, small_market: SynthMarket
) -> None:
    build(small_market, *s3_store.cli)
    (shard,) = [k for k in bucket_files(s3_store) if k.endswith(".arrow")]
    _flip_a_byte(s3_store, shard)

    code, out = run_cli("verify", *s3_store.cli)  # the cache holds the good bytes

    assert code == 1, out
    assert f"{s3_store.url}/{shard}: SHA-256 in the bucket differs from its manifest's" in out
    assert f"in {s3_store.url}: 1 problem, 0 repaired, 1 left." in out


def test_a_damaged_shard_blocks_no_command_and_verify_repair_rebuilds_it(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    build(small_market, *s3_store.cli)
    (shard,) = [k for k in bucket_files(s3_store) if k.endswith(".arrow")]
    good = _flip_a_byte(s3_store, shard)

    code, listed = run_cli("ls", *_fresh(s3_store, tmp_path / "a"))
    assert code == 0, listed
    code, gc = run_cli("gc", "--keep", "1", "--delete", *_fresh(s3_store, tmp_path / "b"))
    assert code == 0, gc
    with (
        warnings.catch_warnings(record=True) as caught,
        open_store(s3_store.url, endpoint=s3_store.endpoint, cache_dir=tmp_path / "c") as root,
    ):
        warnings.simplefilter("always")
        assert not (root / shard).exists()  # left out, no copy of other bytes
        assert list(root.glob("bars/*/*/*/v0001/*.parquet"))  # the rest is read
    said = [str(w.message) for w in caught if isinstance(w.message, FxStoreWarning)]
    assert len(said) == 1 and said[0].startswith(f"{s3_store.url}/{shard}: its bytes do not")

    code, repaired = run_cli("verify", "--repair", *_fresh(s3_store, tmp_path / "d"))

    assert code == 0, repaired
    assert f"{s3_store.url}/{shard}: SHA-256 in the bucket differs" in repaired
    assert "rebuilt by precompute from its bars" in repaired
    assert bucket_files(s3_store)[shard] == good
    code, again = run_cli("verify", *_fresh(s3_store, tmp_path / "e"))
    assert code == 0 and again.startswith("Verified 1 bar series and 1 fxcache"), again


def test_a_damaged_day_file_blocks_no_command_and_ingest_force_builds_past_it(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    build(small_market, *s3_store.cli)
    (day,) = [k for k in bucket_files(s3_store) if k.endswith("/v0001/2024-03-05.parquet")]
    _flip_a_byte(s3_store, day)

    code, out = run_cli("verify", *_fresh(s3_store, tmp_path / "a"))
    assert code == 1 and f"{s3_store.url}/{day}: SHA-256 in the bucket differs" in out, out
    args = ("ingest", str(small_market.folder), "--force", "--workers", "1", "-q")
    code, out = run_cli(*args, *_fresh(s3_store, tmp_path / "b"))
    assert code == 0, out

    series = json.loads(bucket_files(s3_store)[day.split("/v0001/")[0] + "/manifest.json"])
    assert series["current"] == 2


def test_verify_repair_restores_a_damaged_day_file_from_the_intact_cached_copy(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path
) -> None:
    build(small_market, *s3_store.cli)
    (day,) = [k for k in bucket_files(s3_store) if k.endswith("/v0001/2024-03-05.parquet")]
    good = _flip_a_byte(s3_store, day)

    code, out = run_cli("verify", "--repair", *s3_store.cli)  # the cache that wrote it

    assert code == 0, out
    what = "SHA-256 in the bucket differs from its manifest's (damaged or replaced)"
    assert f"{s3_store.url}/{day}: {what}; restored from the intact copy in the cache." in out
    assert bucket_files(s3_store)[day] == good
    code, again = run_cli("verify", *_fresh(s3_store, tmp_path / "other"))
    assert code == 0 and "no problems" in again, again


def test_listing_commands_read_only_manifests_from_the_bucket(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(small_market, *s3_store.cli)
    seen = count_downloads(monkeypatch)

    for i, command in enumerate(
        (["ls"], ["info", "ES.FUT"], ["info", "ES.FUT", "--versions"], ["rolls", "ES.FUT"])
    ):
        code, out = run_cli(*command, *_fresh(s3_store, tmp_path / f"cache-{i}"))
        assert code == 0, (command, out)
    code, out = run_cli("verify", *_fresh(s3_store, tmp_path / "verify"))
    assert code == 0, out

    assert [rel for rel in seen if rel.endswith((".parquet", ".arrow"))] == []


def test_a_command_for_one_symbol_pulls_nothing_of_the_others(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(small_market, *s3_store.cli)
    client = boto3.client("s3", endpoint_url=s3_store.endpoint)
    for rel, body in bucket_files(s3_store).items():  # a second symbol: the same series
        if rel.startswith("bars/ES.FUT/"):
            key = "store/bars/NQ.FUT/" + rel.removeprefix("bars/ES.FUT/")
            client.put_object(Bucket=s3_store.bucket, Key=key, Body=body)
    seen = count_downloads(monkeypatch)

    code, out = run_cli("precompute", "--symbol", "ES.FUT", *_fresh(s3_store, tmp_path / "a"))

    assert code == 0, out
    assert seen and not [rel for rel in seen if "NQ.FUT" in rel]
    code, listed = run_cli("ls", *_fresh(s3_store, tmp_path / "b"))
    assert code == 0 and "NQ.FUT" in listed and "ES.FUT" in listed, listed
