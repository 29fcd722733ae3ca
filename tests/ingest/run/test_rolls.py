"""Roll rules and adjusted prices end to end: synthetic ES DBN → ingest → manifest, bars,
`fxstore rolls`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from pathlib import Path

import databento_dbn
import numpy as np
import pytest
from click.testing import CliRunner

import fxstore
from fxstore.cli import cli
from fxstore.config import FeatureConfig, IngestConfig, RollConfig, SynthConfig
from fxstore.errors import InvalidInputError
from fxstore.features.definitions import FeatureDef, FeatureSet, Settings
from fxstore.features.precompute import precompute
from fxstore.ingest import ingest
from fxstore.market.calendar import sessions
from fxstore.synth.contracts import outright_id
from tests.conftest import SynthMarket

BASE = IngestConfig(workers=1)
CALENDAR = RollConfig(rule="calendar", offset=3, adjust="difference")


def _files(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def _manifest(folder: Path) -> dict[str, object]:
    return json.loads((folder / "manifest.json").read_text())


@pytest.fixture(scope="module")
def built(two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the default series and a calendar-rolled, difference-adjusted one."""
    store = tmp_path_factory.mktemp("rolls_store")
    ingest(BASE, [two_roll_market.folder], store)
    ingest(dataclasses.replace(BASE, roll=CALENDAR), [two_roll_market.folder], store)
    return store


def _series(store: Path, instrument_key: str) -> Path:
    (folder,) = (store / "bars" / "ES.FUT" / instrument_key).glob("*/v0001")
    return folder


def test_adjust_none_output_is_byte_identical_to_the_default(
    built: Path, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    explicit = RollConfig(rule="volume", adjust="none", direction="backward")

    summary = ingest(dataclasses.replace(BASE, roll=explicit), [two_roll_market.folder], tmp_path)

    default = _series(built, "mbp10_front_month")
    assert summary.out_dir.relative_to(tmp_path) == default.relative_to(built)
    assert _files(summary.out_dir) == _files(default)
    manifest = _manifest(default)
    assert "transitions" not in manifest and "roll" not in manifest
    assert "roll" not in manifest["config"]  # type: ignore[operator]
    assert not any("last_trade_px" in d for d in manifest["days"])  # type: ignore[attr-defined]


def test_calendar_rule_rolls_offset_days_before_expiry_with_reasons(built: Path) -> None:
    manifest = _manifest(_series(built, "mbp10_front_month-cal3"))
    schedule = manifest["roll_schedule"]
    table = sessions()

    rolls = [(e["trading_day"], e["contract"]) for e in schedule if e["reason"] == "calendar"]  # type: ignore[attr-defined,index]
    # ESH4 and ESM4 last trade on 2024-03-15 and 2024-06-21: three sessions earlier.
    assert rolls == [
        (table.day_before(dt.date(2024, 3, 15), 3).isoformat(), "ESM4"),
        (table.day_before(dt.date(2024, 6, 21), 3).isoformat(), "ESU4"),
    ]
    assert {e["reason"] for e in schedule} == {"first-day", "held", "calendar"}  # type: ignore[attr-defined,index]
    assert all("roll_day" in e and "anchor" in e for e in schedule)  # type: ignore[attr-defined]
    assert manifest["config"]["roll"] == CALENDAR.to_json()  # type: ignore[index]


def test_transitions_are_priced_from_the_session_before_the_switch(built: Path) -> None:
    manifest = _manifest(_series(built, "mbp10_front_month-cal3"))
    days = {d["trading_day"]: d for d in manifest["days"]}  # type: ignore[attr-defined]

    for t in manifest["transitions"]:  # type: ignore[attr-defined]
        prior = days[t["price_day"]]["last_trade_px"]
        assert t["price_day"] < t["trading_day"]
        assert (t["from_px"], t["to_px"]) == (
            prior[str(t["from_instrument_id"])],
            prior[str(t["to_instrument_id"])],
        )
        assert t["gap_add"] == pytest.approx(t["to_px"] - t["from_px"])


def test_difference_adjusted_bars_close_the_gap_at_each_roll(built: Path) -> None:
    manifest = _manifest(_series(built, "mbp10_front_month-cal3"))
    bars = fxstore.open(built).read_bars("ES.FUT", instrument_key="mbp10_front_month-cal3")
    contract = np.array(bars["contract"].to_pylist())
    shift = bars["adj_close"].to_numpy() - bars["close"].to_numpy()
    order = list(dict.fromkeys(contract))

    shifts = [np.unique(np.round(shift[contract == c], 9)) for c in order]
    assert all(len(s) == 1 for s in shifts)  # one shift per contract
    assert shifts[-1][0] == 0.0  # backward: the latest contract keeps its prices
    for k, t in enumerate(manifest["transitions"]):  # type: ignore[arg-type]
        # the old contract's price at the switch, adjusted, is the new one's: gap 0
        assert t["from_px"] + shifts[k][0] == pytest.approx(t["to_px"] + shifts[k + 1][0])


def test_ratio_forward_keeps_the_first_contract_and_raw_returns(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    roll = RollConfig(adjust="ratio", direction="forward")

    ingest(dataclasses.replace(BASE, roll=roll), [two_roll_market.folder], tmp_path)

    bars = fxstore.open(tmp_path).read_bars("ES.FUT")
    close, adj = bars["close"].to_numpy(), bars["adj_close"].to_numpy()
    contract = np.array(bars["contract"].to_pylist())
    same = contract[1:] == contract[:-1]
    first = contract == contract[0]
    np.testing.assert_array_equal(adj[first], close[first])
    np.testing.assert_allclose((adj[1:] / adj[:-1])[same], (close[1:] / close[:-1])[same])
    assert not np.allclose(adj[~first], close[~first])


def test_a_new_roll_at_the_end_re_adjusts_history_from_the_transitions_only(
    built: Path, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    # The same market up to 2024-05-31: the June roll (2024-06-18) is not in it yet.
    folder = two_roll_market.folder
    dbn = sorted(folder.glob("*.dbn.zst"))
    before = [p for p in dbn if "definition" in p.name or p.name[10:18] <= "20240531"]
    ingest(dataclasses.replace(BASE, roll=CALENDAR), before, tmp_path)

    short, full = (_series(s, "mbp10_front_month-cal3") for s in (tmp_path, built))
    old, new = (
        fxstore.open(s).read_bars("ES.FUT", instrument_key="mbp10_front_month-cal3")
        for s in (tmp_path, built)
    )
    first, added = _manifest(full)["transitions"]  # type: ignore[misc]

    # the days both hold are the same bytes, and the first roll the same row
    shared = {k: v for k, v in _files(full).items() if k in _files(short) and k[0].isdigit()}
    assert shared and shared == {k: v for k, v in _files(short).items() if k[0].isdigit()}
    assert _manifest(short)["transitions"] == [first]
    # backward adjustment moves that history by the new roll's gap, and by nothing else
    n = old.num_rows
    np.testing.assert_array_equal(new["close"].to_numpy()[:n], old["close"].to_numpy())
    shift = new["adj_close"].to_numpy()[:n] - old["adj_close"].to_numpy()
    np.testing.assert_allclose(shift, added["gap_add"], rtol=0, atol=1e-9)


def test_workers_give_the_same_transitions_and_files(
    built: Path, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    config = dataclasses.replace(BASE, roll=CALENDAR, workers=2)

    summary = ingest(config, [two_roll_market.folder], tmp_path)

    one = _series(built, "mbp10_front_month-cal3")
    days = {k: v for k, v in _files(one).items() if k != "manifest.json"}
    assert {k: v for k, v in _files(summary.out_dir).items() if k != "manifest.json"} == days
    assert _manifest(summary.out_dir)["transitions"] == _manifest(one)["transitions"]


def _statistics_file(path: Path, rows: list[tuple[int, int, int]]) -> Path:
    meta = databento_dbn.Metadata(
        dataset="GLBX.MDP3",
        schema=databento_dbn.Schema.STATISTICS,
        start=rows[0][0],
        stype_in=databento_dbn.SType.PARENT,
        stype_out=databento_dbn.SType.INSTRUMENT_ID,
        end=rows[-1][0] + 1,
        symbols=["ES.FUT"],
        partial=[],
        not_found=[],
        mappings=[],
        version=3,
    )
    blob = meta.encode()
    for ts, instrument_id, quantity in rows:
        blob += bytes(
            databento_dbn.StatMsg(
                publisher_id=1,
                instrument_id=instrument_id,
                ts_event=ts,
                ts_recv=ts,
                ts_ref=ts,
                price=0,
                quantity=quantity,
                sequence=0,
                ts_in_delta=0,
                stat_type=databento_dbn.StatType.OPEN_INTEREST,
                channel_id=0,
                update_action=databento_dbn.StatUpdateAction.NEW,
                stat_flags=0,
            )
        )
    path.write_bytes(blob)
    return path


def test_open_interest_rule_rolls_on_the_first_session_after_the_crossover_is_published(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    table = sessions()
    h, m = outright_id("ES", 2024, 3), outright_id("ES", 2024, 6)
    # ESM4 overtakes in the value published at 15:00 UTC on Thursday 2024-03-07.
    published = int(np.datetime64("2024-03-07T15:00", "ns").astype(np.int64))
    first = table.bounds(dt.date(2024, 2, 26))[0] - 1
    stats = _statistics_file(
        tmp_path / "stats.dbn", [(first, h, 2_000_000), (first, m, 100), (published, m, 2_500_000)]
    )
    config = dataclasses.replace(BASE, roll=RollConfig(rule="open-interest"), statistics=(stats,))

    ingest(config, [two_roll_market.folder], tmp_path / "store")

    manifest = _manifest(_series(tmp_path / "store", "mbp10_front_month-oi"))
    rolls = [
        (e["trading_day"], e["contract"], e["reason"])
        for e in manifest["roll_schedule"]  # type: ignore[attr-defined]
        if e["reason"] != "held"
    ]
    # Friday 03-08's session opened at 17:00 CST on 03-07 (23:00 UTC), after the value.
    assert rolls[1:2] == [("2024-03-08", "ESM4", "open-interest")]
    assert manifest["statistics"][0]["name"] == "stats.dbn"  # type: ignore[index]


def test_rolls_cli_prints_one_csv_row_per_transition(built: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "rolls",
            "ES.FUT",
            "--instrument-key",
            "mbp10_front_month-cal3",
            "--csv",
            "--store",
            str(built),
        ],
        catch_exceptions=False,
    )

    lines = result.output.splitlines()
    assert result.exit_code == 0
    assert lines[0] == (
        "trading_day,switch_ns,from_contract,from_instrument_id,to_contract,to_instrument_id,"
        "rule,reason,price_day,from_px,to_px,gap_add,gap_mul"
    )
    assert [line.split(",")[:5] for line in lines[1:]] == [
        ["2024-03-12", str(sessions().bounds(dt.date(2024, 3, 12))[0]), "ESH4", "432403", "ESM4"],
        ["2024-06-18", str(sessions().bounds(dt.date(2024, 6, 18))[0]), "ESM4", "432406", "ESU4"],
    ]


def test_rolls_cli_json_of_a_default_series_is_unpriced(built: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "rolls",
            "ES.FUT",
            "--instrument-key",
            "mbp10_front_month",
            "--json",
            "--store",
            str(built),
        ],
        catch_exceptions=False,
    )

    report = json.loads(result.output)
    assert report["priced"] is False
    assert [t["reason"] for t in report["transitions"]] == ["volume", "volume"]
    assert {t["gap_add"] for t in report["transitions"]} == {None}


def test_rolls_cli_compares_with_databento_per_trading_day(built: Path, tmp_path: Path) -> None:
    resolve = tmp_path / "ES.c.0.json"
    intervals = [
        {"d0": "2024-02-01", "d1": "2024-03-17", "s": "ESH4"},
        {"d0": "2024-03-17", "d1": "2024-06-23", "s": "ESM4"},
        {"d0": "2024-06-23", "d1": "2024-07-01", "s": "ESU4"},
    ]
    resolve.write_text(json.dumps({"result": {"ES.c.0": intervals}, "stype_out": "raw_symbol"}))

    result = CliRunner().invoke(
        cli,
        [
            "rolls",
            "ES.FUT",
            "--instrument-key",
            "mbp10_front_month-cal3",
            "--json",
            "--databento",
            str(resolve),
            "--store",
            str(built),
        ],
        catch_exceptions=False,
    )

    rows = json.loads(result.output)["comparison"]
    differ = [r["trading_day"] for r in rows if r["agree"] != "yes"]
    # fxstore rolls 3 sessions before expiry; Databento's calendar c.0 after it.
    assert differ == [
        d.isoformat() for d in sessions().between(dt.date(2024, 3, 12), dt.date(2024, 3, 15))
    ] + [d.isoformat() for d in sessions().between(dt.date(2024, 6, 18), dt.date(2024, 6, 21))]


def test_rolls_cli_json_and_csv_together_is_one_error_line(tmp_path: Path) -> None:
    args = ["rolls", "ES.FUT", "--json", "--csv", "--store", str(tmp_path)]
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Error: `--json` and `--csv` are two output formats: give one of them."
    ]


def test_rolls_cli_without_front_month_bars_is_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["rolls", "ES.FUT", "--store", str(tmp_path)])

    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"Error: No front-month bars mbp10_front_month for 'ES.FUT' in {tmp_path / 'bars'}; "
        "known: none. Run `fxstore ingest --instrument-mode front-month` first."
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--roll", "open-interest"],
            "Error: `--roll open-interest` needs open interest: pass Databento statistics "
            "files (schema 'statistics') of the same days with --statistics PATH.",
        ),
        (
            ["--roll-offset", "2"],
            "Error: `--roll-offset` applies to `--roll calendar` only, was 2 with `--roll volume`.",
        ),
        (
            ["--roll-offset-unit", "calendar"],
            "Error: `--roll-offset-unit` applies to `--roll calendar` only, was 'calendar' "
            "with `--roll volume`.",
        ),
        (
            ["--roll-months", "HMX9"],
            "Error: `--roll-months` must be distinct CME month codes (F G H J K M N Q U V X Z, "
            "e.g. GJMQVZ or G,J,M,Q,V,Z), was 'HMX9'.",
        ),
        (
            ["--adjust", "ratio", "--instrument-mode", "all"],
            "Error: `--roll`, `--roll-months`, `--adjust` and `--depth` apply to --instrument-mode "
            "front-month only, was all.",
        ),
    ],
)
def test_ingest_roll_options_without_their_inputs_are_one_error_line(
    two_roll_market: SynthMarket, tmp_path: Path, args: list[str], message: str
) -> None:
    store = tmp_path / "store"

    result = CliRunner().invoke(
        cli, ["ingest", str(two_roll_market.folder), "--store", str(store), "-q", *args]
    )

    assert result.exit_code == 1
    assert result.output.splitlines() == [message]
    assert not (store / "bars").exists()


def test_cli_calendar_rule_in_calendar_days_is_its_own_series_and_records_its_unit(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    args = ["--roll", "calendar", "--roll-offset", "7", "--roll-offset-unit", "calendar", "-q"]
    store = tmp_path / "store"

    result = CliRunner().invoke(
        cli, ["ingest", str(two_roll_market.folder), "--store", str(store), *args]
    )

    assert result.exit_code == 0, result.output
    series = _series(store, "mbp10_front_month-cal7cd")
    roll = _manifest(series)["config"]["roll"]  # type: ignore[index]
    assert (roll["offset"], roll["offset_unit"]) == (7, "calendar")


def test_cli_databento_rule_takes_the_schedule_of_a_symbology_answer(
    built: Path, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    default = _manifest(_series(built, "mbp10_front_month"))["roll_schedule"]
    days = [dt.date.fromisoformat(e["trading_day"]) for e in default]  # type: ignore[attr-defined,index]
    contracts = [e["contract"] for e in default]  # type: ignore[attr-defined,index]
    # Databento's switch: one trading day after the volume rule's
    changes = [i + 1 for i in range(1, len(days) - 1) if contracts[i] != contracts[i - 1]]
    starts = [0, *changes]
    ends = [*changes, len(days)]
    rows = [
        {
            "d0": days[a].isoformat(),
            "d1": (days[b] if b < len(days) else days[-1] + dt.timedelta(days=1)).isoformat(),
            "s": contracts[a],
        }
        for a, b in zip(starts, ends, strict=True)
    ]
    answer = tmp_path / "es-c-0.json"
    answer.write_text(json.dumps({"result": {"ES.c.0": rows}, "stype_out": "raw_symbol"}))
    store = tmp_path / "store"
    args = ["--roll", "databento", "--roll-symbology", str(answer), "-q"]

    result = CliRunner().invoke(
        cli, ["ingest", str(two_roll_market.folder), "--store", str(store), *args]
    )

    assert result.exit_code == 0, result.output
    manifest = _manifest(_series(store, "mbp10_front_month-db"))
    schedule = manifest["roll_schedule"]
    by_day = {r["d0"]: r["s"] for r in rows}
    rolls = [e for e in schedule if e["reason"] == "databento"]  # type: ignore[attr-defined,index]
    assert [(e["trading_day"], e["contract"]) for e in rolls] == [  # type: ignore[index]
        (d0, s) for d0, s in by_day.items() if d0 != rows[0]["d0"]
    ]
    assert manifest["symbology"][0]["name"] == "es-c-0.json"  # type: ignore[index]


def test_cli_databento_rule_without_its_symbology_is_one_error_line(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        cli,
        ["ingest", str(two_roll_market.folder), "--store", str(tmp_path), "--roll", "databento"],
    )

    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Error: `--roll databento` follows a saved Databento symbology.resolve answer "
        "(stype_in continuous, e.g. ES.c.0): pass it with --roll-symbology FILE."
    ]


def test_calendar_rule_without_expiries_is_one_error_line(tmp_path: Path) -> None:
    # A root fxstore's table does not hold, and no definition records among the inputs.
    from fxstore.synth import generate_market

    day = dt.date(2024, 3, 4)
    generate_market(SynthConfig(start=day, end=day, events_per_day=1_000, root="QQ"), tmp_path)
    (mbp10,) = tmp_path.glob("*.mbp-10.dbn.zst")
    store = tmp_path / "store"
    args = ["--symbol", "QQ.FUT", "--roll", "calendar", "--multiplier", "50", "-q"]

    result = CliRunner().invoke(cli, ["ingest", str(mbp10), *args, "--store", str(store)])

    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Error: `--roll calendar` needs the last trading days of QQ's contracts: fxstore's "
        "table does not hold root 'QQ'; pass Databento definition records with --definitions "
        "PATH."
    ]
    assert not store.exists()


SMALL = FeatureSet(
    (FeatureDef("ret_2", "log_return", {"horizon": 2}), FeatureDef("imb", "book_imbalance")),
    (FeatureDef("fwd_2", "forward_return", {"horizon": 2}),),
    Settings(vol_window=20),
)


def test_features_read_adjusted_price_levels_by_configuration(built: Path) -> None:
    adjusted = dataclasses.replace(SMALL, settings=Settings(vol_window=20, prices="adjusted"))
    config = FeatureConfig(instrument_key="mbp10_front_month-cal3", features=SMALL)

    raw = precompute(config, built)
    adj = precompute(dataclasses.replace(config, features=adjusted), built)

    assert raw.out_dir != adj.out_dir  # the setting is part of the feature-set hash
    store = fxstore.open(built)
    first, second = (store.read("ES.FUT", featureset=s.out_dir.name) for s in (raw, adj))
    np.testing.assert_array_equal(first["f_imb"].to_numpy(), second["f_imb"].to_numpy())
    # difference adjustment shifts price levels, so log returns move a little, not a lot
    ret_raw, ret_adj = first["f_ret_2"].to_numpy(), second["f_ret_2"].to_numpy()
    assert not np.array_equal(ret_raw, ret_adj)
    np.testing.assert_allclose(ret_raw, ret_adj, atol=0.05)


def test_adjusted_features_of_unadjusted_bars_are_one_error(built: Path) -> None:
    adjusted = dataclasses.replace(SMALL, settings=Settings(vol_window=20, prices="adjusted"))

    with pytest.raises(InvalidInputError, match="ingested without --adjust"):
        precompute(FeatureConfig(features=adjusted), built)


def test_rolls_cli_text_names_each_roll_and_the_days_databento_differs(
    built: Path, tmp_path: Path
) -> None:
    resolve = tmp_path / "ES.v.0.json"
    intervals = [
        {"d0": "2024-02-01", "d1": "2024-03-12", "s": "ESH4"},
        {"d0": "2024-03-12", "d1": "2024-07-01", "s": "ESM4"},
    ]
    resolve.write_text(json.dumps({"result": {"ES.v.0": intervals}}))

    result = CliRunner().invoke(
        cli,
        [
            "rolls",
            "ES.FUT",
            "--instrument-key",
            "mbp10_front_month-cal3",
            "--databento",
            str(resolve),
            "--store",
            str(built),
        ],
        catch_exceptions=False,
    )

    lines = result.output.splitlines()
    assert lines[0].startswith("ES.FUT v1: 2 rolls by calendar 3 (adjust difference, backward)")
    assert lines[1].startswith("  2024-03-12  ESH4 (432403) -> ESM4 (432406)  calendar  ")
    # Both switch to ESM4 on 03-12, Databento at midnight UTC: the evening before differs;
    # Databento never maps ESU4, so the series' last days differ.
    assert (
        "  2024-03-12  fxstore ESM4  databento ESM4 (open's UTC date 2024-03-11: ESH4)  evening"
        in lines
    )
    assert any(line.endswith("  no") and "fxstore ESU4" in line for line in lines)


def test_rolls_text_of_one_transition_says_one_roll(built: Path) -> None:
    from fxstore.ingest import read_rolls

    report = read_rolls(built, "ES.FUT", instrument_key="mbp10_front_month")
    one = dataclasses.replace(report, transitions=report.transitions[:1])

    first = one.format_text().splitlines()[0]

    assert first.startswith("ES.FUT v1: 1 roll by volume (adjust none, backward) in ")


def _next_quarterly(contract: str) -> str:
    """ESH4 -> ESM4, ESZ4 -> ESH5."""
    months = "HMUZ"
    k = months.index(contract[2])
    year = int(contract[3]) + (k == 3)
    return f"{contract[:2]}{months[(k + 1) % 4]}{year % 10}"


def test_depth_two_holds_the_next_contract_and_rolls_with_the_front(
    built: Path, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    config = dataclasses.replace(BASE, roll=RollConfig(depth=2))

    summary = ingest(config, [two_roll_market.folder], tmp_path)

    where = summary.out_dir.relative_to(tmp_path).parts[:3]
    assert where == ("bars", "ES.FUT.2", "mbp10_front_month")
    front = _manifest(_series(built, "mbp10_front_month"))["roll_schedule"]
    second = _manifest(summary.out_dir)["roll_schedule"]
    assert [e["trading_day"] for e in second] == [e["trading_day"] for e in front]  # type: ignore[union-attr]
    assert [e["contract"] for e in second] == [  # type: ignore[union-attr]
        _next_quarterly(e["contract"])
        for e in front  # type: ignore[union-attr]
    ]
    assert [e["reason"] for e in second] == [e["reason"] for e in front]  # type: ignore[union-attr]
    assert sum(e["reason"] == "volume" for e in second) == 2  # type: ignore[union-attr]
    bars = fxstore.open(tmp_path).read_bars("ES.FUT.2", columns=["trading_day", "instrument_id"])
    held = {e["trading_day"]: e["instrument_id"] for e in second}  # type: ignore[union-attr]
    days = [d.isoformat() for d in bars["trading_day"].to_pylist()]
    assert bars["instrument_id"].to_pylist() == [held[d] for d in days]


def test_depth_two_with_workers_writes_the_same_files(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    one, two = (
        ingest(
            dataclasses.replace(BASE, roll=RollConfig(depth=2), workers=workers),
            [two_roll_market.folder],
            tmp_path / str(workers),
        )
        for workers in (1, 2)
    )

    assert _files(one.out_dir) == _files(two.out_dir)


def test_cli_depth_beyond_the_listed_contracts_is_one_error_line(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    args = ["ingest", str(two_roll_market.folder), "--symbol", "ES.FUT", "--depth", "3"]

    result = CliRunner().invoke(cli, [*args, "--workers", "1", "--store", str(tmp_path)])

    # the synthetic market lists three quarterlies: in a roll week, before the old front
    # expires, the new front month has one contract after it
    assert result.exit_code == 1
    assert result.output == (
        "Error: --depth 3: 2024-03-13 lists 1 outright(s) of 'ES' after the front month "
        "ESM4 (ESU4), and depth 3 needs 2; lower --depth or add the later contracts' records "
        "to the input.\n"
    )
    assert not (tmp_path / "bars" / "ES.FUT.3").exists()
