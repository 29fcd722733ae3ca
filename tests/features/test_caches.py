"""``fxstore gc --caches``: which fxcaches go, which stay and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxstore.errors import SymbolNotFoundError
from fxstore.features.caches import gc_caches
from fxstore.store import atomic_write_json, fxcache_dir, run_dir
from tests.test_fxcache import SYMBOL, _bar_version, _write_cache

pytestmark = pytest.mark.quick


def _caches(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "fxcache" / SYMBOL).iterdir())


def test_gc_caches_dry_run_lists_the_cache_of_older_bars_and_deletes_nothing(
    tmp_path: Path,
) -> None:
    old = _write_cache(tmp_path, "k0", source=_bar_version(tmp_path, b"first"))
    _write_cache(tmp_path, "k1", source=_bar_version(tmp_path, b"second"))

    report = gc_caches(tmp_path)

    assert [e.folder for e in report.deleted] == [old]
    assert report.kept[0].why == "built from the current bars, v0002"
    assert _caches(tmp_path) == ["k0", "k1"]


def test_gc_caches_delete_removes_only_the_unread_cache_of_older_bars(tmp_path: Path) -> None:
    _write_cache(tmp_path, "k0", source=_bar_version(tmp_path, b"first"))
    _write_cache(tmp_path, "k1", source=_bar_version(tmp_path, b"second"))

    report = gc_caches(tmp_path, dry_run=False)

    assert _caches(tmp_path) == ["k1"]
    assert report.format_text().splitlines()[-1].startswith("Deleted 1 fxcache, ")


def test_gc_caches_keeps_a_cache_a_run_read(tmp_path: Path) -> None:
    _write_cache(tmp_path, "k0", source=_bar_version(tmp_path, b"first"))
    _write_cache(tmp_path, "k1", source=_bar_version(tmp_path, b"second"))
    record = {"kind": "train", "fxcache": {"symbol": SYMBOL, "key": "k0"}}
    atomic_write_json(run_dir(tmp_path, "20240101T000000Z-train") / "config.json", record)

    report = gc_caches(tmp_path, dry_run=False)

    assert _caches(tmp_path) == ["k0", "k1"]
    assert report.kept[0].folder == fxcache_dir(tmp_path, SYMBOL, "k0")
    assert report.kept[0].why == ("run 20240101T000000Z-train read it (delete the run to free it)")


def test_gc_caches_keeps_a_cache_that_names_no_bars(tmp_path: Path) -> None:
    _write_cache(tmp_path, "k0")
    _write_cache(tmp_path, "k1", source=_bar_version(tmp_path, b"first"))

    report = gc_caches(tmp_path, dry_run=False)

    assert _caches(tmp_path) == ["k0", "k1"]
    assert report.kept[0].why == "its manifest names no bars it was built from"


def test_gc_caches_unknown_symbol_lists_the_known(tmp_path: Path) -> None:
    _write_cache(tmp_path, "k0")

    with pytest.raises(SymbolNotFoundError, match=r"'NQ\.FUT' in .*; known: ES\.FUT\.$"):
        gc_caches(tmp_path, symbol="NQ.FUT")
