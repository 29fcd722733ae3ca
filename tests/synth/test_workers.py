"""``generate_market(workers=N)``: files written in parallel, the same bytes for any count."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from fxstore.config import SynthConfig
from fxstore.errors import InvalidInputError, StoreAccessError
from fxstore.store import list_temps
from fxstore.synth import generate_market
from fxstore.synth.record import RECORD_NAME

pytestmark = pytest.mark.quick

# Thu 2024-03-07 to Tue 03-12: a weekend, and the ES roll date (Mon 03-11) in the range
CONFIG = SynthConfig(
    start=dt.date(2024, 3, 7), end=dt.date(2024, 3, 12), events_per_day=2_000, signal_ic=0.1
)


def _contents(folder: Path) -> dict[str, bytes]:
    """Every file of the market (DBN, definitions, planted-signal side files) by name."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != RECORD_NAME}


@pytest.mark.parametrize("split", ["trading-day", "utc-day"])
def test_generate_market_any_worker_count_writes_the_same_bytes(tmp_path: Path, split: str) -> None:
    config = dataclasses.replace(CONFIG, split=split)
    summaries = {w: generate_market(config, tmp_path / f"w{w}", workers=w) for w in (1, 2, 3)}

    one = _contents(tmp_path / "w1")
    assert len([n for n in one if n.endswith(".planted-signal.npz")]) == 4
    for workers in (2, 3):
        assert _contents(tmp_path / f"w{workers}") == one
        assert summaries[workers].day_volumes == summaries[1].day_volumes
        assert [p.name for p in summaries[workers].files] == [p.name for p in summaries[1].files]


def test_generate_market_utc_day_files_split_what_trading_day_files_hold(tmp_path: Path) -> None:
    by_day = generate_market(CONFIG, tmp_path / "day", workers=2)
    by_utc = generate_market(
        dataclasses.replace(CONFIG, split="utc-day"), tmp_path / "utc", workers=2
    )

    # a UTC-day file's task runs the next day's kernels to midnight: volumes of whole days
    assert by_utc.day_volumes == by_day.day_volumes
    assert by_utc.n_records == by_day.n_records
    # Wed 03-06 (Thu's session opens) to Tue 03-12 (its close), Sat 03-09 without records
    assert [p.name[10:18] for p in by_utc.files] == [
        "20240306", "20240307", "20240308", "20240310", "20240311", "20240312"
    ]  # fmt: skip


def test_generate_market_workers_report_progress_in_date_order(tmp_path: Path) -> None:
    seen: list[dt.date] = []

    summary = generate_market(CONFIG, tmp_path, workers=3, on_progress=seen.append)

    assert seen == list(summary.trading_days) == sorted(seen)
    assert len(seen) == 4


def test_generate_market_workers_resume_a_stopped_run(tmp_path: Path) -> None:
    whole = _contents(generate_market(CONFIG, tmp_path / "whole").files[0].parent)
    folder = tmp_path / "resumed"
    generate_market(CONFIG, folder, workers=2)
    for name in ("glbx-mdp3-20240308.mbp-10.dbn.zst", "glbx-mdp3-20240312.mbp-10.dbn.zst"):
        (folder / name).unlink()  # as if the run had stopped before writing them

    resumed = generate_market(CONFIG, folder, workers=2)

    assert resumed.days_kept == 2
    assert _contents(folder) == whole


@pytest.mark.parametrize("split", ["trading-day", "utc-day"])
def test_generate_market_other_worker_count_leaves_the_files_as_they_are(
    tmp_path: Path, split: str
) -> None:
    config = dataclasses.replace(CONFIG, split=split)
    first = generate_market(config, tmp_path, workers=1)
    stamps = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}

    again = generate_market(config, tmp_path, workers=3)

    assert again.is_up_to_date
    assert again.files == first.files and again.day_volumes == first.day_volumes
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps


def test_generate_market_failed_worker_leaves_no_temporary_file_and_keeps_days_before(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "market"
    blocker = folder / "glbx-mdp3-20240312.mbp-10.dbn.zst"
    (blocker / "keep").mkdir(parents=True)  # a folder the last day's file cannot replace
    stale = folder / ".glbx-mdp3-20240308.mbp-10.dbn.zst.0123abcd.tmp"  # a write cut short
    stale.write_bytes(b"partial")

    with pytest.raises(StoreAccessError, match=r"cannot write .*glbx-mdp3-20240312"):
        generate_market(CONFIG, folder, workers=2)  # the worker's error names its file

    assert list_temps(folder) == []
    assert blocker.is_dir()
    (blocker / "keep").rmdir()
    blocker.rmdir()
    assert generate_market(CONFIG, folder, workers=2).days_kept == 3  # the days before it


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, 1025])
def test_generate_market_bad_worker_count_raises(tmp_path: Path, workers: object) -> None:
    with pytest.raises(InvalidInputError, match="`workers` must be"):
        generate_market(CONFIG, tmp_path, workers=workers)  # type: ignore[arg-type]
    assert not tmp_path.joinpath(RECORD_NAME).exists()
