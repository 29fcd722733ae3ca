from __future__ import annotations

import os
from pathlib import Path

import pytest

from fxstore.errors import InvalidInputError
from fxstore.store import atomic_path, atomic_write_json, bars_dir, read_json, validate_key


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
