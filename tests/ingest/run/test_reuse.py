"""A new version builds only what differs: the days of the current version whose day key is
unchanged are taken (linked), and the result is the bytes a full build writes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config import BarConfig, IngestConfig, RollConfig
from fxstore.ingest import ingest
from fxstore.ingest.run import pipeline
from fxstore.ingest.run.day_builder import GroupTask
from fxstore.ingest.run.manifest import IngestSummary
from tests.conftest import SynthMarket

BASE = IngestConfig(workers=1, bars=BarConfig(target_bars_per_day=20))
PRICED = dataclasses.replace(BASE, roll=RollConfig(adjust="difference"))


def _inputs(market: SynthMarket, first: str, last: str) -> list[Path]:
    """The definition file and the day files from trading day `first` to `last` (YYYYMMDD)."""
    files = sorted(market.folder.glob("*.dbn.zst"))
    return [p for p in files if "definition" in p.name or first <= p.name[10:18] <= last]


def _files(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


def _full_build(config: IngestConfig, inputs: list[Path], store: Path) -> IngestSummary:
    return ingest(dataclasses.replace(config, force=True), inputs, store)


@pytest.mark.parametrize("workers", [1, 2])
def test_extending_the_range_builds_only_the_new_days(
    two_roll_market: SynthMarket, tmp_path: Path, workers: int
) -> None:
    config = dataclasses.replace(PRICED, workers=workers)
    first = ingest(config, _inputs(two_roll_market, "20240226", "20240308"), tmp_path / "a")
    inputs = _inputs(two_roll_market, "20240226", "20240322")

    extended = ingest(config, inputs, tmp_path / "a")

    assert extended.out_dir.name == "v0002"
    assert (extended.days_reused, extended.days_written) == (first.n_days, 10)
    full = _full_build(config, inputs, tmp_path / "b")
    assert _files(extended.out_dir) == _files(full.out_dir)  # manifest.json included
    day = extended.out_dir / "2024-03-01.parquet"
    assert day.stat().st_ino == (first.out_dir / day.name).stat().st_ino  # a link, no copy


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (RollConfig(adjust="difference"), RollConfig(adjust="ratio", direction="forward")),
        (RollConfig(adjust="difference"), RollConfig()),
    ],
)
def test_changing_the_adjustment_builds_no_day(
    two_roll_market: SynthMarket, tmp_path: Path, before: RollConfig, after: RollConfig
) -> None:
    inputs = _inputs(two_roll_market, "20240226", "20240322")
    first = ingest(dataclasses.replace(BASE, roll=before), inputs, tmp_path / "a")

    changed = ingest(dataclasses.replace(BASE, roll=after), inputs, tmp_path / "a")

    assert changed.out_dir == first.out_dir.with_name("v0002")
    assert (changed.days_reused, changed.days_written) == (first.n_days, 0)
    full = _full_build(dataclasses.replace(BASE, roll=after), inputs, tmp_path / "b")
    assert _files(changed.out_dir) == _files(full.out_dir)


def test_pricing_rolls_of_a_series_built_without_adjust_builds_every_day(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    # the rolls' prices are each day's last trades, which an unpriced series never recorded
    inputs = _inputs(two_roll_market, "20240226", "20240315")
    ingest(BASE, inputs, tmp_path)

    priced = ingest(PRICED, inputs, tmp_path)

    assert (priced.days_reused, priced.days_written) == (0, priced.n_days)
    assert _files(priced.out_dir) == _files(_full_build(PRICED, inputs, tmp_path / "b").out_dir)


def test_a_day_whose_front_month_changed_with_earlier_days_is_built_again(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    # Alone, 2024-03-13 starts on ESH4 (the nearest unexpired contract); after the earlier
    # days it is on ESM4, which took the volume lead on 03-11: its file is built again.
    ingest(BASE, _inputs(two_roll_market, "20240313", "20240322"), tmp_path / "a")
    inputs = _inputs(two_roll_market, "20240226", "20240322")

    longer = ingest(BASE, inputs, tmp_path / "a")

    full = _full_build(BASE, inputs, tmp_path / "b")
    assert _files(longer.out_dir) == _files(full.out_dir)
    assert 0 < longer.days_reused < 8
    assert longer.days_written == full.n_days - longer.days_reused


def test_force_reuses_nothing(two_roll_market: SynthMarket, tmp_path: Path) -> None:
    inputs = _inputs(two_roll_market, "20240226", "20240301")
    ingest(BASE, inputs, tmp_path)

    again = _full_build(BASE, inputs, tmp_path)

    assert (again.days_reused, again.days_written) == (0, again.n_days)


def test_cli_ingest_says_how_many_days_were_built_and_reused(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    store = ["--store", str(tmp_path), "--workers", "1", "--target-bars-per-day", "20"]
    short = [str(p) for p in _inputs(two_roll_market, "20240226", "20240301")]
    longer = [str(p) for p in _inputs(two_roll_market, "20240226", "20240308")]
    CliRunner().invoke(cli, ["ingest", *short, *store], catch_exceptions=False)

    result = CliRunner().invoke(cli, ["ingest", *longer, *store], catch_exceptions=False)

    assert result.exit_code == 0
    assert ", 5 built, 5 reused, 0 resumed, in " in result.output


def test_extending_utc_day_files_builds_the_new_days_and_the_one_completed(
    two_roll_market_utc: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Databento's UTC-day files: the file of 03-06 ends with the first hours of trading day
    # 03-07, which the short range holds in part; the longer range completes it. The files
    # of the days taken are not read; the one of 03-06 is, and its 03-06 records skipped.
    first = ingest(PRICED, _inputs(two_roll_market_utc, "20240226", "20240306"), tmp_path / "a")
    inputs = _inputs(two_roll_market_utc, "20240226", "20240315")
    read: list[str] = []
    original = pipeline.tasks_to_build

    def spied(*args: Any) -> list[tuple[str, GroupTask]]:
        tasks = original(*args)
        read.extend(p.name[10:18] for _, task in tasks for p in task.paths)
        return tasks

    monkeypatch.setattr(pipeline, "tasks_to_build", spied)

    extended = ingest(PRICED, inputs, tmp_path / "a")

    assert read and min(read) == "20240306"  # the files of the days taken stay unread
    full = _full_build(PRICED, inputs, tmp_path / "b")
    assert _files(extended.out_dir) == _files(full.out_dir)
    days = [
        d["trading_day"] for d in json.loads((first.out_dir / "manifest.json").read_text())["days"]
    ]
    assert days[-1] == "2024-03-07"
    assert extended.days_reused == len(days) - 1  # all but the partial 03-07
    assert extended.days_written == 7  # 03-07 to 03-15
