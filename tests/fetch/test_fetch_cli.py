"""`fxstore fetch` end to end against the fake Databento API (tests/fetch/fake_databento.py)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fetch.conftest import FetchRun
from tests.fetch.fake_databento import DATA, SCHEMA_FILES, FakeDatabento, Fault

MBP_FILE = "glbx-mdp3-20201228.mbp-10.dbn.zst"


def _dataset(tmp_path: Path) -> Path:
    return tmp_path / "store" / "raw" / "GLBX.MDP3"


def _visible(tmp_path: Path) -> list[str]:
    """What ingest could be pointed at: the dataset folder's entries that are not hidden."""
    folder = _dataset(tmp_path)
    return (
        sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        if folder.exists()
        else []
    )


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("Error:")]


def test_fetch_batch_writes_checked_job_folder(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    result = run_fetch("--yes", "--via", "batch", catch=False)

    assert result.exit_code == 0, result.output
    job = "GLBX-20240101-JOB0000001"
    assert _visible(tmp_path) == [job]
    folder = _dataset(tmp_path) / job
    assert (folder / MBP_FILE).read_bytes() == (DATA / SCHEMA_FILES["mbp-10"]).read_bytes()
    assert {p.name for p in folder.iterdir()} == {
        MBP_FILE,
        "metadata.json",
        "manifest.json",
        "symbology.json",
        "condition.json",
        "fxstore-fetch.json",
    }
    manifest = json.loads((folder / "fxstore-fetch.json").read_text())
    listed = {f["name"]: f["sha256"] for f in manifest["files"]}
    assert listed[MBP_FILE] == hashlib.sha256((folder / MBP_FILE).read_bytes()).hexdigest()
    assert manifest["job_id"] == job and manifest["request"]["end"] == "2020-12-28"
    assert server.state.calls_to("batch.submit_job") == 1
    submitted = next(form for name, form in server.state.calls if name == "batch.submit_job")
    assert (submitted["start"], submitted["end"]) == ("2020-12-28", "2020-12-29")  # end exclusive
    assert "Fetched: mbp-10 5 files" in result.stdout


def test_fetch_plan_shows_cost_size_records_instruments_and_target(run_fetch: FetchRun) -> None:
    result = run_fetch("--dry-run", "--with-definitions", catch=False)

    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert "ES.FUT resolves to 1 instrument (ids 5482)" in lines[1]
    mbp = next(line.split() for line in lines if line.strip().startswith("mbp-10"))
    assert mbp[:5] == ["mbp-10", "2,500,000", "250.0", "MB", "$12.50"]
    assert mbp[5] == "batch" and mbp[6].endswith("store/raw/GLBX.MDP3/<job-id>/")
    definition = next(line.split() for line in lines if line.strip().startswith("definition"))
    assert definition[4:6] == ["$0.01", "stream"]
    assert "$12.51" in lines[-2]


def test_fetch_batch_job_state_and_progress_show_on_stderr(run_fetch: FetchRun) -> None:
    result = run_fetch("--yes", "--via", "batch", catch=False)

    assert result.exit_code == 0
    job = "GLBX-20240101-JOB0000001"
    states = [line for line in result.stderr.splitlines() if line.startswith(f"job {job}")]
    assert states == [
        f"job {job}: queued 0%",
        f"job {job}: processing 50%",
        f"job {job}: done 100%",
    ]


def test_fetch_quiet_shows_no_progress(run_fetch: FetchRun) -> None:
    result = run_fetch("--yes", "--via", "batch", "-q", catch=False)

    assert result.exit_code == 0
    assert result.stderr == ""


def test_fetch_dry_run_buys_nothing(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    result = run_fetch("--dry-run", catch=False)

    assert result.exit_code == 0
    assert (
        server.state.calls_to("batch.submit_job")
        == server.state.calls_to("timeseries.get_range")
        == 0
    )
    assert _visible(tmp_path) == []


def test_fetch_above_max_cost_refuses_before_buying(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    result = run_fetch("--yes", "--max-cost", "10")

    assert result.exit_code == 1
    assert _error_lines(result.output) == [
        "Error: the plan costs $12.50, above --max-cost 10; nothing was bought: narrow "
        "--start/--end or --symbol, or raise --max-cost."
    ]
    assert server.state.calls_to("batch.submit_job") == 0 and _visible(tmp_path) == []


def test_fetch_declined_confirmation_buys_nothing(
    run_fetch: FetchRun, server: FakeDatabento
) -> None:
    result = run_fetch(input="n\n")

    assert result.exit_code == 1
    assert "Buy it for $12.50? [y/N]" in result.stderr
    assert _error_lines(result.output) == [
        "Error: not confirmed, nothing was bought: answer y, or pass --yes to buy without asking."
    ]
    assert server.state.calls_to("batch.submit_job") == 0


def test_fetch_json_shows_the_plan_on_stderr_before_asking(
    run_fetch: FetchRun, server: FakeDatabento
) -> None:
    result = run_fetch("--json", input="n\n")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert "Buy it for $12.50? [y/N]" in result.stderr
    plan, _, _ = result.stderr.partition("Buy it for $12.50? [y/N]")
    assert "ES.FUT resolves to 1 instrument (ids 5482)" in plan
    assert "store/raw/GLBX.MDP3/<job-id>/" in plan
    assert server.state.calls_to("batch.submit_job") == 0


def test_fetch_confirmed_buys(run_fetch: FetchRun, server: FakeDatabento) -> None:
    result = run_fetch(input="y\n", catch=False)

    assert result.exit_code == 0
    assert server.state.calls_to("batch.submit_job") == 1


def test_fetch_again_skips_complete_download_without_any_call(
    run_fetch: FetchRun, server: FakeDatabento
) -> None:
    assert run_fetch("--yes", catch=False).exit_code == 0
    n_calls = len(server.state.calls)

    again = run_fetch("--yes", catch=False)

    assert again.exit_code == 0
    assert "Up to date: mbp-10 5 files" in again.stdout and "have it" in again.stdout
    assert len(server.state.calls) == n_calls


def test_fetch_cut_off_download_resumes_with_range(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    server.state.cut_after[MBP_FILE] = (100, 2)

    result = run_fetch("--yes", catch=False)

    assert result.exit_code == 0
    assert ("glbx-mdp3-20201228.mbp-10.dbn.zst", "bytes=100-421") in server.state.ranges
    folder = _dataset(tmp_path) / "GLBX-20240101-JOB0000001"
    assert (folder / MBP_FILE).read_bytes() == (DATA / SCHEMA_FILES["mbp-10"]).read_bytes()


def test_fetch_killed_download_resumes_without_buying_again(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    server.state.cut_after[MBP_FILE] = (100, -1)
    first = run_fetch("--yes")
    assert first.exit_code == 1
    assert len(_error_lines(first.output)) == 1
    assert _error_lines(first.output)[0].startswith(
        f"Error: the download of {MBP_FILE} failed 5 times (Error downloading file: "
    )
    assert first.output.rstrip().endswith(
        "run the same command again: it resumes where it stopped, at no cost."
    )
    assert _visible(tmp_path) == []  # the partial file stays in .partial/, out of ingest's way
    partial = _dataset(tmp_path) / ".partial" / "GLBX-20240101-JOB0000001" / MBP_FILE
    assert partial.stat().st_size == 100
    server.state.cut_after.clear()
    server.state.ranges.clear()

    second = run_fetch("--yes", catch=False)

    assert second.exit_code == 0
    assert "paid" in second.stdout and "Buy it" not in second.output
    assert server.state.calls_to("batch.submit_job") == 1
    assert server.state.ranges == [(MBP_FILE, "bytes=100-421")]
    assert _visible(tmp_path) == ["GLBX-20240101-JOB0000001"]
    manifest = _dataset(tmp_path) / "GLBX-20240101-JOB0000001" / "fxstore-fetch.json"
    assert json.loads(manifest.read_text())["cost_usd"] == 12.5  # what it cost when bought


def test_fetch_checksum_mismatch_quarantines_and_fetches_once_more(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    server.state.corrupt[MBP_FILE] = 1

    result = run_fetch("--yes", catch=False)

    assert result.exit_code == 0
    quarantined = list((_dataset(tmp_path) / ".quarantine" / "GLBX-20240101-JOB0000001").iterdir())
    assert [p.name.split(".dbn.zst")[0] for p in quarantined] == ["glbx-mdp3-20201228.mbp-10"]
    good = (DATA / SCHEMA_FILES["mbp-10"]).read_bytes()
    assert quarantined[0].read_bytes() != good
    assert (_dataset(tmp_path) / "GLBX-20240101-JOB0000001" / MBP_FILE).read_bytes() == good


def test_fetch_checksum_mismatch_twice_is_one_error_and_nothing_committed(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    server.state.corrupt[MBP_FILE] = 2

    result = run_fetch("--yes")

    assert result.exit_code == 1
    [line] = _error_lines(result.output)
    assert line.startswith(
        f"Error: {MBP_FILE} of batch job GLBX-20240101-JOB0000001 failed its sha256 check twice"
    )
    assert _visible(tmp_path) == []
    assert (
        len(list((_dataset(tmp_path) / ".quarantine" / "GLBX-20240101-JOB0000001").iterdir())) == 2
    )


def test_fetch_small_parts_stream_and_ingest_reads_the_result(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    result = run_fetch(
        "--yes", "--with-definitions", "--with-statistics", "--ingest", "-q", catch=False
    )

    assert result.exit_code == 0, result.output
    assert server.state.calls_to("timeseries.get_range") == 2  # definition, statistics
    streams = [name for name in _visible(tmp_path) if name.startswith("stream-")]
    assert len(streams) == 2
    definition = next(
        p for s in streams for p in (_dataset(tmp_path) / s).iterdir() if ".definition." in p.name
    )
    assert definition.name == "glbx-mdp3-20201228-20201228.definition.dbn.zst"
    assert definition.read_bytes() == (DATA / SCHEMA_FILES["definition"]).read_bytes()
    assert "Ingested 1 trading days" in result.stdout
    assert (tmp_path / "store" / "bars" / "ES.FUT").is_dir()


def test_fetch_ingest_needs_mbp10_before_buying(run_fetch: FetchRun, server: FakeDatabento) -> None:
    result = run_fetch("--yes", "--schema", "trades", "--ingest")

    assert result.exit_code == 1
    assert _error_lines(result.output) == [
        "Error: --ingest builds bars from one parent symbol's mbp-10 data: pass --schema mbp-10 "
        "and one --symbol (was --schema trades, --symbol ES.FUT)."
    ]
    assert server.state.calls == []


_START_DETAIL = {
    "case": "data_start_before_available_start",
    "message": "The dataset GLBX.MDP3 has data available from 2010-06-06 00:00:00+00:00.",
    "status_code": 422,
    "docs": "https://databento.com/docs/api-reference-historical/basics/datasets",
}
ERRORS = [
    (
        "symbology.resolve",
        Fault(422, _START_DETAIL),
        "Error: --start: Databento refused symbology.resolve (422): "
        "data_start_before_available_start: The dataset GLBX.MDP3 has data available from "
        "2010-06-06 00:00:00+00:00.",
    ),
    (
        "metadata.get_cost",
        Fault(
            422,
            {
                "case": "symbology_invalid_symbol",
                "message": "Invalid symbol 'ES.FUT' for stype_in 'parent'.",
            },
        ),
        "Error: --symbol: Databento refused metadata.get_cost (422): symbology_invalid_symbol: "
        "Invalid symbol 'ES.FUT' for stype_in 'parent'.",
    ),
    (
        "metadata.get_billable_size",
        Fault(403, "Your license does not include GLBX.MDP3."),
        "Error: Databento refused metadata.get_billable_size (403): Your license does not "
        "include GLBX.MDP3; check your balance and your plan's datasets in the portal.",
    ),
    (
        "batch.submit_job",
        Fault(402, "Insufficient balance: $3.10 available, $12.50 required."),
        "Error: Databento refused batch.submit_job (402): Insufficient balance: $3.10 "
        "available, $12.50 required; check your balance and your plan's datasets in the portal.",
    ),
    (
        "metadata.get_cost",
        Fault(503, "Service unavailable", times=99),
        "Error: Databento's API answered 503 to metadata.get_cost 5 times (Service "
        "unavailable); nothing was left half-written: run the same command again later.",
    ),
    (
        "batch.list_files",
        Fault(429, "Too many requests", times=99, headers={"Retry-After": "0"}),
        "Error: Databento's API answered 429 to batch.list_files 5 times (Too many requests); "
        "nothing was left half-written: run the same command again later.",
    ),
]


@pytest.mark.parametrize(("endpoint", "fault", "line"), ERRORS, ids=[e[1].status for e in ERRORS])
def test_fetch_api_error_is_one_line_and_leaves_nothing_for_ingest(
    run_fetch: FetchRun,
    server: FakeDatabento,
    tmp_path: Path,
    endpoint: str,
    fault: Fault,
    line: str,
) -> None:
    server.state.faults[endpoint].append(fault)

    result = run_fetch("--yes")

    assert result.exit_code == 1
    assert _error_lines(result.output) == [line]
    assert result.output.strip().splitlines()[-1] == line
    assert _visible(tmp_path) == []


@pytest.mark.parametrize(
    "endpoint", ["metadata.get_cost", "batch.get_job_details", "batch/download"]
)
def test_fetch_transient_errors_are_retried(
    run_fetch: FetchRun, server: FakeDatabento, endpoint: str
) -> None:
    server.state.faults[endpoint] += [
        Fault(429, "slow down", headers={"Retry-After": "0"}),
        Fault(502),
    ]

    result = run_fetch("--yes", catch=False)

    assert result.exit_code == 0
    assert server.state.faults[endpoint] == []


def test_fetch_unknown_symbol_names_it(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    result = run_fetch("--yes", "--symbol", "ESX.FUT")

    assert result.exit_code == 1
    assert _error_lines(result.output) == [
        "Error: --symbol ESX.FUT: Databento resolves it to no instrument in GLBX.MDP3 from "
        "2020-12-28 to 2020-12-28 (stype parent); check the symbol, --stype-in and the dates."
    ]
    assert _visible(tmp_path) == []


@pytest.mark.parametrize(
    ("endpoint", "via"), [("batch.submit_job", "batch"), ("timeseries.get_range", "stream")]
)
def test_fetch_gateway_timeout_of_a_billed_call_is_not_retried(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path, endpoint: str, via: str
) -> None:
    server.state.faults[endpoint].append(Fault(504, "Gateway timeout"))

    result = run_fetch("--yes", "--via", via)

    assert result.exit_code == 1
    assert _error_lines(result.output) == [
        f"Error: {endpoint} did not complete (504 The remote gateway timed out.); it may "
        "have been billed: look at the portal's download center before running again."
    ]
    assert server.state.calls_to(endpoint) == 1
    assert _visible(tmp_path) == []


def test_fetch_json_reports_plan_and_files(run_fetch: FetchRun) -> None:
    result = run_fetch("--yes", "--json", "-q", catch=False)

    report = json.loads(result.stdout)
    assert report["plan"]["cost_usd"] == 12.5
    [part] = report["fetched"]
    assert part["schema"] == "mbp-10" and len(part["files"]) == 5


def test_fetch_killed_by_sigkill_mid_download_resumes_on_the_next_run(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    server.state.stall_at[MBP_FILE] = 100
    partial = _dataset(tmp_path) / ".partial" / "GLBX-20240101-JOB0000001" / MBP_FILE
    # A real process, killed -9 while the server hangs 100 bytes into the file.
    argv = ["fetch", "--symbol", "ES.FUT", "--start", "2020-12-28", "--end", "2020-12-28"]
    argv += ["--gateway", server.url, "--store", str(tmp_path / "store"), "--yes", "-q"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    proc = subprocess.Popen([sys.executable, "-m", "fxstore", *argv], env=env)
    try:
        assert server.state.stalled.wait(timeout=60)
        deadline = time.monotonic() + 30
        while not partial.is_file():  # the client opens it once the answer's headers are in
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        server.state.release.set()
        proc.kill()
    assert _visible(tmp_path) == []
    on_disk = partial.stat().st_size  # what reached the disk before the kill (0 to 100 bytes)
    del server.state.stall_at[MBP_FILE]

    result = run_fetch("--yes", catch=False)

    assert result.exit_code == 0
    assert server.state.calls_to("batch.submit_job") == 1
    assert server.state.ranges == [(MBP_FILE, f"bytes={on_disk}-421")]
    folder = _dataset(tmp_path) / "GLBX-20240101-JOB0000001"
    assert (folder / MBP_FILE).read_bytes() == (DATA / SCHEMA_FILES["mbp-10"]).read_bytes()


def test_fetch_expired_job_is_one_error(run_fetch: FetchRun, server: FakeDatabento) -> None:
    server.state.job_states = ["queued", "expired"]

    result = run_fetch("--yes")

    assert result.exit_code == 1
    assert _error_lines(result.output) == [
        "Error: batch job GLBX-20240101-JOB0000001 has expired (Databento keeps a job's files 30 "
        "days); delete its record under raw/<DATASET>/.requests/ to buy it again."
    ]


def test_fetch_damaged_download_is_fetched_again_from_its_job_at_no_cost(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path
) -> None:
    assert run_fetch("--yes", catch=False).exit_code == 0
    folder = _dataset(tmp_path) / "GLBX-20240101-JOB0000001"
    (folder / MBP_FILE).write_bytes(b"edited")

    again = run_fetch(catch=False)  # nothing to buy: no question asked

    assert again.exit_code == 0, again.output
    assert "paid" in again.stdout and "Buy it" not in again.output
    assert server.state.calls_to("batch.submit_job") == 1
    assert (folder / MBP_FILE).read_bytes() == (DATA / SCHEMA_FILES["mbp-10"]).read_bytes()
    [moved] = (_dataset(tmp_path) / ".quarantine" / "GLBX-20240101-JOB0000001").iterdir()
    assert (moved / MBP_FILE).read_bytes() == b"edited"


@pytest.mark.parametrize("damage", ["{trunc", '{"files": 3}', '{"files": [{"name": "x"}]}'])
def test_fetch_damaged_fetch_manifest_is_fetched_again_from_its_job_at_no_cost(
    run_fetch: FetchRun, server: FakeDatabento, tmp_path: Path, damage: str
) -> None:
    assert run_fetch("--yes", catch=False).exit_code == 0
    folder = _dataset(tmp_path) / "GLBX-20240101-JOB0000001"
    (folder / "fxstore-fetch.json").write_text(damage)

    again = run_fetch(catch=False)  # nothing to buy: no question asked

    assert again.exit_code == 0, again.output
    assert "paid" in again.stdout and "Buy it" not in again.output
    assert server.state.calls_to("batch.submit_job") == 1
    manifest = json.loads((folder / "fxstore-fetch.json").read_text())
    assert MBP_FILE in {f["name"] for f in manifest["files"]}
    [moved] = (_dataset(tmp_path) / ".quarantine" / "GLBX-20240101-JOB0000001").iterdir()
    assert (moved / "fxstore-fetch.json").read_text() == damage
