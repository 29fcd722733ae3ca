"""generate_market end to end: files, metadata, Databento's decoder, sessions, layout, bytes."""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import databento as db
import numpy as np
import pytest

from fxstore.config import SynthConfig
from fxstore.errors import InvalidInputError
from fxstore.ingest.dbn.format import F_LAST, MBP10_DTYPE
from fxstore.market.calendar import is_trading_day, session_bounds_ns, trading_day_of
from fxstore.synth import generate_market
from fxstore.synth.day import PRE_OPEN_NS
from fxstore.synth.writer import DbnFileWriter
from tests.synth.conftest import Market, make_market
from tests.synth.dbn_io import file_day, read_dbn

pytestmark = pytest.mark.quick

SMALL = {"events_per_day": 3_000}


def _utc_date(ts: np.ndarray) -> np.ndarray:
    return ts.astype(np.int64).astype("datetime64[ns]").astype("datetime64[D]")


# --- files and metadata ---------------------------------------------------------------


def test_generate_market_one_file_per_trading_day(roll_market: Market) -> None:
    names = [p.name for p in roll_market.summary.files]
    days = roll_market.summary.trading_days
    assert names == [f"glbx-mdp3-{d:%Y%m%d}.mbp-10.dbn.zst" for d in days]
    assert len(days) == 16 and all(is_trading_day(d) for d in days)
    listed = sorted(p.name for p in roll_market.summary.files[0].parent.iterdir())
    side = [f"glbx-mdp3-{d:%Y%m%d}.planted-signal.npz" for d in days]
    definitions = f"glbx-mdp3-{days[0]:%Y%m%d}-{days[-1]:%Y%m%d}.definition.dbn.zst"
    assert roll_market.summary.definitions.name == definitions
    # the planted signal's side files, the definition file and the record sit beside them
    assert listed == sorted([*names, *side, definitions, "fxstore-synth.json"])


def test_generate_market_metadata_header_is_parent_query(roll_market: Market) -> None:
    for path, meta, recs in roll_market.files:
        assert (meta.version, meta.dataset, meta.schema) == (3, "GLBX.MDP3", "mbp-10")
        assert (meta.stype_in, meta.stype_out, meta.symbols) == (
            "parent",
            "instrument_id",
            ("ES.FUT",),
        )
        assert meta.limit == 0 and not meta.ts_out
        open_ns, close_ns = session_bounds_ns(file_day(path))
        assert (meta.start, meta.end) == (int(recs["ts_recv"][0]), close_ns)
        assert open_ns - PRE_OPEN_NS <= meta.start < open_ns  # the pre-open comes first
        mapped = {int(m.symbol) for m in meta.mappings}
        assert set(np.unique(recs["instrument_id"]).tolist()) <= mapped


def test_generate_market_mappings_cover_record_dates(roll_market: Market) -> None:
    for _, meta, recs in roll_market.files:
        dates = _utc_date(recs["ts_recv"])
        for m in meta.mappings:
            mine = dates[recs["instrument_id"] == int(m.symbol)]
            assert np.all(mine >= np.datetime64(m.start_date)), m
            assert np.all(mine < np.datetime64(m.end_date)), m


def test_generate_market_databento_reads_same_records_and_metadata(roll_market: Market) -> None:
    for path, meta, recs in roll_market.files[:6]:
        store = db.DBNStore.from_file(path)
        assert store.metadata.dataset == "GLBX.MDP3" and str(store.metadata.schema) == "mbp-10"
        assert str(store.metadata.stype_in) == "parent" and store.metadata.symbols == ["ES.FUT"]
        assert set(store.metadata.mappings) == {m.raw_symbol for m in meta.mappings}
        theirs = store.to_ndarray()
        assert len(theirs) == len(recs)
        for name in MBP10_DTYPE.names or ():
            np.testing.assert_array_equal(theirs[name], recs[name], err_msg=name)


def test_generate_market_databento_symbology_maps_every_record(roll_market: Market) -> None:
    for path, meta, _ in roll_market.files[:6]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pandas deprecation noise inside databento
            df = db.DBNStore.from_file(path).to_df(map_symbols=True)
        assert df["symbol"].notna().all(), path.name
        raw = {m.symbol: m.raw_symbol for m in meta.mappings}
        assert (df["instrument_id"].astype(str).map(raw) == df["symbol"]).all()


# --- sessions ---------------------------------------------------------------------------


def test_generate_market_records_inside_their_session_after_a_pre_open(
    roll_market: Market,
) -> None:
    for path, _, recs in roll_market.files:
        day = file_day(path)
        open_ns, close_ns = session_bounds_ns(day)
        for field in ("ts_recv", "ts_event"):
            ts = recs[field].astype(np.int64)
            assert ts.min() >= open_ns - PRE_OPEN_NS and ts.max() < close_ns, (path.name, field)
        assert np.all(trading_day_of(recs["ts_recv"]) == np.datetime64(day))
        pre = recs[recs["ts_recv"].astype(np.int64) < open_ns]
        # one-record book packets of every instrument, no trade, books away from the open's
        assert len(pre) == 12 * len(np.unique(recs["instrument_id"]))
        assert set(pre["action"].tolist()) == {b"A"} and np.all(pre["flags"] & F_LAST)
        first = recs[len(pre) :]
        front = np.bincount(recs["instrument_id"] % 1_000_000).argmax()  # the busiest
        assert (
            pre["bid_px_00"][pre["instrument_id"] == front][-1]
            != (first["bid_px_00"][first["instrument_id"] == front][0])
        )


def test_generate_market_over_holiday_skips_it(tmp_path: Path) -> None:
    # Fri 2023-12-22, the weekend, Christmas (no session), Tue 2023-12-26 (opens Mon 17:00 CT)
    cfg = SynthConfig(start=dt.date(2023, 12, 22), end=dt.date(2023, 12, 26), **SMALL)
    market = make_market(cfg, tmp_path)
    days = [file_day(p) for p, _, _ in market.files]
    assert days == [dt.date(2023, 12, 22), dt.date(2023, 12, 26)]
    tuesday = market.files[1][2]["ts_recv"].astype(np.int64)
    assert tuesday.min() >= session_bounds_ns(dt.date(2023, 12, 26))[0] - PRE_OPEN_NS


def test_generate_market_early_close_is_shorter_and_quieter(tmp_path: Path) -> None:
    # Good Friday 2024: CME equity futures traded until 08:15 CT (payrolls day)
    cfg = SynthConfig(start=dt.date(2024, 3, 28), end=dt.date(2024, 3, 29), **SMALL)
    market = make_market(cfg, tmp_path)
    _, (_, _, friday) = market.files
    open_ns, close_ns = session_bounds_ns(dt.date(2024, 3, 29))

    assert close_ns - open_ns == int(15.25 * 3600e9)
    assert int(friday["ts_recv"].max()) < close_ns
    session = friday[friday["ts_recv"].astype(np.int64) >= open_ns]
    assert 1_000 <= len(session) < 0.6 * 3_000  # the overnight hours' share of a day


def test_generate_market_activity_is_u_shaped(roll_market: Market) -> None:
    def per_hour(recs: np.ndarray, open_ns: int, start_min: int) -> int:
        minute = (recs["ts_recv"].astype(np.int64) - open_ns) // 60_000_000_000
        return int(np.count_nonzero((minute >= start_min) & (minute < start_min + 60)))

    counts = {"night": 0, "open": 0, "midday": 0, "close": 0}
    starts = {"night": 7 * 60, "open": 15 * 60 + 30, "midday": 18 * 60, "close": 21 * 60}
    for path, _, recs in roll_market.files:  # minutes after 17:00 CT of the previous day
        open_ns = session_bounds_ns(file_day(path))[0]
        for name, start in starts.items():
            counts[name] += per_hour(recs, open_ns, start)
    assert counts["open"] > 2 * counts["midday"] > 2 * counts["night"]
    assert counts["close"] > counts["midday"]


def test_generate_market_utc_split_holds_same_records_by_utc_date(
    tmp_path: Path, roll_market: Market
) -> None:
    cfg = SynthConfig(
        start=dt.date(2024, 3, 1),
        end=dt.date(2024, 3, 22),
        split="utc-day",
        events_per_day=roll_market.config.events_per_day,
    )
    market = make_market(cfg, tmp_path)
    for path, meta, recs in market.files:
        assert np.all(_utc_date(recs["ts_recv"]) == np.datetime64(file_day(path))), path.name
        assert recs["flags"][-1] & 0x80
        assert {m.start_date for m in meta.mappings} == {file_day(path)}
    assert file_day(market.files[0][0]) == dt.date(2024, 2, 29)  # Friday's session opens Thu
    np.testing.assert_array_equal(market.records, roll_market.records)


# --- determinism and atomic writes -------------------------------------------------------


def _bytes(paths: tuple[Path, ...]) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in paths}


def test_generate_market_same_seed_same_bytes(tmp_path: Path) -> None:
    cfg = SynthConfig(start=dt.date(2024, 6, 3), end=dt.date(2024, 6, 4), seed=3, **SMALL)
    first = _bytes(generate_market(cfg, tmp_path / "a").files)
    second = _bytes(generate_market(cfg, tmp_path / "b").files)
    assert first == second


def test_generate_market_one_day_alone_same_bytes_as_in_range(tmp_path: Path) -> None:
    long = SynthConfig(start=dt.date(2024, 6, 3), end=dt.date(2024, 6, 5), seed=3, **SMALL)
    alone = SynthConfig(start=dt.date(2024, 6, 4), end=dt.date(2024, 6, 4), seed=3, **SMALL)
    in_range = _bytes(generate_market(long, tmp_path / "long").files)
    single = _bytes(generate_market(alone, tmp_path / "alone").files)
    assert list(single) == ["glbx-mdp3-20240604.mbp-10.dbn.zst"]
    assert (
        single["glbx-mdp3-20240604.mbp-10.dbn.zst"] == in_range["glbx-mdp3-20240604.mbp-10.dbn.zst"]
    )


def test_generate_market_chunk_size_does_not_change_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = SynthConfig(start=dt.date(2024, 6, 4), end=dt.date(2024, 6, 4), seed=3, **SMALL)
    default = _bytes(generate_market(cfg, tmp_path / "a").files)
    monkeypatch.setattr("fxstore.synth.market._CHUNK_RECORDS", 97)
    assert _bytes(generate_market(cfg, tmp_path / "b").files) == default


def test_generate_market_other_seed_other_records(tmp_path: Path) -> None:
    day = dt.date(2024, 6, 4)
    a = generate_market(SynthConfig(start=day, end=day, seed=3, **SMALL), tmp_path / "a")
    b = generate_market(SynthConfig(start=day, end=day, seed=4, **SMALL), tmp_path / "b")
    ra, rb = read_dbn(a.files[0])[1], read_dbn(b.files[0])[1]
    assert not np.array_equal(ra["ts_recv"], rb["ts_recv"])
    assert not np.array_equal(ra["bid_px_00"], rb["bid_px_00"])


def test_generate_market_killed_mid_file_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"n": 0}
    real_write = DbnFileWriter.write

    def failing_write(self: DbnFileWriter, records: np.ndarray) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # as if the run were killed while writing
        real_write(self, records)

    monkeypatch.setattr(DbnFileWriter, "write", failing_write)
    monkeypatch.setattr("fxstore.synth.market._CHUNK_RECORDS", 1_000)
    cfg = SynthConfig(start=dt.date(2024, 6, 4), end=dt.date(2024, 6, 4), **SMALL)
    with pytest.raises(KeyboardInterrupt):
        generate_market(cfg, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_generate_market_reports_progress_and_summary(tmp_path: Path) -> None:
    seen: list[dt.date] = []
    cfg = SynthConfig(start=dt.date(2024, 6, 3), end=dt.date(2024, 6, 4), **SMALL)
    summary = generate_market(cfg, tmp_path, on_progress=seen.append)
    assert seen == [dt.date(2024, 6, 3), dt.date(2024, 6, 4)] == list(summary.trading_days)
    n_pre_open = sum(
        int(np.count_nonzero(read_dbn(p)[1]["ts_recv"] < session_bounds_ns(d)[0]))
        for p, d in zip(summary.files, summary.trading_days, strict=True)
    )
    assert summary.n_records == sum(len(read_dbn(p)[1]) for p in summary.files)
    assert summary.n_records - n_pre_open == 2 * 3_000
    assert summary.elapsed_s > 0


def test_generate_market_no_trading_day_raises(tmp_path: Path) -> None:
    cfg = SynthConfig(start=dt.date(2024, 6, 8), end=dt.date(2024, 6, 9), **SMALL)  # a weekend
    with pytest.raises(InvalidInputError, match="No CME trading day"):
        generate_market(cfg, tmp_path)


def test_generate_market_definitions_give_every_listed_instrument_its_facts(
    roll_market: Market,
) -> None:
    from fxstore.market.master import read_definitions

    facts = {f.raw_symbol: f for f in read_definitions([roll_market.summary.definitions])}
    listed = {v.raw_symbol for v in roll_market.summary.day_volumes}

    assert listed <= set(facts)
    esh4 = facts["ESH4"]
    assert (esh4.multiplier, esh4.tick_size, esh4.instrument_class) == (50.0, 0.25, "F")
    assert esh4.expiration == dt.date(2024, 3, 15)
    spread = next(f for s, f in facts.items() if "-" in s)
    assert (spread.multiplier, spread.instrument_class) == (None, "S")  # as Databento's spreads


def test_generate_market_zstd_frames_carry_a_checksum(roll_market: Market) -> None:
    """As Databento's encoder writes them: a garbled block is caught by the frame checksum."""
    for path in [*roll_market.summary.files, roll_market.summary.definitions]:
        frame_descriptor = path.read_bytes()[4]
        assert frame_descriptor & 0b100, path.name
