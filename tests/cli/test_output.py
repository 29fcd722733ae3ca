"""What long commands show while they work, and how they stop: ETA, heartbeat, Ctrl-C."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore.cli import _output, cli
from fxstore.cli._output import Progress, eta_text, format_duration, train_status
from fxstore.train.loop import Progress as TrainProgress

pytestmark = pytest.mark.quick

SYNTH = ["synth", "--start", "2024-03-04", "--end", "2024-03-05", "--events-per-day", "1000"]


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0s"), (42, "42s"), (185, "3m 05s"), (3720, "1h 02m")]
)
def test_format_duration_reads_as_hours_minutes_seconds(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("done", "total", "elapsed", "text"),
    [(0, 10, 5.0, "ETA -"), (5, 10, 60.0, "ETA 1m 00s"), (10, 10, 60.0, "ETA 0s")],
)
def test_eta_text_is_the_time_left_at_the_rate_so_far(
    done: int, total: int, elapsed: float, text: str
) -> None:
    assert eta_text(done, total, elapsed) == text


def test_progress_off_a_terminal_prints_a_heartbeat_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_output, "HEARTBEAT_S", 0.05)
    bar = Progress("synth", quiet=False)
    bar.start(4)
    bar.advance()

    time.sleep(0.3)
    bar.close()

    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("synth: 1/4 (25%), ETA ") for line in lines)


def _report(loss: float, val_sharpe: float) -> TrainProgress:
    return TrainProgress(
        fold=0, n_folds=2, step=10, total_steps=100, loss=loss, samples_per_s=1234.0,
        val_sharpe=val_sharpe,
    )  # fmt: skip


def test_train_status_before_learning_says_so_instead_of_nan() -> None:
    text = train_status(_report(math.nan, math.nan))

    assert text == (
        "fold 1/2 loss - (no update yet) 1,234 samples/s val Sharpe - (not validated yet)"
    )


def test_train_status_counts_folds_from_1_as_the_table_does() -> None:
    assert train_status(_report(0.25, 1.5)) == (
        "fold 1/2 loss 0.2500 1,234 samples/s val Sharpe 1.50"
    )


def _stopping(signum: int) -> object:
    def generate(*_args: object, **_kwargs: object) -> object:
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the signal arrives first
        raise AssertionError("not stopped")

    return generate


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_synth_stopped_by_a_signal_says_how_to_continue_and_exits_128_plus_it(
    signum: int, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fxstore.synth.generate_market", _stopping(signum))

    result = CliRunner().invoke(cli, [*SYNTH, str(tmp_path)])

    assert result.exit_code == code
    assert result.output.splitlines()[-1] == (
        f"{signal.Signals(signum).name}: stopped; nothing is left half-written. Run the same "
        "command again (synth and ingest resume where they stopped)."
    )
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_synth_interrupted_by_a_real_sigint_resumes_at_the_next_run(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "fxstore", "synth", str(tmp_path), "-q", "--start"]
    args += ["2024-03-04", "--end", "2024-03-29", "--events-per-day", "60000"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "fxstore-synth.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # the first day is written
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)

    again = CliRunner().invoke(cli, ["synth", *args[4:]], catch_exceptions=False)

    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("SIGINT: stopped; nothing is left")
    kept = re.search(r"\((\d+) of the days were there already", again.output)
    assert kept is not None and 1 <= int(kept.group(1)) < 20, again.output
