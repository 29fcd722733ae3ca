"""Readers check what they trust: a bar manifest edited after its commit is refused by ingest,
precompute and read_bars (its digest is kept with the commit record); a day file replaced by
a link out of the store is not read; a day entry of the wrong type stops precompute."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import fxstore
from fxstore.errors import SchemaError
from tests.conftest import SynthMarket
from tests.faults._edit import edit_and_recommit, edit_json
from tests.faults._inject import error_line, run_cli

_INGEST_FLAGS = ("--target-bars-per-day", "20", "--workers", "1", "-q")


def _version_manifest(root: Path) -> Path:
    (path,) = (root / "bars" / "ES.FUT").glob("*/*/v0001/manifest.json")
    return path


def _tick_1e9(manifest: dict[str, object]) -> None:
    for facts in manifest["contracts"].values():  # type: ignore[attr-defined]
        facts["tick_size"] = 1e9


def _day_twice(manifest: dict[str, object]) -> None:
    days = manifest["days"]
    days.insert(1, days[0])  # type: ignore[attr-defined]


def _edited_after_commit(root: Path, edit: Callable[[dict[str, object]], None]) -> str:
    """Edit the committed version manifest; return the refusal every reader must give."""
    path = _version_manifest(root)
    committed = hashlib.sha256(path.read_bytes()).hexdigest()
    edit_json(path, edit)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return (
        f"{path}: SHA-256 is {digest}, but version 1 was committed with {committed} "
        f"({path.parent.parent / 'manifest.json'}): the manifest was changed after its commit; "
        "refusing to trust it. Restore it, or re-run `fxstore ingest --force` (`fxstore "
        "verify` lists what else differs)."
    )


@pytest.mark.parametrize("edit", [_tick_1e9, _day_twice], ids=["tick_size", "day_twice"])
def test_cli_ingest_refuses_a_manifest_edited_after_commit(
    two_roll_market: SynthMarket, store_copy: Path, edit: Callable[[dict[str, object]], None]
) -> None:
    why = _edited_after_commit(store_copy, edit)
    args = ["ingest", str(two_roll_market.folder), "--store", str(store_copy), *_INGEST_FLAGS]

    assert error_line(run_cli(*args)) == f"Error: {why}"


@pytest.mark.parametrize("edit", [_tick_1e9, _day_twice], ids=["tick_size", "day_twice"])
def test_cli_precompute_refuses_a_manifest_edited_after_commit(
    store_copy: Path, edit: Callable[[dict[str, object]], None]
) -> None:
    why = _edited_after_commit(store_copy, edit)

    line = error_line(run_cli("precompute", "--store", str(store_copy), "--force"))

    assert line == f"Error: {why}"


def test_read_bars_refuses_a_manifest_edited_after_commit(store_copy: Path) -> None:
    why = _edited_after_commit(store_copy, _day_twice)

    with pytest.raises(SchemaError) as info:
        fxstore.open(store_copy).read_bars("ES.FUT")

    assert str(info.value) == why


def test_read_bars_refuses_a_day_file_linked_out_of_the_store(
    store_copy: Path, tmp_path: Path
) -> None:
    day = sorted(_version_manifest(store_copy).parent.glob("*.parquet"))[3]
    outside = tmp_path / "elsewhere.parquet"
    shutil.move(day, outside)
    day.symlink_to(outside)  # the same bytes: only where they lie is wrong

    with pytest.raises(SchemaError) as info:
        fxstore.open(store_copy).read_bars("ES.FUT")

    assert str(info.value).startswith(f"{day}: a symbolic link to {outside}, outside ")


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("n_bars", "x", "field `n_bars` must be a whole number, was 'x'"),
        ("n_records", None, "field `n_records` is missing"),
    ],
)
def test_cli_precompute_refuses_a_day_entry_of_the_wrong_type(
    store_copy: Path, key: str, value: object, why: str
) -> None:
    path = _version_manifest(store_copy)

    def edit(manifest: dict[str, object]) -> None:
        day = manifest["days"][0]  # type: ignore[index]
        if value is None:
            del day[key]
        else:
            day[key] = value

    edit_and_recommit(path, edit)

    line = error_line(run_cli("precompute", "--store", str(store_copy), "--force"))

    assert line == (
        f"Error: {path}: {why}; the manifest is damaged or was edited: re-run the command "
        "that wrote it with --force."
    )


def test_manifest_json_of_a_recommitted_edit_is_read_as_committed(store_copy: Path) -> None:
    """The check is the digest of the commit record, not a reformatting of the JSON."""
    path = _version_manifest(store_copy)
    edit_and_recommit(path, lambda m: None)

    table = fxstore.open(store_copy).read_bars("ES.FUT", columns=["ts_close"])

    assert table.num_rows == sum(d["n_bars"] for d in json.loads(path.read_text())["days"])
