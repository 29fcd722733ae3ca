"""DbnFileWriter: temp names the store's cleanup knows, and no temp file left on failure."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from fxstore.store import list_temps
from fxstore.synth import writer
from fxstore.synth.writer import DbnFileWriter, dbn_file_name, mbp10_metadata

pytestmark = pytest.mark.quick

_DAY = dt.date(2024, 6, 4)


def _meta() -> writer.DbnMetadata:
    return mbp10_metadata("ES.FUT", 0, 1, [], _DAY, _DAY + dt.timedelta(days=1))


def test_writer_temp_file_has_the_store_temp_name(tmp_path: Path) -> None:
    path = tmp_path / dbn_file_name(_DAY)

    with DbnFileWriter(path, _meta(), level=1) as dbn:
        assert [p.name.startswith(f".{path.name}.") for p in list_temps(tmp_path)] == [True]
        dbn.commit()

    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_writer_failing_after_opening_its_temp_file_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_encode(_meta: object) -> bytes:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer, "encode_metadata", failing_encode)

    with pytest.raises(OSError, match="No space left"):
        DbnFileWriter(tmp_path / dbn_file_name(_DAY), _meta(), level=1)

    assert list(tmp_path.iterdir()) == []


def test_writer_failing_commit_removes_its_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dbn = DbnFileWriter(tmp_path / dbn_file_name(_DAY), _meta(), level=1)

    def failing_replace(_src: object, _dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer.os, "replace", failing_replace)

    with pytest.raises(OSError, match="No space left"):
        dbn.commit()

    assert list(tmp_path.iterdir()) == []
