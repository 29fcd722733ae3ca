from __future__ import annotations

import os
from pathlib import Path

import pytest

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.store import (
    atomic_path,
    atomic_write_json,
    bars_dir,
    bars_relpath,
    fold_dir,
    fxcache_dir,
    list_fxcache_keys,
    list_fxcache_symbols,
    list_runs,
    manifest_path,
    read_json,
    resolve_manifest_file,
    run_dir,
    validate_key,
)


@pytest.mark.parametrize("key", ["ES.FUT", "mbp10_front_month", "dib-t7500", "6E.FUT"])
def test_validate_key_valid_keys_pass(key: str) -> None:
    assert validate_key(key, "symbol") == key


@pytest.mark.parametrize(
    "key", ["", ".", "..", "../etc", "ES/FUT", "ES FUT", "/abs", "a\\\\b", "é"]
)
def test_validate_key_unsafe_keys_raise_naming_param(key: str) -> None:
    with pytest.raises(InvalidInputError, match="`symbol` may hold only"):
        validate_key(key, "symbol")


def test_bars_dir_symbol_cannot_escape_root(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError):
        bars_dir(tmp_path, "..", "mbp10", "dib")


def test_atomic_path_failure_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"

    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"partial")
        raise RuntimeError("killed")

    assert os.listdir(tmp_path) == []


def test_atomic_write_json_round_trips(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "manifest.json"

    atomic_write_json(target, {"b": 1, "a": [1, 2]})

    assert read_json(target) == {"a": [1, 2], "b": 1}
    assert [p.name for p in target.parent.iterdir()] == ["manifest.json"]


def test_read_json_corrupt_file_raises_with_path(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("{not json")

    with pytest.raises(InvalidInputError, match=r"manifest\.json: cannot read it as JSON"):
        read_json(target)


@pytest.mark.parametrize("name", ["2024-01.arrow", "..x.arrow", "./2024-01.arrow", "sub/d.parquet"])
def test_resolve_manifest_file_inside_folder_joins_it(tmp_path: Path, name: str) -> None:
    manifest = tmp_path / "series" / "manifest.json"

    assert resolve_manifest_file(manifest, name) == tmp_path / "series" / name


@pytest.mark.parametrize(
    "name", ["../../outside.arrow", "../x.arrow", "a/../../x.arrow", "/etc/passwd", "", ".", ".."]
)
def test_resolve_manifest_file_leaving_folder_raises_naming_manifest_and_value(
    tmp_path: Path, name: str
) -> None:
    manifest = tmp_path / "series" / "manifest.json"

    with pytest.raises(SchemaError) as info:
        resolve_manifest_file(manifest, name)

    assert str(info.value) == (
        f"{manifest}: file entry {name!r} is not a file inside {manifest.parent}; refusing "
        "to read it (the manifest is damaged or was edited): re-run with --force."
    )


def test_list_fxcache_keys_newest_manifest_first_and_symbols_need_one(tmp_path: Path) -> None:
    for key, mtime_ns in (("aaaa", 2_000), ("bbbb", 3_000), ("cccc", 1_000)):
        atomic_write_json(manifest_path(fxcache_dir(tmp_path, "ES.FUT", key)), {})
        os.utime(manifest_path(fxcache_dir(tmp_path, "ES.FUT", key)), ns=(mtime_ns, mtime_ns))
    fxcache_dir(tmp_path, "NQ.FUT", "dddd").mkdir(parents=True)  # no manifest: incomplete

    assert list_fxcache_keys(tmp_path, "ES.FUT") == ["bbbb", "aaaa", "cccc"]
    assert list_fxcache_keys(tmp_path, "NQ.FUT") == []
    assert list_fxcache_symbols(tmp_path) == ["ES.FUT"]


def test_list_runs_lists_folders_holding_the_marker(tmp_path: Path) -> None:
    atomic_write_json(run_dir(tmp_path, "r2") / "config.json", {})
    atomic_write_json(run_dir(tmp_path, "r1") / "config.json", {})
    run_dir(tmp_path, "r3").mkdir()

    assert list_runs(tmp_path, "config.json") == ["r1", "r2"]
    assert fold_dir(run_dir(tmp_path, "r1"), 3) == tmp_path / "runs" / "r1" / "fold03"


def test_bars_relpath_is_bars_dir_below_the_root(tmp_path: Path) -> None:
    relpath = bars_relpath("ES.FUT", "mbp10_front_month", "dib-b100")

    assert relpath == "bars/ES.FUT/mbp10_front_month/dib-b100"
    assert tmp_path / relpath == bars_dir(tmp_path, "ES.FUT", "mbp10_front_month", "dib-b100")
