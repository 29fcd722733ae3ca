"""The data commands: scan, synth and ingest; exact error lines for bad input."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore.cli import cli

PEER = Path(__file__).parents[1] / "data" / "peer-dbn"


def test_scan_peer_file_prints_symbol_and_front_month() -> None:
    path = PEER / "GLBX.MDP3.test_data.mbp-10.dbn.zst"

    result = CliRunner().invoke(
        cli, ["scan", str(path), "--symbol", "ES.FUT"], catch_exceptions=False
    )

    assert result.exit_code == 0
    assert "GLBX.MDP3" in result.output
    assert "ESH1" in result.output
    assert "Front month of ES" in result.output


def test_scan_json_reports_activity_and_schedule() -> None:
    path = PEER / "GLBX.MDP3.test_data.mbp-10.dbn.zst"

    result = CliRunner().invoke(cli, ["scan", str(path), "--json", "--symbol", "ES.FUT"])

    report = json.loads(result.output)
    assert report["n_records"] == 4
    assert report["activity"] == [
        {
            "trading_day": "2020-12-28",
            "instrument_id": 5482,
            "symbol": "ESH1",
            "n_records": 4,
            "volume": 0,
        }
    ]
    assert report["front_month"][0]["contract"] == "ESH1"


def test_scan_trades_file_fails_with_one_error_line() -> None:
    path = PEER / "GLBX.MDP3.test_data.trades.dbn.zst"

    result = CliRunner().invoke(cli, ["scan", str(path)])

    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: ")
    assert "trades" in lines[0] and path.name in lines[0]


def test_scan_missing_path_fails_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.dbn.zst"

    result = CliRunner().invoke(cli, ["scan", str(missing)])

    assert result.exit_code == 1
    assert result.output.startswith("Error: ")
    assert "nope.dbn.zst" in result.output


def test_scan_symbol_without_outrights_fails_naming_root(tmp_path: Path) -> None:
    path = shutil.copy(PEER / "GLBX.MDP3.test_data.mbp-10.dbn.zst", tmp_path)

    result = CliRunner().invoke(cli, ["scan", str(path), "--symbol", "NQ.FUT"])

    assert result.exit_code == 1
    assert "Error: " in result.output and "'NQ'" in result.output


@pytest.mark.parametrize("symbol", ["../ES.FUT", "ES/X"])
def test_scan_unsafe_symbol_fails(symbol: str) -> None:
    path = PEER / "GLBX.MDP3.test_data.mbp-10.dbn.zst"

    result = CliRunner().invoke(cli, ["scan", str(path), "--symbol", symbol])

    assert result.exit_code == 1
    assert "Error: `symbol`" in result.output


def test_synth_then_ingest_twice_reports_up_to_date(tmp_path: Path) -> None:
    runner = CliRunner()
    market = tmp_path / "m"
    synth_args = ["synth", str(market), "--start", "2024-03-04", "--end", "2024-03-05"]
    runner.invoke(cli, [*synth_args, "--events-per-day", "2000"], catch_exceptions=False)
    ingest_args = ["ingest", str(market), "--store", str(tmp_path), "--workers", "1"]

    first = runner.invoke(cli, ingest_args, catch_exceptions=False)
    second = runner.invoke(cli, ingest_args, catch_exceptions=False)

    assert first.exit_code == 0 and "Ingested 2 trading days" in first.output
    assert second.exit_code == 0 and second.output.startswith("Up to date:")


def test_synth_twice_says_the_files_are_left_as_they_are(tmp_path: Path) -> None:
    args = ["synth", str(tmp_path), "--start", "2024-03-04", "--end", "2024-03-05", "-q"]
    args += ["--events-per-day", "2000"]
    first = CliRunner().invoke(cli, args, catch_exceptions=False)

    second = CliRunner().invoke(cli, args, catch_exceptions=False)

    assert first.output.startswith("Wrote 2 DBN files (4,096 records, 2 trading days) to ")
    assert second.output == (
        f"Up to date: 2 DBN files (4,096 records, 2 trading days) in {tmp_path}, "
        "written before with the same options; left as they are.\n"
    )


def test_synth_and_ingest_json_print_what_they_did(tmp_path: Path) -> None:
    market = tmp_path / "m"
    synth_args = ["synth", str(market), "--start", "2024-03-04", "--end", "2024-03-05", "-q"]
    ingest_args = ["ingest", str(market), "--store", str(tmp_path), "--workers", "1", "-q"]

    synth = CliRunner().invoke(cli, [*synth_args, "--events-per-day", "2000", "--json"])
    ingest = CliRunner().invoke(cli, [*ingest_args, "--json"], catch_exceptions=False)

    wrote, built = json.loads(synth.stdout), json.loads(ingest.stdout)
    assert (wrote["out_dir"], wrote["is_up_to_date"], wrote["n_records"]) == (
        str(market),
        False,
        4096,
    )
    assert [Path(f).name for f in wrote["files"]] == [
        "glbx-mdp3-20240304.mbp-10.dbn.zst",
        "glbx-mdp3-20240305.mbp-10.dbn.zst",
    ]
    assert (built["n_days"], built["up_to_date"]) == (2, False)
    assert built["bars_per_day"] == built["n_bars"] / 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--instrument-mode", "nearest"], "Error: `--instrument-mode` must be all, id=N"),
        (["--bar-type", "tick"], "Error: `threshold` is required for 'tick' bars."),
        (
            ["--threshold", "-5", "--bar-type", "volume"],
            "Error: `threshold` must be > 0, was -5.0.",
        ),
        (["--symbol", "../ES"], "Error: `symbol` may hold only letters"),
        (["--workers", "0"], "Error: `workers` must be"),
    ],
)
def test_ingest_bad_options_fail_with_one_error_line(
    args: list[str], message: str, tmp_path: Path
) -> None:
    path = PEER / "GLBX.MDP3.test_data.mbp-10.dbn.zst"

    result = CliRunner().invoke(cli, ["ingest", str(path), "--store", str(tmp_path), *args])

    assert result.exit_code == 1
    assert result.output.startswith(message), result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "bars").exists()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--start", "2024-03-08", "--end", "2024-03-04"], "`end`"),
        (["--events-per-day", "5"], "`events_per_day`"),
        (["--signal", "2"], "`signal_strength`"),
        (["--workers", "0"], "`workers`"),
    ],
)
def test_synth_bad_options_fail_naming_the_field(
    args: list[str], field: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(cli, ["synth", str(tmp_path / "m"), *args])

    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and field in result.output


def test_cli_ingest_executor_ray_without_ray_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    args = [str(PEER / "test_data.mbp-10.v3.dbn.zst"), "--store", str(tmp_path), "-q"]

    result = CliRunner().invoke(cli, ["ingest", *args, "--executor", "ray"])

    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: --executor ray needs Ray, which is not installed")
    assert lines[0].endswith(
        "install it with `pip install 'fxstore[ray]'`, or leave out --executor to use the "
        "local pool."
    )
    assert not (tmp_path / "bars").exists()
