"""--resume refuses when an input of the run changed since it started (one line naming it)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore import __version__
from fxstore.cli import cli
from fxstore.config import FeatureConfig
from fxstore.errors import InvalidInputError
from fxstore.features.precompute import precompute, resolve_bars
from fxstore.store import file_sha256
from fxstore.train.loop import train
from tests.faults._edit import commit_edited_version
from tests.train._tiny import TINY

#: One fold, one evaluation: a run to resume in a second or two.
QUICK = dataclasses.replace(TINY, env_steps=40, eval_every=40, max_folds=1)


@pytest.fixture
def run(store: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the store and the folder of one finished run in it."""
    root = tmp_path / "store"
    shutil.copytree(store, root, ignore=shutil.ignore_patterns("runs"))
    return root, train(QUICK, root).run_dir


def _cache(root: Path) -> Path:
    (folder,) = (root / "fxcache" / "ES.FUT").iterdir()
    return folder


def _edit_config(run_dir: Path, **changes: object) -> None:
    path = run_dir / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def test_resume_unchanged_inputs_continues(run: tuple[Path, Path]) -> None:
    root, run_dir = run
    assert train(QUICK, root, resume=run_dir.name).run_dir == run_dir


def test_resume_changed_fxcache_manifest_is_refused_naming_both_checksums(
    run: tuple[Path, Path],
) -> None:
    root, run_dir = run
    manifest = _cache(root) / "manifest.json"
    old = file_sha256(manifest)
    manifest.write_text(json.dumps(json.loads(manifest.read_text())))  # other bytes
    new = file_sha256(manifest)

    with pytest.raises(InvalidInputError) as info:
        train(QUICK, root, resume=run_dir.name)

    assert str(info.value) == (
        f"run {run_dir.name!r} cannot resume: its fxcache ES.FUT/{_cache(root).name} changed "
        f"(manifest sha256 {old[:12]} -> {new[:12]}) since it started, and its checkpoints and "
        "finished folds were made with the old ones: start a new run without --resume (this "
        "run's folder is kept as it is)."
    )


def test_resume_fxcache_gone_is_refused(run: tuple[Path, Path]) -> None:
    root, run_dir = run
    key = _cache(root).name
    shutil.rmtree(_cache(root))

    with pytest.raises(InvalidInputError, match=f"its fxcache ES.FUT/{key} is no longer in "):
        train(QUICK, root, resume=run_dir.name)


def test_resume_after_other_bars_were_precomputed_keeps_the_run_on_its_own_cache(
    run: tuple[Path, Path],
) -> None:
    root, run_dir = run
    old_key = _cache(root).name
    bars_manifest = resolve_bars(root, FeatureConfig()).folder / "manifest.json"
    # other bars under the same series keys: a new version
    commit_edited_version(bars_manifest, lambda m: m.update(days=m["days"][:-5]))  # type: ignore[index]
    assert precompute(FeatureConfig(), root).key != old_key

    resumed = train(QUICK, root, resume=run_dir.name)

    assert resumed.fxcache_key == old_key


def test_resume_other_fxstore_version_is_refused(run: tuple[Path, Path]) -> None:
    root, run_dir = run
    _edit_config(run_dir, fxstore_version="0.0.1")

    with pytest.raises(
        InvalidInputError, match=rf"the fxstore version changed \(0\.0\.1 -> {__version__}\)"
    ):
        train(QUICK, root, resume=run_dir.name)


def test_resume_edited_settings_are_refused(run: tuple[Path, Path]) -> None:
    root, run_dir = run
    record = json.loads((run_dir / "config.json").read_text())
    record["config"]["agent"]["hidden"] = 32
    _edit_config(run_dir, config=record["config"])

    with pytest.raises(InvalidInputError, match=r"its settings in config\.json changed \("):
        train(QUICK, root, resume=run_dir.name)


def test_resume_changed_builtin_profile_is_refused(run: tuple[Path, Path]) -> None:
    root, run_dir = run
    _edit_config(run_dir, profile_sha256="0" * 64)

    with pytest.raises(InvalidInputError, match=r"profile 'default' changed \(000000000000 -> "):
        train(QUICK, root, resume=run_dir.name)


def test_resume_without_fxcache_facts_is_refused(run: tuple[Path, Path]) -> None:
    root, run_dir = run
    _edit_config(run_dir, fxcache={"key": 5})

    with pytest.raises(InvalidInputError, match=r"`fxcache` must hold the cache's `key`"):
        train(QUICK, root, resume=run_dir.name)


def test_cli_resume_with_changed_inputs_is_one_error_line_and_writes_nothing(
    run: tuple[Path, Path],
) -> None:
    root, run_dir = run
    _edit_config(run_dir, fxstore_version="0.0.1")
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))

    result = CliRunner().invoke(cli, ["train", "--store", str(root), "--resume", run_dir.name])

    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: run {run_dir.name!r} cannot resume: the fxstore version changed (0.0.1 -> "
        f"{__version__}) since it started, and its checkpoints and finished folds were made "
        "with the old ones: start a new run without --resume (this run's folder is kept as it "
        "is)."
    ]
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before
