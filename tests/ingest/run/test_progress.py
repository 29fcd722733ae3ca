"""Tests of the ingest progress log: append per group, torn lines, other runs' logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxstore.ingest.run.progress import PROGRESS, ProgressLog, load_progress

pytestmark = pytest.mark.quick

ENTRY = {"days": [{"trading_day": "2024-03-05", "n_bars": 3}], "inputs": [], "n_records": 9}


def test_progress_log_round_trips_groups_in_order(tmp_path: Path) -> None:
    with ProgressLog(tmp_path, "fp", {}) as log:
        for key in ["b.dbn", "a.dbn", "c.dbn"]:
            log.append(key, {**ENTRY, "n_records": len(key)})

    loaded = load_progress(tmp_path, "fp")

    assert list(loaded) == ["b.dbn", "a.dbn", "c.dbn"]
    assert loaded["a.dbn"] == {**ENTRY, "n_records": 5}


def test_progress_of_another_run_is_ignored(tmp_path: Path) -> None:
    with ProgressLog(tmp_path, "fp", {}) as log:
        log.append("a.dbn", ENTRY)

    assert load_progress(tmp_path, "other") == {}
    assert load_progress(tmp_path / "missing", "fp") == {}


def test_torn_last_line_resumes_before_it_and_the_next_run_drops_it(tmp_path: Path) -> None:
    with ProgressLog(tmp_path, "fp", {}) as log:
        log.append("a.dbn", ENTRY)
        log.append("b.dbn", ENTRY)
    path = tmp_path / PROGRESS
    path.write_bytes(path.read_bytes()[:-7])  # killed while writing b's line

    loaded = load_progress(tmp_path, "fp")
    assert list(loaded) == ["a.dbn"]
    with ProgressLog(tmp_path, "fp", loaded) as log:
        log.append("b.dbn", ENTRY)

    assert list(load_progress(tmp_path, "fp")) == ["a.dbn", "b.dbn"]
    assert len(path.read_bytes().splitlines()) == 3


def test_a_garbled_header_or_line_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / PROGRESS
    path.write_bytes(b'{"fingerprint": "fp"}\n["not", "a", "group"]\n{"group": "a.dbn"}\n')
    assert load_progress(tmp_path, "fp") == {}
    path.write_bytes(b"\x00\xff garbage\n")
    assert load_progress(tmp_path, "fp") == {}
