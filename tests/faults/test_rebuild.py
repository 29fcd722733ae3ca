"""A rebuild that fails keeps the cache it was to replace: ``precompute --force`` builds beside
the old fxcache and switches the two at once; a damaged day file or a full disk leaves the old
one whole, and a run pinned to it still resumes."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fxstore.cli import cli
from fxstore.store import commit_fxcache, stage_fxcache
from fxstore.train.loop import train
from tests.faults._inject import fail_nth
from tests.train._tiny import TINY, Interrupt


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _cache(root: Path) -> Path:
    (folder,) = (root / "fxcache" / "ES.FUT").iterdir()
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def _damage_a_day_file(root: Path) -> None:
    day = sorted((root / "bars" / "ES.FUT").glob("*/*/v0001/*.parquet"))[-1]
    data = bytearray(day.read_bytes())
    data[len(data) // 2] ^= 0xFF
    day.write_bytes(bytes(data))


def test_precompute_force_with_a_damaged_day_file_keeps_the_old_cache(store_copy: Path) -> None:
    cache = _cache(store_copy)
    before = _files(cache)
    _damage_a_day_file(store_copy)

    result = _run("precompute", "--store", str(store_copy), "--force")

    assert result.exit_code == 1
    assert "missing or changed since ingest" in result.output
    assert _files(cache) == before
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]
    assert _run("info", "ES.FUT", "--store", str(store_copy)).exit_code == 0


def test_precompute_force_failing_keeps_a_pinned_run_resumable(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stop_in_first_fold(report: object) -> None:
        if getattr(report, "step", 0) == 100:
            raise Interrupt

    with pytest.raises(Interrupt):
        train(TINY, store_copy, on_progress=stop_in_first_fold)
    (run,) = (store_copy / "runs").iterdir()
    with monkeypatch.context() as patch:
        fail_nth(patch, os, "fsync", 3, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        assert _run("precompute", "--store", str(store_copy), "--force").exit_code == 1

    resumed = train(TINY, store_copy, resume=run.name)

    assert resumed.run_dir == run


def test_commit_fxcache_switches_to_the_new_build_and_keeps_one_lock_file(tmp_path: Path) -> None:
    folder = tmp_path / "fxcache" / "ES.FUT" / "k"
    folder.mkdir(parents=True)
    (folder / ".lock").write_bytes(b"")
    (folder / "manifest.json").write_text("old")
    lock = (folder / ".lock").stat().st_ino
    stage = stage_fxcache(folder)
    (stage / "manifest.json").write_text("new")

    commit_fxcache(stage, folder)

    assert (folder / "manifest.json").read_text() == "new"
    assert (folder / ".lock").stat().st_ino == lock  # a waiting writer holds this very file
    assert sorted(p.name for p in folder.parent.iterdir()) == ["k"]


def test_stage_fxcache_puts_back_a_cache_a_killed_switch_left_aside(tmp_path: Path) -> None:
    folder = tmp_path / "k"
    aside = tmp_path / ".k.old"
    aside.mkdir()
    (aside / "manifest.json").write_text("old")  # killed between the two renames

    stage = stage_fxcache(folder)

    assert (folder / "manifest.json").read_text() == "old"
    assert stage.is_dir() and not any(stage.iterdir())
