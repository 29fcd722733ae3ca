"""An s3:// store: a new version's days taken from the last one are copied inside the bucket
(no upload), and ``--depth`` pushes the series of its own symbol."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxstore.remote.s3 import S3Bucket
from tests.conftest import SynthMarket
from tests.remote.conftest import S3Store
from tests.remote.test_store_s3 import bucket_files, local_files, run_cli


def _calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The objects uploaded (put_file) and copied (copy) from now on."""
    seen: dict[str, list[str]] = {"put": [], "copy": []}
    put_file, copy = S3Bucket.put_file, S3Bucket.copy

    def counted_put(self: S3Bucket, rel: str, path: Path, **kw: bool) -> str:
        seen["put"].append(rel)
        return put_file(self, rel, path, **kw)

    def counted_copy(self: S3Bucket, source: str, rel: str, *, source_etag: str) -> str:
        seen["copy"].append(rel)
        return copy(self, source, rel, source_etag=source_etag)

    monkeypatch.setattr(S3Bucket, "put_file", counted_put)
    monkeypatch.setattr(S3Bucket, "copy", counted_copy)
    return seen


def test_days_taken_from_the_last_version_are_copied_in_the_bucket(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = sorted(str(p) for p in small_market.folder.glob("*.dbn.zst"))
    first = [f for f in files if "definition" in f or Path(f).name[10:18] <= "20240308"]
    args = ("ingest", "--workers", "1", "-q")
    assert run_cli(*args, *first, *s3_store.cli)[0] == 0
    seen = _calls(monkeypatch)

    code, out = run_cli(*args, *files, *s3_store.cli)

    assert code == 0, out
    assert [Path(r).name for r in seen["copy"]] == [
        f"2024-03-0{d}.parquet" for d in (4, 5, 6, 7, 8)
    ]
    assert len([r for r in seen["put"] if r.endswith(".parquet")]) == 10
    assert run_cli(*args, *files, "--store", str(tmp_path / "local"))[0] == 0
    local = {Path(k).name: v for k, v in local_files(tmp_path / "local").items() if "/v0001/" in k}
    remote = {Path(k).name: v for k, v in bucket_files(s3_store).items() if "/v0002/" in k}
    assert remote == local  # the day files and the manifest of a full build


def test_ingest_depth_pushes_its_own_symbol(s3_store: S3Store, small_market: SynthMarket) -> None:
    args = ("ingest", str(small_market.folder), "--workers", "1", "-q", "--symbol", "ES.FUT")

    code, out = run_cli(*args, "--depth", "2", *s3_store.cli)

    assert code == 0, out
    series = {k.split("/")[1] for k in bucket_files(s3_store) if k.startswith("bars/")}
    assert series == {"ES.FUT.2"}
