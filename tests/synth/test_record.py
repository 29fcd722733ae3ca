"""``synth`` twice: the same options leave the files as they are; a stopped run resumes."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from fxstore.config import SynthConfig
from fxstore.synth import generate_market
from fxstore.synth.record import RECORD_NAME
from fxstore.synth.writer import DbnFileWriter

pytestmark = pytest.mark.quick

CONFIG = SynthConfig(start=dt.date(2024, 6, 3), end=dt.date(2024, 6, 5), events_per_day=1_000)


def _stamps(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {
        p.name: (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(folder.iterdir())
        if p.name != RECORD_NAME
    }


def test_generate_market_same_options_twice_leaves_files_as_they_are(tmp_path: Path) -> None:
    first = generate_market(CONFIG, tmp_path)
    before = _stamps(tmp_path)

    second = generate_market(CONFIG, tmp_path)

    assert _stamps(tmp_path) == before
    assert (first.days_kept, second.days_kept) == (0, 3)
    assert second.is_up_to_date
    assert (second.files, second.definitions) == (first.files, first.definitions)
    assert (second.n_records, second.day_volumes) == (first.n_records, first.day_volumes)


def test_generate_market_utc_day_split_twice_leaves_files_as_they_are(tmp_path: Path) -> None:
    config = dataclasses.replace(CONFIG, split="utc-day")
    first = generate_market(config, tmp_path)
    before = _stamps(tmp_path)

    second = generate_market(config, tmp_path)

    assert _stamps(tmp_path) == before
    assert second.is_up_to_date
    assert second.files == first.files


def test_generate_market_utc_day_split_with_a_changed_file_writes_every_day_again(
    tmp_path: Path,
) -> None:
    config = dataclasses.replace(CONFIG, split="utc-day")
    first = generate_market(config, tmp_path)
    original = first.files[1].read_bytes()
    first.files[1].write_bytes(b"damaged")

    again = generate_market(config, tmp_path)

    assert again.days_kept == 0
    assert first.files[1].read_bytes() == original


def test_generate_market_other_options_write_every_day_again(tmp_path: Path) -> None:
    generate_market(CONFIG, tmp_path)

    other = generate_market(dataclasses.replace(CONFIG, seed=8), tmp_path)

    assert other.days_kept == 0


def test_generate_market_changed_file_is_written_again_alone(tmp_path: Path) -> None:
    first = generate_market(CONFIG, tmp_path)
    day_file = first.files[1]
    original = day_file.read_bytes()
    day_file.write_bytes(b"damaged")

    again = generate_market(CONFIG, tmp_path)

    assert again.days_kept == 2
    assert day_file.read_bytes() == original


def test_generate_market_stopped_run_resumes_at_the_first_missing_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _stamps(generate_market(CONFIG, tmp_path / "whole").files[0].parent)
    real_commit = DbnFileWriter.commit
    commits = {"n": 0}

    def stop_on_the_third_day(self: DbnFileWriter) -> Path:
        commits["n"] += 1
        if commits["n"] == 3:
            raise KeyboardInterrupt  # Ctrl-C while the third day is written
        return real_commit(self)

    monkeypatch.setattr(DbnFileWriter, "commit", stop_on_the_third_day)
    with pytest.raises(KeyboardInterrupt):
        generate_market(CONFIG, tmp_path / "stopped")
    monkeypatch.setattr(DbnFileWriter, "commit", real_commit)

    resumed = generate_market(CONFIG, tmp_path / "stopped")

    assert resumed.days_kept == 2
    got = _stamps(tmp_path / "stopped")
    assert {k: v[1] for k, v in got.items()} == {k: v[1] for k, v in whole.items()}
    assert np.sum([v.n_records for v in resumed.day_volumes]) == resumed.n_records
