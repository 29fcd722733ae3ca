"""Checkpoints: arrays and JSON facts round-trip; pickles, other files and formats are refused."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fxstore.errors import InvalidInputError
from fxstore.train.agent.checkpoint import load_checkpoint, save_checkpoint

pytestmark = pytest.mark.quick


def test_save_checkpoint_round_trips_arrays_shapes_and_meta(tmp_path: Path) -> None:
    arrays = {"a/params": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.array(7)}
    save_checkpoint(tmp_path / "c.npz", arrays, {"step": 7, "evals": [{"loss": None}]})
    loaded, meta = load_checkpoint(tmp_path / "c.npz")
    assert set(loaded) == set(arrays)
    np.testing.assert_array_equal(loaded["a/params"], arrays["a/params"])
    assert loaded["step"].shape == ()
    assert meta["step"] == 7 and meta["evals"] == [{"loss": None}]
    assert [p.name for p in tmp_path.iterdir()] == ["c.npz"]  # no temporary file left


def test_load_checkpoint_with_object_array_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.npz"
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("params.npy", buffer.getvalue())
    with pytest.raises(InvalidInputError, match="not a readable fxstore checkpoint"):
        load_checkpoint(path)


def test_load_checkpoint_of_plain_npz_names_the_format(tmp_path: Path) -> None:
    np.savez(tmp_path / "plain.npz", x=np.zeros(2))
    with pytest.raises(InvalidInputError, match="not an fxstore-checkpoint/1 checkpoint"):
        load_checkpoint(tmp_path / "plain.npz")


def test_load_checkpoint_missing_file_says_start_anew(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no checkpoint there"):
        load_checkpoint(tmp_path / "none.npz")


def test_save_checkpoint_reserved_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="reserved"):
        save_checkpoint(tmp_path / "c.npz", {"__meta__": np.zeros(1)}, {})
