from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

import fxstore
from fxstore.config import BarConfig, IngestConfig, InstrumentSelection
from fxstore.errors import SchemaError
from fxstore.ingest import DbnFile, DbnSource, open_dbn
from fxstore.ingest.run import pipeline
from fxstore.ingest.run import resplit as _resplit
from fxstore.ingest.run.day_builder import Chooser, DayResult, GroupTask, build_group
from fxstore.ingest.run.day_files import PARTS_DIR
from fxstore.ingest.run.day_writer import DayWriter, Json
from fxstore.ingest.run.manifest import IngestSummary
from fxstore.ingest.run.pipeline import ingest, plan_groups
from fxstore.ingest.run.plan import plan_ingest
from fxstore.ingest.run.scan import scan_dbn
from fxstore.market.calendar import session_bounds_ns, sessions
from fxstore.market.contracts import parse_outright
from fxstore.store import list_bar_versions
from tests.conftest import SynthMarket

PEER = Path(__file__).parents[2] / "data" / "peer-dbn"
FRONT = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20))


def _digests(out_dir: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out_dir.glob("*.parquet")}


@pytest.fixture(scope="module")
def front_run(
    two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory
) -> IngestSummary:
    return ingest(FRONT, [two_roll_market.folder], tmp_path_factory.mktemp("store"))


def test_ingest_front_month_writes_one_file_per_trading_day(
    front_run: IngestSummary, two_roll_market: SynthMarket
) -> None:
    files = sorted(p.stem for p in front_run.out_dir.glob("*.parquet"))

    assert files == [d.isoformat() for d in two_roll_market.summary.trading_days]
    assert front_run.n_days == len(files)
    assert front_run.out_dir.parts[-4:-2] == ("ES.FUT", "mbp10_front_month")
    assert front_run.out_dir.name == "v0001"  # the first version of the series


def test_ingest_front_month_bars_follow_roll_schedule(
    front_run: IngestSummary, two_roll_market: SynthMarket
) -> None:
    schedule = scan_dbn([two_roll_market.folder], symbol="ES.FUT").schedule
    manifest = json.loads((front_run.out_dir / "manifest.json").read_text())

    assert [e["contract"] for e in manifest["roll_schedule"]] == [e.contract for e in schedule]
    for entry in schedule:
        bars = pl.read_parquet(front_run.out_dir / f"{entry.trading_day}.parquet")
        assert bars["contract"].unique().to_list() == [entry.contract]
        assert bars["instrument_id"].unique().to_list() == [entry.instrument_id]


def test_ingest_bars_never_span_a_session(front_run: IngestSummary) -> None:
    for path in front_run.out_dir.glob("*.parquet"):
        bars = pl.read_parquet(path)
        open_ns, close_ns = session_bounds_ns(bars["trading_day"][0])
        assert bars["ts_open"].min() >= open_ns
        assert bars["ts_close"].max() < close_ns
        assert (bars["ts_open"][1:] >= bars["ts_close"][:-1]).all()


def test_ingest_out_of_session_records_are_counted_and_in_no_bar(
    front_run: IngestSummary, two_roll_market: SynthMarket
) -> None:
    manifest = json.loads((front_run.out_dir / "manifest.json").read_text())
    table = sessions(manifest["calendar"]["name"])

    assert manifest["calendar"]["name"] == "CME Globex Equity"
    assert manifest["calendar"]["early_closes_session_hours"] == {
        "2024-03-29": 15.25,  # Good Friday 2024: 08:15 CT
        "2024-05-27": 19.0,  # Memorial Day: 12:00 CT
        "2024-06-19": 19.0,  # Juneteenth
    }
    for day in manifest["days"]:
        assert table.is_trading_day(dt.date.fromisoformat(day["trading_day"]))
        assert day["n_out_of_session"] == 12  # the kept contract's pre-open packets (synth)
        assert "volume_out_of_session" not in day  # no trade outside a session
    for entry in manifest["roll_schedule"]:
        assert table.is_trading_day(dt.date.fromisoformat(entry["trading_day"]))


def test_scan_lists_no_holiday_or_weekend_as_a_trading_day(two_roll_market: SynthMarket) -> None:
    result = scan_dbn([two_roll_market.folder], symbol="ES.FUT")

    days = {row.trading_day for row in result.activity}
    assert days == set(two_roll_market.summary.trading_days)
    assert all(d.weekday() < 5 for d in days) and dt.date(2024, 3, 29) in days


def test_ingest_manifest_records_inputs_config_and_days(
    front_run: IngestSummary, two_roll_market: SynthMarket
) -> None:
    manifest = json.loads((front_run.out_dir / "manifest.json").read_text())

    assert {i["name"] for i in manifest["inputs"]} == {
        p.name for p in two_roll_market.summary.files
    }
    assert all(len(i["sha256"]) == 64 for i in manifest["inputs"])
    assert manifest["config"] == FRONT.to_json()
    day = manifest["days"][0]
    path = front_run.out_dir / day["file"]
    assert day["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert day["n_bars"] == pl.read_parquet(path).height
    assert sum(d["n_bars"] for d in manifest["days"]) == front_run.n_bars


@pytest.mark.parametrize(
    "variant", ["workers=2", "chunk_records=777", "one file", "utc-day files", "reversed files"]
)
def test_ingest_output_is_byte_identical_for_any_split_or_worker_count(
    variant: str,
    front_run: IngestSummary,
    two_roll_market: SynthMarket,
    two_roll_market_utc: SynthMarket,
    two_roll_single_file: Path,
    tmp_path: Path,
) -> None:
    config, paths = FRONT, [two_roll_market.folder]
    if variant == "workers=2":
        config = dataclasses.replace(FRONT, workers=2)
    elif variant == "chunk_records=777":
        config = dataclasses.replace(FRONT, chunk_records=777)
    elif variant == "one file":
        paths = [two_roll_single_file]
    elif variant == "utc-day files":
        paths, config = [two_roll_market_utc.folder], dataclasses.replace(FRONT, workers=2)
    else:
        paths = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"), reverse=True)

    summary = ingest(config, paths, tmp_path)

    assert _digests(summary.out_dir) == _digests(front_run.out_dir)


def test_ingest_output_is_byte_identical_when_the_pool_gets_the_days_backwards(
    front_run: IngestSummary,
    two_roll_market: SynthMarket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[list[int]] = []

    def backwards(sizes: list[int], workers: int) -> list[int]:
        sent.append(list(reversed(range(len(sizes)))))  # the first day goes out last
        return sent[-1]

    monkeypatch.setattr(pipeline, "dispatch_order", backwards)
    summary = ingest(dataclasses.replace(FRONT, workers=2), [two_roll_market.folder], tmp_path)

    assert sent and len(sent[0]) > 4
    assert _digests(summary.out_dir) == _digests(front_run.out_dir)
    assert _manifest_days(summary.out_dir) == _manifest_days(front_run.out_dir)


def _group_task(files: list[DbnFile]) -> GroupTask:
    return GroupTask(
        paths=tuple(f.path for f in files),
        days=None,
        plan=plan_ingest(FRONT),
    )


def _manifest_days(out_dir: Path) -> list[object]:
    return list(json.loads((out_dir / "manifest.json").read_text())["days"])


def _pool_in_this_process(choose: Chooser | None) -> object:
    """`pipeline._run_groups` as the pool runs groups (worker mode: day files written into
    the parts folder, tables dropped), but here, with `choose` as the workers' candidates
    (None: the workers' own)."""

    def run_groups(
        source: DbnSource,
        tasks: list[tuple[str, GroupTask]],
        _workers: int,
        _choose: object,
        _on_day: object,
        writer: DayWriter,
        _split: object,
        _ray_pool: object = None,
        _objects: object = None,
    ) -> object:
        for key, task in tasks:
            remote = dataclasses.replace(
                task, parts_dir=writer.out_dir / PARTS_DIR, metadata=writer.metadata
            )
            group = pipeline._group_source(source, task)
            yield key, task, build_group(remote, choose=choose, source=group)

    return run_groups


def _ingest_counting_rebuilds(
    choose: Chooser | None,
    market: SynthMarket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[IngestSummary, list[object]]:
    """A two-worker ingest of `market` whose groups run as :func:`_pool_in_this_process`
    runs them; with the days the parent built again."""
    rebuilt: list[object] = []
    real_rebuild = pipeline._rebuild_day

    def counting_rebuild(*args: object) -> DayResult:
        rebuilt.append(args[2])
        return real_rebuild(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "_run_groups", _pool_in_this_process(choose))
    monkeypatch.setattr(pipeline, "_rebuild_day", counting_rebuild)
    summary = ingest(dataclasses.replace(FRONT, workers=2), [market.folder], tmp_path)
    return summary, rebuilt


@pytest.mark.parametrize("candidates", ["none", "every outright"])
def test_ingest_in_parallel_builds_again_a_day_whose_front_month_no_worker_built(
    candidates: str,
    front_run: IngestSummary,
    two_roll_market: SynthMarket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def every_outright(day: object, listed: dict[int, str]) -> set[int]:
        return {i for i, s in listed.items() if parse_outright(s, "ES", day) is not None}  # type: ignore[arg-type]

    choose = every_outright if candidates == "every outright" else (lambda _d, _l: set())

    summary, rebuilt = _ingest_counting_rebuilds(choose, two_roll_market, tmp_path, monkeypatch)

    assert _digests(summary.out_dir) == _digests(front_run.out_dir)
    assert _manifest_days(summary.out_dir) == _manifest_days(front_run.out_dir)
    assert len(rebuilt) == (0 if candidates == "every outright" else front_run.n_days)
    assert not (summary.out_dir / PARTS_DIR).exists()


def test_front_month_workers_drop_a_candidate_that_trades_little(
    two_roll_market: SynthMarket, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fxstore.ingest.run import day_builder as _day_builder

    monkeypatch.setattr(_day_builder, "PRUNE_MIN_VOLUME", 100)  # a small synthetic market
    quiet, roll_eve = dt.date(2024, 2, 27), dt.date(2024, 3, 11)  # ESM4 ~2% / ~57% of volume
    names = {f"{d:%Y%m%d}" for d in (quiet, roll_eve)}
    files = [
        p for p in sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst")) if p.name[10:18] in names
    ]
    source = open_dbn(files)

    days = {d.day: d for d in build_group(_group_task(list(source.files)), source=source).days}

    symbols = {day: {d.listed[i] for i in d.built} for day, d in days.items()}
    assert symbols == {quiet: {"ESH4"}, roll_eve: {"ESH4", "ESM4"}}


def test_ingest_stays_byte_identical_when_workers_drop_the_front_month(
    front_run: IngestSummary,
    two_roll_market: SynthMarket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fxstore.ingest.run import day_builder as _day_builder

    monkeypatch.setattr(_day_builder, "PRUNE_MIN_VOLUME", 100)  # a small synthetic market
    monkeypatch.setattr(_day_builder, "PRUNE_SHARE", 0.99)  # drops the front month often

    summary, rebuilt = _ingest_counting_rebuilds(None, two_roll_market, tmp_path, monkeypatch)

    assert _digests(summary.out_dir) == _digests(front_run.out_dir)
    assert _manifest_days(summary.out_dir) == _manifest_days(front_run.out_dir)
    assert len(rebuilt) > 10  # the parent built those days again


@pytest.mark.parametrize("mode", ["all", "id"])
def test_ingest_all_and_id_modes_are_byte_identical_with_workers(
    mode: str, front_run: IngestSummary, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    if mode == "id":
        mode = f"id={front_run.schedule[-1].instrument_id}"
    config = dataclasses.replace(FRONT, instrument_mode=InstrumentSelection.parse(mode))

    one = ingest(config, [two_roll_market.folder], tmp_path / "one")
    two = ingest(dataclasses.replace(config, workers=2), [two_roll_market.folder], tmp_path / "two")

    assert one.n_bars > 0 and _digests(two.out_dir) == _digests(one.out_dir)
    assert _manifest_days(two.out_dir) == _manifest_days(one.out_dir)
    assert not (two.out_dir / PARTS_DIR).exists()


@pytest.mark.parametrize("mode", ["front-month", "all"])
def test_ingest_splits_utc_day_files_by_trading_day_and_builds_them_in_parallel(
    mode: str,
    front_run: IngestSummary,
    two_roll_market: SynthMarket,
    two_roll_market_utc: SynthMarket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline, "_SPLIT_WORKERS_PER_GROUP", 0)  # split however many groups
    built: list[object] = []
    real = pipeline.build_split_groups

    def spy(*args: object) -> Iterator[object]:
        for result in real(*args):  # type: ignore[arg-type]
            built.append(result)
            yield result

    monkeypatch.setattr(pipeline, "build_split_groups", spy)
    config = dataclasses.replace(FRONT, instrument_mode=InstrumentSelection.parse(mode), workers=3)
    reference = (
        front_run
        if mode == "front-month"
        else ingest(dataclasses.replace(config, workers=1), [two_roll_market.folder], tmp_path)
    )

    summary = ingest(config, [two_roll_market_utc.folder], tmp_path / "utc")

    n_groups = len(plan_groups(open_dbn([two_roll_market_utc.folder]).files))
    assert len(built) == n_groups > 1 and None not in built  # split, not one core
    assert _digests(summary.out_dir) == _digests(reference.out_dir)
    utc_days = _manifest_days(summary.out_dir)
    assert [d for d in utc_days if d["n_bars"]] == [  # type: ignore[index]
        d
        for d in _manifest_days(reference.out_dir)
        if d["n_bars"]  # type: ignore[index]
    ]
    assert summary.n_records == reference.n_records
    assert not (summary.out_dir / ".split").exists()
    assert not (summary.out_dir / PARTS_DIR).exists()


def test_ingest_splits_only_when_workers_far_outnumber_groups(
    two_roll_market_utc: SynthMarket,
) -> None:
    source = open_dbn([two_roll_market_utc.folder])
    groups = plan_groups(source.files)
    tasks = [(str(i), _group_task(g)) for i, g in enumerate(groups)]

    assert pipeline._split_keys(source, tasks[:1], 4 * 1 + 1) == {"0"}
    assert pipeline._split_keys(source, tasks[:1], 4) == set()
    assert pipeline._split_keys(source, tasks[:1], 1) == set()
    assert pipeline._split_keys(source, tasks, 16) == set()


def test_ingest_builds_split_groups_on_one_core_when_the_files_overlap(
    front_run: IngestSummary,
    two_roll_market_utc: SynthMarket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline, "_SPLIT_WORKERS_PER_GROUP", 0)
    monkeypatch.setattr(_resplit, "_consistent", lambda _splits: False)

    summary = ingest(dataclasses.replace(FRONT, workers=2), [two_roll_market_utc.folder], tmp_path)

    assert _digests(summary.out_dir) == _digests(front_run.out_dir)
    assert not (summary.out_dir / _resplit.SPLIT_DIR).exists()


def test_ingest_of_split_files_killed_mid_run_leaves_no_scratch_and_resumes(
    front_run: IngestSummary,
    two_roll_market_utc: SynthMarket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline, "_SPLIT_WORKERS_PER_GROUP", 0)
    config = dataclasses.replace(FRONT, workers=2)
    calls = {"n": 0}
    real_write = DayWriter.write

    def dying_write(self: DayWriter, day: DayResult) -> Json:
        calls["n"] += 1
        if calls["n"] == 20:
            raise KeyboardInterrupt
        return real_write(self, day)

    monkeypatch.setattr(DayWriter, "write", dying_write)
    with pytest.raises(KeyboardInterrupt):
        ingest(config, [two_roll_market_utc.folder], tmp_path)
    out_dir = tmp_path / front_run.out_dir.relative_to(front_run.out_dir.parents[4])
    assert not (out_dir / _resplit.SPLIT_DIR).exists() and not (out_dir / PARTS_DIR).exists()
    monkeypatch.setattr(DayWriter, "write", real_write)

    resumed = ingest(config, [two_roll_market_utc.folder], tmp_path)

    assert 0 < resumed.days_skipped < 20
    assert _digests(resumed.out_dir) == _digests(front_run.out_dir)


def test_split_files_are_consistent_only_in_time_order_and_without_symbol_mappings() -> None:
    def split(first: int, last: int, mappings: int = 0) -> _resplit.SplitResult:
        return _resplit.SplitResult(Path("f"), {}, ("f", 1, ""), 1, 0, mappings, first, last, 0)

    assert _resplit._consistent([split(1, 5), split(5, 9)])
    assert not _resplit._consistent([split(1, 6), split(5, 9)])
    assert not _resplit._consistent([split(1, 5, mappings=1)])


def test_can_split_needs_files_that_end_before_the_next_begins(
    two_roll_market_utc: SynthMarket,
) -> None:
    group = plan_groups(open_dbn([two_roll_market_utc.folder]).files)[0]

    assert len(group) > 1 and _resplit.can_split(group)
    assert not _resplit.can_split(group[:1])
    assert not _resplit.can_split(group[::-1])


def test_ingest_rerun_unchanged_is_up_to_date_and_force_rebuilds(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    first = ingest(FRONT, [two_roll_market.folder], tmp_path)

    again = ingest(FRONT, [two_roll_market.folder], tmp_path)
    forced = ingest(dataclasses.replace(FRONT, force=True), [two_roll_market.folder], tmp_path)

    assert again.up_to_date and again.days_written == 0
    assert again.out_dir == first.out_dir  # no new version
    assert not forced.up_to_date and forced.days_written == first.days_written
    assert [first.out_dir.name, forced.out_dir.name] == ["v0001", "v0002"]


def test_ingest_killed_rebuild_with_changed_inputs_leaves_the_previous_version_whole(
    two_roll_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))
    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=5), workers=1)
    first = ingest(config, files[:4], tmp_path)
    files_before = _digests(first.out_dir)
    manifest_before = (first.out_dir / "manifest.json").read_bytes()
    calls = {"n": 0}
    real_write = DayWriter.write

    def dying_write(self: DayWriter, day: DayResult) -> Json:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # killed in the middle of the new build
        return real_write(self, day)

    monkeypatch.setattr(DayWriter, "write", dying_write)
    with pytest.raises(KeyboardInterrupt):
        # other inputs: days 2-4 are taken from version 1, days 5 and 6 built
        ingest(config, files[1:6], tmp_path)
    monkeypatch.setattr(DayWriter, "write", real_write)

    series = first.out_dir.parent
    assert [v.version for v in list_bar_versions(series)] == [1]
    assert _digests(first.out_dir) == files_before
    assert (first.out_dir / "manifest.json").read_bytes() == manifest_before
    bars = fxstore.open(tmp_path).read_bars("ES.FUT")  # every day file checked by its SHA-256
    assert bars.num_rows == first.n_bars
    assert ingest(config, files[:4], tmp_path).up_to_date  # the old inputs: still up to date

    resumed = ingest(config, files[1:6], tmp_path)
    clean = ingest(config, files[1:6], tmp_path / "clean")

    # days 2-5 were written before the kill (the days taken with the first built after them)
    assert resumed.out_dir.name == "v0002" and resumed.days_skipped == 4
    assert (resumed.days_reused, resumed.days_written) == (0, 1)
    assert _digests(resumed.out_dir) == _digests(clean.out_dir)
    assert [v.version for v in list_bar_versions(series)] == [1, 2]
    assert _digests(first.out_dir) == files_before  # version 1 is kept, readable


def test_ingest_changed_config_writes_under_new_bar_key(
    front_run: IngestSummary, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    config = dataclasses.replace(FRONT, bars=BarConfig("tick", threshold=50))

    summary = ingest(config, [two_roll_market.folder], tmp_path)

    assert summary.out_dir.parent.name != front_run.out_dir.parent.name
    assert summary.out_dir.parent.name.startswith("tick-t50")


@pytest.mark.parametrize("workers", [1, 2])
def test_ingest_killed_run_leaves_no_partial_file_and_resumes(
    workers: int,
    two_roll_market: SynthMarket,
    front_run: IngestSummary,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = {"n": 0}
    real_write = DayWriter.write

    def dying_write(self: DayWriter, day: DayResult) -> Json:
        calls["n"] += 1
        if calls["n"] == 30:
            raise KeyboardInterrupt  # killed mid-run
        return real_write(self, day)

    config = dataclasses.replace(FRONT, workers=workers)
    monkeypatch.setattr(DayWriter, "write", dying_write)
    with pytest.raises(KeyboardInterrupt):
        ingest(config, [two_roll_market.folder], tmp_path)
    out_dir = tmp_path / front_run.out_dir.relative_to(front_run.out_dir.parents[4])
    assert not list(out_dir.glob("*.tmp")) and not list(out_dir.glob(".*.tmp"))
    assert not (out_dir / "manifest.json").exists() and not (out_dir / PARTS_DIR).exists()
    assert not (out_dir.parent / "manifest.json").exists()  # nothing committed
    monkeypatch.setattr(DayWriter, "write", real_write)

    resumed = ingest(config, [two_roll_market.folder], tmp_path)

    assert resumed.days_skipped == 29
    assert _digests(resumed.out_dir) == _digests(front_run.out_dir)


@pytest.mark.parametrize("mode", ["all", "id=5482", "front-month"])
@pytest.mark.parametrize(
    ("name", "n_records"),
    [
        ("test_data.mbp-10.v1.dbn.zst", 2),
        ("test_data.mbp-10.dbn", 2),
        ("GLBX.MDP3.test_data.mbp-10.dbn.zst", 4),
    ],
)
def test_ingest_peer_files_go_through_without_error(
    mode: str, name: str, n_records: int, tmp_path: Path
) -> None:
    config = IngestConfig(symbol="ES.FUT", instrument_mode=InstrumentSelection.parse(mode))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = ingest(config, [PEER / name], tmp_path)

    assert summary.n_records == n_records
    # records that end hours before the close, as their request's record limit ended them:
    # a short file, not a cut one
    assert not [w for w in caught if "end well before" in str(w.message)]
    days = json.loads((summary.out_dir / "manifest.json").read_text())["days"]
    assert not [d for d in days if "records_end_before_close_s" in d]


def test_ingest_trades_file_fails_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="trades"):
        ingest(FRONT, [PEER / "GLBX.MDP3.test_data.trades.dbn.zst"], tmp_path)

    assert list(tmp_path.iterdir()) == []


def test_ingest_all_mode_keeps_every_instrument(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    config = dataclasses.replace(FRONT, instrument_mode=InstrumentSelection("all"))

    summary = ingest(config, [two_roll_market.folder], tmp_path)

    bars = pl.read_parquet(summary.out_dir / "2024-03-11.parquet")
    assert set(bars["contract"].unique()) == {"ESH4", "ESM4", "ESU4", "ESH4-ESM4"}
    assert summary.n_kept == summary.n_records
