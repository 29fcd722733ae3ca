"""Versions of bar series: reading one by number or as of a time, listing them, gc."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

import fxstore
from fxstore.config import FeatureConfig
from fxstore.errors import InvalidInputError, SymbolNotFoundError
from fxstore.features.precompute import precompute
from fxstore.features.versions import gc, list_versions, parse_time_ns
from fxstore.ingest.run.pipeline import ingest
from fxstore.store import list_bar_versions
from tests.conftest import SynthMarket
from tests.features.conftest import INGEST

_FULL_BARS = 1207


@pytest.fixture
def two_versions(store: Path, two_roll_market: SynthMarket) -> Path:
    """The bar store (version 1: every day) and a re-ingest of its first 3 files (version 2)."""
    files = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))[:3]
    ingest(INGEST, files, store)
    return store


def _series(root: Path) -> Path:
    (folder,) = (root / "bars" / "ES.FUT").glob("*/*/")
    return folder


def test_read_bars_reads_the_current_version_by_default_and_older_ones_by_number(
    two_versions: Path,
) -> None:
    store = fxstore.open(two_versions)

    current = store.read_bars("ES.FUT", columns=["ts_close", "close"])
    first = store.read_bars("ES.FUT", version=1, columns=["ts_close", "close"])

    assert 0 < current.num_rows < _FULL_BARS and first.num_rows == _FULL_BARS
    assert json.loads(current.schema.metadata[b"fxstore_bar_version"])["version"] == 2
    assert current.column_names == ["ts_close", "close"]


def test_read_bars_as_of_a_time_reads_the_version_current_then(two_versions: Path) -> None:
    first, second = list_bar_versions(_series(two_versions))
    between = dt.datetime.fromtimestamp(second.committed_ns / 1e9 - 1e-3, dt.UTC)
    store = fxstore.open(two_versions)

    assert store.read_bars("ES.FUT", as_of=between).num_rows == _FULL_BARS
    assert store.read_bars("ES.FUT", as_of=dt.datetime.now(dt.UTC)).num_rows < _FULL_BARS
    with pytest.raises(SymbolNotFoundError, match="no version was committed by the `as_of`"):
        store.read_bars("ES.FUT", as_of="2001-01-01")
    assert first.committed_ns < second.committed_ns


def test_read_bars_start_and_end_select_trading_days(store: Path) -> None:
    table = fxstore.open(store).read_bars("ES.FUT", start="2024-03-01", end="2024-03-04")

    assert set(table.column("trading_day").to_pylist()) == {
        dt.date(2024, 3, 1),
        dt.date(2024, 3, 4),
    }


def test_read_bars_of_a_store_before_versions_reads_it_as_version_1(store: Path) -> None:
    folder = _series(store)
    version = folder / "v0001"
    for path in version.iterdir():  # the layout of fxstore before versions
        path.rename(folder / path.name)
    version.rmdir()

    table = fxstore.open(store).read_bars("ES.FUT")

    assert table.num_rows == _FULL_BARS
    assert json.loads(table.schema.metadata[b"fxstore_bar_version"])["version"] == 1


def test_list_versions_lists_each_build_with_its_caches(two_versions: Path) -> None:
    (series,) = list_versions(two_versions, "ES.FUT")

    assert [(v.version, v.is_current) for v in series.versions] == [(1, False), (2, True)]
    assert series.versions[0].n_bars == _FULL_BARS
    assert series.versions[0].first_day == "2024-02-26"
    text = series.format_text()
    assert text.splitlines()[1].startswith("  v2 ") and "[current]" in text


def test_precompute_records_the_bar_version_it_read(two_versions: Path) -> None:
    shutil.rmtree(_series(two_versions) / "v0002")  # keep the test cheap: back to version 1
    manifest = json.loads((_series(two_versions) / "manifest.json").read_text())
    manifest["versions"], manifest["current"] = manifest["versions"][:1], 1
    (_series(two_versions) / "manifest.json").write_text(json.dumps(manifest))

    summary = precompute(FeatureConfig(), two_versions)

    source = json.loads((summary.out_dir / "manifest.json").read_text())["source"]
    assert source["bar_version"] == 1
    (version,) = list_bar_versions(_series(two_versions))
    assert source["manifest_sha256"] == version.manifest_sha256


def test_gc_dry_run_lists_and_deletes_nothing(two_versions: Path) -> None:
    report = gc(two_versions, keep=1)

    assert report.dry_run and [e.version for e in report.deleted] == [1]
    assert (_series(two_versions) / "v0001").is_dir()
    assert "re-run with --delete" in report.format_text()


def test_gc_keep_deletes_old_versions_never_the_current(two_versions: Path) -> None:
    report = gc(two_versions, keep=1, dry_run=False)

    assert [e.version for e in report.deleted] == [1]
    assert not (_series(two_versions) / "v0001").exists()
    assert [v.version for v in list_bar_versions(_series(two_versions))] == [2]
    assert fxstore.open(two_versions).read_bars("ES.FUT").num_rows > 0


def test_gc_older_than_keeps_newer_versions(two_versions: Path) -> None:
    report = gc(two_versions, older_than_ns=parse_time_ns("2001-01-01", "older_than"))

    assert report.deleted == ()
    assert [e.version for e in report.kept] == [2, 1]


def test_gc_keeps_a_version_an_fxcache_was_built_from(
    cached_store: Path, tmp_path: Path, two_roll_market: SynthMarket
) -> None:
    root = tmp_path / "cached"
    shutil.copytree(cached_store, root)
    ingest(INGEST, sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))[:3], root)

    report = gc(root, keep=1, dry_run=False)

    assert report.deleted == ()
    assert "an fxcache was built from it" in report.kept[-1].why
    assert (_series(root) / "v0001").is_dir()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "give --keep N or --older-than TIME"),
        ({"keep": 0}, "`keep` must be >= 1"),
    ],
)
def test_gc_without_a_rule_raises(store: Path, options: dict[str, int], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        gc(store, **options)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-06-01", 1_717_200_000_000_000_000),
        ("2024-06-01T00:00:01Z", 1_717_200_001_000_000_000),
        ("2024-06-01T02:00:00+02:00", 1_717_200_000_000_000_000),
        (dt.date(2024, 6, 1), 1_717_200_000_000_000_000),
        (dt.datetime(2024, 6, 1), 1_717_200_000_000_000_000),  # naive: UTC
    ],
)
def test_parse_time_ns_valid_times(value: str | dt.date, expected: int) -> None:
    assert parse_time_ns(value, "as_of") == expected


def test_parse_time_ns_bad_value_names_the_param() -> None:
    with pytest.raises(InvalidInputError, match="`as_of` must be an ISO date or time"):
        parse_time_ns("last week", "as_of")
