from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config import BarConfig, FeatureConfig, IngestConfig
from fxstore.config.executor import ExecutorConfig
from fxstore.errors import FoldFailedError, RunInterruptedError
from fxstore.store import fold_dir
from fxstore.train import loop
from fxstore.train.evaluate.results import BacktestResult
from fxstore.train.loop import train
from fxstore.train.runs.status import StopRequest
from tests.conftest import SynthMarket
from tests.train._tiny import TINY

pytestmark = pytest.mark.usefixtures("ray_cluster")

RAY = ExecutorConfig("ray")
#: TINY with three folds, so that folds queue for the two CPUs.
THREE = dataclasses.replace(TINY, max_folds=3)


@pytest.fixture(scope="module")
def store(two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fxstore.features.precompute import precompute
    from fxstore.ingest.run.pipeline import ingest

    root = tmp_path_factory.mktemp("ray_train_store")
    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20))
    ingest(config, [two_roll_market.folder], root)
    precompute(FeatureConfig(), root)
    return root


def _metrics(run_dir: Path) -> dict[str, object]:
    """metrics.json less the run folder's own path (runs hold no timings)."""
    metrics = dict(json.loads((run_dir / "metrics.json").read_text()))
    assert metrics.pop("run_dir") == str(run_dir)
    return metrics


@pytest.fixture(scope="module")
def serial(store: Path) -> BacktestResult:
    return train(THREE, store)


def test_train_on_ray_gives_the_serial_runs_metrics(store: Path, serial: BacktestResult) -> None:
    on_ray = train(THREE, store, executor=RAY)

    assert _metrics(on_ray.run_dir) == _metrics(serial.run_dir)
    for fold in range(3):
        for name in ("results.npz", "evals.json"):
            a, b = fold_dir(serial.run_dir, fold) / name, fold_dir(on_ray.run_dir, fold) / name
            assert a.read_bytes() == b.read_bytes(), (fold, name)
        assert not (fold_dir(on_ray.run_dir, fold) / "checkpoint.npz").exists()


def test_train_on_ray_names_a_failed_fold_and_keeps_the_others(store: Path) -> None:
    def block_fold_1(run_id: str) -> None:  # a folder where fold 1's evaluations must go
        (fold_dir(store / "runs" / run_id, 1) / "evals.json").mkdir(parents=True)

    with pytest.raises(FoldFailedError) as err:
        train(THREE, store, executor=RAY, on_start=block_fold_1)

    message = str(err.value)
    assert message.startswith("fold 2: ")
    assert "fold01/evals.json" in message and "--resume" in message
    assert "\n" not in message
    run_dir = next(
        p for p in (store / "runs").iterdir() if (fold_dir(p, 1) / "evals.json").is_dir()
    )
    assert (fold_dir(run_dir, 0) / "results.npz").is_file()
    assert (fold_dir(run_dir, 2) / "results.npz").is_file()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["folds_done"] == 2


def test_cli_train_executor_ray_runs(store: Path) -> None:
    args = ["--profile", "smoke", "--max-folds", "1", "--device", "cpu", "--store", str(store)]

    result = CliRunner().invoke(
        cli, ["train", *args, "--executor", "ray", "-q", "--json"], catch_exceptions=False
    )

    assert result.exit_code == 0, result.output


def test_train_on_ray_stopped_by_a_signal_resumes_to_the_serial_runs_metrics(
    store: Path, serial: BacktestResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop = StopRequest()
    finish = loop.finish_fold

    def finish_then_signal(*args: Any) -> None:  # Ctrl-C once the first fold is in
        finish(*args)
        stop.request(signal.SIGINT)

    monkeypatch.setattr(loop, "finish_fold", finish_then_signal)
    with pytest.raises(RunInterruptedError) as err:
        train(THREE, store, executor=RAY, stop=stop)
    monkeypatch.undo()
    run_id = err.value.run_id
    done = [(fold_dir(store / "runs" / run_id, i) / "results.npz").is_file() for i in range(3)]
    assert 1 <= sum(done) <= 2 and not done[2]

    resumed = train(THREE, store, resume=run_id, executor=RAY)

    assert _metrics(resumed.run_dir) == _metrics(serial.run_dir)
