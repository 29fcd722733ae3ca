from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

import pytest

from fxstore.errors import InvalidInputError, SchemaError, SymbolNotFoundError
from fxstore.store import (
    atomic_path,
    atomic_write_json,
    bars_dir,
    bars_relpath,
    commit_bar_version,
    delete_bar_versions,
    discard_bar_stage,
    file_sha256,
    find_bar_version,
    fold_dir,
    fxcache_dir,
    list_bar_versions,
    list_fxcache_keys,
    list_fxcache_symbols,
    list_orphan_bar_folders,
    list_runs,
    manifest_path,
    read_json,
    resolve_manifest_file,
    run_dir,
    stage_bar_version,
    validate_key,
)

pytestmark = pytest.mark.quick


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


# --- versions of a bar series ---------------------------------------------------------------


def _build(series: Path, payload: bytes) -> Path:
    """One build of `series` (a day file holding `payload`), committed; its folder."""
    folder = stage_bar_version(series)
    (folder / "2024-03-01.parquet").write_bytes(payload)
    days = [{"trading_day": "2024-03-01", "file": "2024-03-01.parquet", "n_bars": 1}]
    atomic_write_json(manifest_path(folder), {"days": days})
    commit_bar_version(series, folder)
    return folder


def _legacy_series(series: Path) -> bytes:
    """A series as fxstore wrote it before versions; its manifest's bytes."""
    series.mkdir(parents=True)
    (series / "2024-03-01.parquet").write_bytes(b"old bars")
    days = [{"trading_day": "2024-03-01", "file": "2024-03-01.parquet", "n_bars": 1}]
    atomic_write_json(manifest_path(series), {"stage": "ingest", "days": days})
    return manifest_path(series).read_bytes()


def test_commit_bar_version_numbers_versions_and_keeps_the_previous_one(tmp_path: Path) -> None:
    series = bars_dir(tmp_path, "ES.FUT", "mbp10_front_month", "dib-b20")

    first, second = _build(series, b"one"), _build(series, b"two")

    versions = list_bar_versions(series)
    assert [(v.version, v.folder.name, v.is_current) for v in versions] == [
        (1, "v0001", False),
        (2, "v0002", True),
    ]
    assert versions[0].committed_ns < versions[1].committed_ns
    assert (first / "2024-03-01.parquet").read_bytes() == b"one"
    assert (second / "2024-03-01.parquet").read_bytes() == b"two"


def test_stage_bar_version_uncommitted_build_is_not_a_version_and_is_staged_again(
    tmp_path: Path,
) -> None:
    series = tmp_path / "bars" / "ES.FUT" / "i" / "b"
    _build(series, b"one")

    staged = stage_bar_version(series)
    (staged / "2024-03-01.parquet").write_bytes(b"half")  # killed before its commit

    assert [v.version for v in list_bar_versions(series)] == [1]
    assert find_bar_version(series).folder.name == "v0001"
    assert stage_bar_version(series) == staged  # the next run resumes it


def test_find_bar_version_by_number_and_as_of(tmp_path: Path) -> None:
    series = tmp_path / "bars" / "ES.FUT" / "i" / "b"
    _build(series, b"one")
    _build(series, b"two")
    first, second = list_bar_versions(series)

    assert find_bar_version(series).version == 2
    assert find_bar_version(series, version=1).version == 1
    assert find_bar_version(series, as_of_ns=first.committed_ns).version == 1
    assert find_bar_version(series, as_of_ns=second.committed_ns - 1).version == 1
    assert find_bar_version(series, as_of_ns=second.committed_ns).version == 2


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"version": 7}, SymbolNotFoundError, "no version 7; it has 1 "),
        ({"as_of_ns": 0}, SymbolNotFoundError, "no version was committed by the `as_of` time"),
        ({"version": 1, "as_of_ns": 0}, InvalidInputError, "give `version` or `as_of`, not both"),
    ],
)
def test_find_bar_version_unknown_or_ambiguous_raises(
    tmp_path: Path, options: dict[str, int], error: type[Exception], match: str
) -> None:
    series = tmp_path / "bars" / "ES.FUT" / "i" / "b"
    _build(series, b"one")

    with pytest.raises(error, match=match):
        find_bar_version(series, **options)


def test_list_bar_versions_legacy_series_is_version_1_where_it_lies(tmp_path: Path) -> None:
    series = tmp_path / "bars" / "ES.FUT" / "i" / "b"
    _legacy_series(series)

    (version,) = list_bar_versions(series)

    assert (version.version, version.folder, version.is_current) == (1, series, True)
    assert version.manifest_sha256 == file_sha256(manifest_path(series))


def test_commit_bar_version_moves_a_legacy_series_into_v0001_byte_for_byte(
    tmp_path: Path,
) -> None:
    series = tmp_path / "bars" / "ES.FUT" / "i" / "b"
    legacy_manifest = _legacy_series(series)

    _build(series, b"new bars")

    old, new = list_bar_versions(series)
    assert (old.version, old.folder.name, new.version, new.folder.name) == (1, "v0001", 2, "v0002")
    assert manifest_path(old.folder).read_bytes() == legacy_manifest  # fxcaches' sha256 holds
    assert old.manifest_sha256 == file_sha256(manifest_path(old.folder))
    assert (old.folder / "2024-03-01.parquet").read_bytes() == b"old bars"
    assert not (series / "2024-03-01.parquet").exists()  # moved, not copied beside


def test_list_bar_versions_malformed_series_manifest_names_the_field(tmp_path: Path) -> None:
    series = tmp_path / "series"
    _build(series, b"one")
    data = read_json(manifest_path(series))
    atomic_write_json(manifest_path(series), data | {"current": 5})

    with pytest.raises(SchemaError, match=r"manifest.json: `versions` must be increasing"):
        list_bar_versions(series)


def test_list_bar_versions_folder_comes_from_the_number_never_from_the_manifest(
    tmp_path: Path,
) -> None:
    series = tmp_path / "series"
    _build(series, b"one")
    data = read_json(manifest_path(series))
    data["versions"][0]["folder"] = "../../outside"  # type: ignore[index]
    atomic_write_json(manifest_path(series), data)

    assert list_bar_versions(series)[0].folder == series / "v0001"


def test_delete_bar_versions_removes_old_ones_never_the_current(tmp_path: Path) -> None:
    series = tmp_path / "series"
    first, _, third = (_build(series, p) for p in (b"1", b"2", b"3"))

    with pytest.raises(InvalidInputError, match="version 3 is current; it is never deleted"):
        delete_bar_versions(series, [3])
    gone = delete_bar_versions(series, [1])

    assert gone == [first] and not first.exists() and third.exists()
    assert [v.version for v in list_bar_versions(series)] == [2, 3]
    assert stage_bar_version(series).name == "v0004"  # numbers are never reused


def test_delete_bar_versions_killed_after_the_commit_leaves_an_orphan_the_next_one_removes(
    tmp_path: Path,
) -> None:
    series = tmp_path / "series"
    first = _build(series, b"1")
    _build(series, b"2")
    shutil.copytree(first, tmp_path / "kept")
    delete_bar_versions(series, [1])
    shutil.copytree(tmp_path / "kept", first)  # as if killed before its folder was deleted

    assert list_orphan_bar_folders(series) == [first]
    assert delete_bar_versions(series, []) == [first] and not first.exists()


def test_discard_bar_stage_refuses_a_committed_version(tmp_path: Path) -> None:
    series = tmp_path / "series"
    folder = _build(series, b"1")

    with pytest.raises(InvalidInputError, match="is a committed version"):
        discard_bar_stage(folder)
    assert folder.is_dir()


def test_find_bar_version_as_of_the_commit_time_shown_finds_it(tmp_path: Path) -> None:
    series = tmp_path / "bars" / "ES.FUT" / "i" / "b"
    _build(series, b"one")
    (only,) = list_bar_versions(series)
    shown = dt.datetime.fromisoformat(only.committed_at)
    shown_ns = (
        (shown - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1) * 1000
    )

    assert only.committed_ns % 1000 == 0  # committed on a whole microsecond
    assert find_bar_version(series, as_of_ns=shown_ns).version == 1
