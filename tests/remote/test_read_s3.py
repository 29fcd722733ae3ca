"""``fxstore.open("s3://...")``: the manifests are pulled, then each read downloads only the
day files or shards of the trading days it asks for."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import fxstore
from tests.conftest import SynthMarket
from tests.remote.conftest import S3Store
from tests.remote.test_store_s3 import build, count_downloads, run_cli


def test_read_bars_of_an_s3_store_downloads_only_the_days_asked_for(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(small_market, *s3_store.cli)
    seen = count_downloads(monkeypatch)
    store = fxstore.open(s3_store.url, endpoint=s3_store.endpoint, cache_dir=tmp_path / "c")
    after_open = list(seen)

    bars = store.read_bars("ES.FUT", start="2024-03-11", end="2024-03-12")
    again = store.read_bars("ES.FUT", start="2024-03-11", end="2024-03-12")

    assert not any(r.endswith((".parquet", ".arrow")) for r in after_open)  # manifests only
    assert [Path(r).name for r in seen[len(after_open) :]] == [
        "2024-03-11.parquet",
        "2024-03-12.parquet",
    ]  # once: the second read finds them in the mirror
    days = {d.isoformat() for d in bars["trading_day"].to_pylist()}
    assert days == {"2024-03-11", "2024-03-12"} and again.equals(bars)


def test_read_of_an_s3_store_downloads_only_the_shards_of_the_days_asked_for(
    s3_store: S3Store, small_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out = run_cli("ingest", str(small_market.folder), "--workers", "1", "-q", *s3_store.cli)
    assert code == 0, out
    code, out = run_cli("precompute", "--shard-by", "day", *s3_store.cli)
    assert code == 0, out
    seen = count_downloads(monkeypatch)
    store = fxstore.open(s3_store.url, endpoint=s3_store.endpoint, cache_dir=tmp_path / "c")
    manifest = store.manifest("ES.FUT")
    day = manifest.shards[-1].first_trading_day  # days since 1970-01-01
    wanted = [e for e in manifest.shards if e.first_trading_day <= day <= e.last_trading_day]
    n_before = len(seen)

    iso = (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()
    table = store.read("ES.FUT", start=iso, end=iso)

    assert table.num_rows > 0
    assert sorted(Path(r).name for r in seen[n_before:]) == sorted(e.file for e in wanted)
    assert len(manifest.shards) > len(wanted)  # the others stayed in the bucket
