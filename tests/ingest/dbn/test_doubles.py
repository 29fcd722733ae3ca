from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from fxstore.errors import InvalidInputError
from fxstore.ingest import open_dbn
from tests.ingest._dbn_files import DAY_NS, T0, esh1_mapping, mbp10_records, metadata, write_dbn

pytestmark = pytest.mark.quick

ESH1 = metadata(mappings=(esh1_mapping(),))


def _day(path: Path, ts: np.ndarray, *, compress: bool = False) -> Path:
    return write_dbn(path, mbp10_records(T0 + ts), meta=ESH1, compress=compress)


def test_open_dbn_dbn_beside_its_zst_refused_as_the_same_records(tmp_path: Path) -> None:
    ts = np.arange(5)
    plain, packed = _day(tmp_path / "a.dbn", ts), _day(tmp_path / "a.dbn.zst", ts, compress=True)

    with pytest.raises(InvalidInputError) as err:
        open_dbn([plain, packed])

    assert str(err.value) == (
        f"{plain} and {packed} hold the same records (same request and first record: a copy, "
        "or a .dbn beside its .dbn.zst); pass one of them."
    )


def test_open_dbn_renamed_copy_refused_as_the_same_records(tmp_path: Path) -> None:
    original = _day(tmp_path / "day.dbn", np.arange(5))
    copy = Path(shutil.copy(original, tmp_path / "day (1).dbn"))

    with pytest.raises(InvalidInputError, match="hold the same records"):
        open_dbn([original, copy])


def test_open_dbn_hard_link_refused_as_the_same_file(tmp_path: Path) -> None:
    original = _day(tmp_path / "day.dbn", np.arange(5))
    os.link(original, tmp_path / "link.dbn")

    with pytest.raises(InvalidInputError) as err:
        open_dbn(tmp_path)

    assert str(err.value) == (
        f"{tmp_path / 'day.dbn'} and {tmp_path / 'link.dbn'} are the same file (a hard link): "
        "its records would be read twice; pass one of them."
    )


def test_open_dbn_partial_overlap_of_one_instrument_refused(tmp_path: Path) -> None:
    early = _day(tmp_path / "early.dbn", np.arange(0, 10))
    late = _day(tmp_path / "late.dbn", np.arange(5, 15))

    with pytest.raises(InvalidInputError) as err:
        open_dbn([early, late])

    assert str(err.value).startswith(
        f"{early} and {late} overlap in time and share instruments: their common records "
        "would be counted twice"
    )


def test_open_dbn_overlap_of_other_instruments_is_merged(tmp_path: Path) -> None:
    nq = metadata(mappings=(dataclasses.replace(esh1_mapping(), raw_symbol="NQH1", symbol="9999"),))
    es = _day(tmp_path / "es.dbn", np.arange(0, 10))
    other = write_dbn(tmp_path / "nq.dbn", mbp10_records(T0 + np.arange(5, 15), 9999), meta=nq)

    source = open_dbn([es, other])

    assert [f.path.name for f in source.files] == ["es.dbn", "nq.dbn"]


def test_open_dbn_consecutive_days_of_one_instrument_pass(tmp_path: Path) -> None:
    first = _day(tmp_path / "d1.dbn", np.arange(5))
    second_meta = dataclasses.replace(ESH1, start=T0 + DAY_NS, end=T0 + 2 * DAY_NS)
    second = write_dbn(
        tmp_path / "d2.dbn", mbp10_records(T0 + DAY_NS + np.arange(5)), meta=second_meta
    )

    assert len(open_dbn([first, second]).files) == 2
