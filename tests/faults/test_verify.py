"""fxstore verify: the store against its manifests; --repair rebuilds only what is derivable."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.verify import verify_store
from tests.faults._edit import edit_and_recommit


@pytest.fixture
def store(store_copy: Path) -> Path:
    """A private copy of the faults' clean store (bars and the default fxcache)."""
    return store_copy


def _series(root: Path) -> Path:
    (folder,) = (root / "bars" / "ES.FUT" / "mbp10_front_month").iterdir()
    return folder


def _version(root: Path) -> Path:
    """The folder of the series' one committed version (its day files and manifest)."""
    return _series(root) / "v0001"


def _recommit(root: Path) -> None:
    """Record the version manifest's new sha256 in the series manifest, as a build of other
    bars committing under the same keys would."""
    series = _series(root) / "manifest.json"
    data = json.loads(series.read_text())
    sha = hashlib.sha256((_version(root) / "manifest.json").read_bytes()).hexdigest()
    data["versions"][0]["manifest_sha256"] = sha
    series.write_text(json.dumps(data))


def _cache(root: Path) -> Path:
    (folder,) = (root / "fxcache" / "ES.FUT").iterdir()
    return folder


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _lines(root: Path, *args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["verify", "--store", str(root), *args])
    return result.exit_code, result.output.strip().splitlines()


def test_verify_clean_store_finds_no_problem(store: Path) -> None:
    code, lines = _lines(store)

    assert code == 0
    assert len(lines) == 1
    assert lines[0].startswith("Verified 1 bar series and 1 fxcache (")
    assert lines[0].endswith(f" files) in {store}: no problems.")


def test_verify_json_lists_the_problems_and_exits_1_while_any_is_left(store: Path) -> None:
    shard = _cache(store) / "2024-04.arrow"
    _flip_byte(shard)

    result = CliRunner().invoke(cli, ["verify", "--json", "--store", str(store)])

    data = json.loads(result.stdout)
    assert result.exit_code == 1
    assert (data["n_series"], data["n_caches"], data["n_left"]) == (1, 1, 1)
    assert [(p["path"], p["is_repaired"]) for p in data["problems"]] == [(str(shard), False)]


def test_verify_damaged_shard_is_reported_and_exit_1(store: Path) -> None:
    shard = _cache(store) / "2024-04.arrow"
    _flip_byte(shard)

    code, lines = _lines(store)

    assert code == 1
    assert lines[0] == (
        f"{shard}: SHA-256 differs from its manifest's (damaged or replaced); rebuild it with "
        "`fxstore precompute --force` (or `fxstore verify --repair`)."
    )
    assert lines[1].endswith(": 1 problem, 0 repaired, 1 left.")


@pytest.mark.parametrize("damage", ["flip", "delete", "truncate"])
def test_verify_repair_rebuilds_a_damaged_shard_byte_for_byte(
    store: Path, clean_store: Path, damage: str
) -> None:
    shard = _cache(store) / "2024-04.arrow"
    if damage == "flip":
        _flip_byte(shard)
    elif damage == "delete":
        shard.unlink()
    else:
        shard.write_bytes(shard.read_bytes()[:100])

    report = verify_store(store, repair=True)

    assert [p.is_repaired for p in report.problems] == [True]
    assert report.problems[0].action == "rebuilt by precompute from its bars"
    assert shard.read_bytes() == (_cache(clean_store) / "2024-04.arrow").read_bytes()
    assert verify_store(store).problems == ()


def test_verify_repair_leaves_a_damaged_day_file_and_says_how_to_rebuild(store: Path) -> None:
    day = sorted(_version(store).glob("*.parquet"))[10]
    _flip_byte(day)
    damaged = day.read_bytes()

    code, lines = _lines(store, "--repair")

    assert code == 1
    assert lines[0] == (
        f"{day}: SHA-256 differs from its manifest's (damaged or replaced); rebuild the series "
        "from its DBN files with `fxstore ingest ... --force` (the inputs are not in the store, "
        "so verify cannot)."
    )
    assert day.read_bytes() == damaged


def test_verify_repair_will_not_rebuild_a_cache_from_damaged_bars(store: Path) -> None:
    _flip_byte(sorted(_version(store).glob("*.parquet"))[10])
    shard = _cache(store) / "2024-04.arrow"
    _flip_byte(shard)

    report = verify_store(store, repair=True)

    (problem,) = [p for p in report.problems if p.path == shard]
    assert not problem.is_repaired
    assert problem.action == f"cannot rebuild it: its bars {_series(store)} are damaged or gone"


def test_verify_repair_will_not_rebuild_a_cache_of_other_bars(store: Path) -> None:
    manifest = _version(store) / "manifest.json"
    data = json.loads(manifest.read_text())
    data["days"] = data["days"][:-5]  # re-ingested: other bars under the same keys
    manifest.write_text(json.dumps(data))
    _recommit(store)
    shard = _cache(store) / "2024-04.arrow"
    _flip_byte(shard)
    before = sorted(p.name for p in (store / "fxcache" / "ES.FUT").iterdir())

    report = verify_store(store, repair=True)

    (problem,) = [p for p in report.problems if p.path == shard]
    assert not problem.is_repaired
    assert "are not the ones it was built from" in problem.action
    assert sorted(p.name for p in (store / "fxcache" / "ES.FUT").iterdir()) == before


def test_verify_repair_removes_temp_files_only_of_fxstores_pattern(store: Path) -> None:
    temp = _series(store) / ".2024-03-01.parquet.0a1b2c3d.tmp"
    temp.write_bytes(b"partial")
    other = _series(store) / ".notes.tmp"
    other.write_bytes(b"mine")

    assert [p.path for p in verify_store(store).problems] == [temp]
    report = verify_store(store, repair=True)

    assert [(p.path, p.is_repaired) for p in report.problems] == [(temp, True)]
    assert not temp.exists() and other.read_bytes() == b"mine"


def test_verify_unlisted_data_file_is_reported_and_never_deleted(store: Path) -> None:
    stray = _cache(store) / "2023-12.arrow"
    stray.write_bytes(b"not listed")

    code, lines = _lines(store, "--repair")

    assert code == 1
    assert lines[0] == (
        f"{stray}: looks like data but its manifest does not list it; left as it is (it may be "
        "good data): move it aside if it is not yours."
    )
    assert stray.read_bytes() == b"not listed"


def test_verify_wrong_size_shard_names_both_sizes(store: Path) -> None:
    shard = _cache(store) / "2024-05.arrow"
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes() + b"x")

    (problem,) = verify_store(store).problems

    assert problem.what == f"is {size + 1} bytes, its manifest says {size}"


def test_verify_manifest_entry_outside_the_series_is_reported(store: Path) -> None:
    manifest = _version(store) / "manifest.json"
    data = json.loads(manifest.read_text())
    day = next(d for d in data["days"] if "file" in d)
    day["file"] = "../../../../outside.parquet"
    manifest.write_text(json.dumps(data))

    problems = verify_store(store).problems

    assert any(
        p.path == manifest and "'../../../../outside.parquet' is not a file inside" in p.what
        for p in problems
    )


def test_verify_link_out_of_the_store_is_reported(store: Path, tmp_path: Path) -> None:
    shard = _cache(store) / "2024-04.arrow"
    outside = tmp_path / "outside.arrow"
    shutil.move(shard, outside)
    shard.symlink_to(outside)

    (problem,) = verify_store(store).problems

    assert problem.what == f"leads outside the store (to {outside.resolve()})"


def test_verify_unfinished_build_is_reported(store: Path) -> None:
    folder = store / "fxcache" / "ES.FUT" / "0123456789abcdef"
    folder.mkdir()

    (problem,) = verify_store(store).problems

    assert (problem.path, problem.what) == (folder, "an unfinished build (no manifest)")


def test_verify_symbol_checks_only_that_symbol(store: Path) -> None:
    shutil.copytree(store / "bars" / "ES.FUT", store / "bars" / "NQ.FUT")
    _flip_byte(_cache(store) / "2024-04.arrow")

    code, lines = _lines(store, "NQ.FUT")

    assert code == 0
    assert len(lines) == 1
    assert lines[0].startswith("Verified 1 bar series and 0 fxcaches (")
    assert lines[0].endswith(f" in {store}: no problems.")


def test_verify_unknown_symbol_is_one_error_line(store: Path) -> None:
    code, lines = _lines(store, "NOPE.FUT")

    assert code == 1
    assert lines == [
        f"Error: No bars or fxcache for symbol 'NOPE.FUT' in {store}; known: ES.FUT. Check the "
        "symbol (`fxstore ls`)."
    ]


def test_verify_reports_a_day_entry_of_the_wrong_type_even_when_recommitted(store: Path) -> None:
    manifest = _version(store) / "manifest.json"
    edit_and_recommit(manifest, lambda m: m["days"][0].update(n_bars="x"))  # type: ignore[index]

    (problem,) = verify_store(store).problems

    assert (problem.path, problem.what) == (
        manifest,
        "field `n_bars` must be a whole number, was 'x'",
    )


def test_verify_reports_an_uncommitted_build_and_a_replaced_version_manifest(
    store: Path,
) -> None:
    staged = _series(store) / "v0002"
    staged.mkdir()  # a build killed before its commit
    manifest = _version(store) / "manifest.json"
    manifest.write_text(manifest.read_text() + "\n")  # not the bytes its version committed

    problems = verify_store(store).problems

    assert any(p.path == staged and "unfinished build (not committed)" in p.what for p in problems)
    assert any(
        p.path == manifest and "not the manifest its version committed" in p.what for p in problems
    )
    assert staged.is_dir()  # reported, never deleted
