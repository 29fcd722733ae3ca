"""``train --gpus N``: folds on local worker processes, one per GPU (faked on the CPU here).

The device is the CPU; each worker still gets its own CUDA_VISIBLE_DEVICES entry ("0",
"1"), which a recording stand-in for the fold task writes down from inside the worker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore import gpus
from fxstore.cli import cli
from fxstore.errors import FoldFailedError, InvalidInputError, RunInterruptedError
from fxstore.store import fold_dir
from fxstore.train import loop
from fxstore.train.evaluate.results import BacktestResult, FoldResult
from fxstore.train.loop import train
from fxstore.train.runs.fold_tasks import FoldTask
from fxstore.train.runs.status import StopRequest
from tests.train._tiny import TINY, assert_same_run

#: TINY with three folds (so that one queues for the two workers), shorter folds.
THREE = dataclasses.replace(TINY, max_folds=3, env_steps=100, eval_every=50)
TWO_GPUS = ("0", "1")
#: Where the workers' recording fold task writes (inherited by the spawned workers).
_LOG_ENV = "FXSTORE_TEST_GPU_LOG"


def record_fold_task(task: FoldTask) -> dict[str, FoldResult]:
    """:func:`loop.run_fold_task`, noting the worker's CUDA_VISIBLE_DEVICES and process."""
    log = Path(os.environ[_LOG_ENV]) / f"fold{task.fold.index}-{os.getpid()}.json"
    log.write_text(json.dumps(os.environ.get("CUDA_VISIBLE_DEVICES")))
    return loop.run_fold_task(task)


@pytest.fixture
def worker_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder of (fold, pid) -> CUDA_VISIBLE_DEVICES notes written by the fold tasks."""
    monkeypatch.setenv(_LOG_ENV, str(tmp_path))
    monkeypatch.setattr(loop, "run_fold_task", record_fold_task)
    yield tmp_path


def _trained(log: Path) -> list[tuple[int, int, str]]:
    """(fold, pid, CUDA_VISIBLE_DEVICES) of every fold task the workers ran."""
    notes = []
    for path in log.glob("fold*-*.json"):
        fold, pid = path.stem.removeprefix("fold").split("-")
        notes.append((int(fold), int(pid), json.loads(path.read_text())))
    return sorted(notes)


@pytest.fixture(scope="module")
def serial(store: Path) -> BacktestResult:
    return train(THREE, store)


def test_train_on_two_gpus_gives_the_serial_run_folder_one_gpu_per_worker(
    store: Path, serial: BacktestResult, worker_log: Path
) -> None:
    result = train(THREE, store, gpus=TWO_GPUS)

    assert_same_run(serial.run_dir, result.run_dir)
    trained = _trained(worker_log)
    assert [fold for fold, _, _ in trained] == [0, 1, 2]
    device_of = {pid: device for _, pid, device in trained}
    assert sorted(device_of.values()) == ["0", "1"]  # two workers, each on its own GPU
    assert len({(pid, device) for _, pid, device in trained}) == 2


def test_train_with_two_workers_on_one_gpu_gives_the_serial_run_folder(
    store: Path, serial: BacktestResult, worker_log: Path
) -> None:
    result = train(THREE, store, gpus=("0", "0"))

    assert_same_run(serial.run_dir, result.run_dir)
    trained = _trained(worker_log)
    assert [fold for fold, _, _ in trained] == [0, 1, 2]
    assert {device for _, _, device in trained} == {"0"}
    assert len({pid for _, pid, _ in trained}) == 2  # two processes share the one GPU


def test_train_on_gpus_shows_every_folds_progress_from_the_workers(
    store: Path, serial: BacktestResult
) -> None:
    """The workers' progress reports reach the driver's on_progress (the CLI's display), each
    fold's ending in its last report, as the serial run's do."""
    reports: list[loop.Progress] = []
    train(THREE, store, gpus=TWO_GPUS, on_progress=reports.append)
    folds = sorted({r.fold for r in reports})
    assert folds == [0, 1, 2]
    for fold in folds:
        mine = [r for r in reports if r.fold == fold]
        assert [r.step for r in mine] == sorted(r.step for r in mine)
        assert mine[-1].last and mine[-1].step <= THREE.env_steps
        assert not any(r.last for r in mine[:-1])
        assert all(r.n_folds == 3 and r.total_steps == THREE.env_steps for r in mine)


def test_train_display_counts_folds_reporting_out_of_order() -> None:
    from fxstore.cli._output import TrainDisplay

    def report(fold: int, step: int, last: bool = False) -> loop.Progress:
        return loop.Progress(fold, 4, step, 100, 0.5, 1e6, float("nan"), last)

    display = TrainDisplay()
    try:
        positions = []
        for r in [
            report(2, 40),  # a resumed run: folds 0 and 1 were done before
            report(3, 30),
            report(2, 60, last=True),  # stopped early: the whole fold counts
            report(3, 100, last=True),
        ]:
            display(r)
            positions.append(display.steps_done)
    finally:
        display.close()
    assert positions == [240, 270, 330, 400]


def test_train_display_counts_every_seed_of_a_fold() -> None:
    from fxstore.cli._output import TrainDisplay

    def report(fold: int, seed: int, step: int, last: bool = False) -> loop.Progress:
        return loop.Progress(fold, 2, step, 100, 0.5, 1e6, float("nan"), last, seed, 3)

    display = TrainDisplay()
    try:
        positions = []
        for r in [
            report(0, 0, 100, last=True),  # the fold's first agent is done, two more to go
            report(0, 1, 50),
            report(0, 2, 100, last=True),
            report(1, 0, 10),
        ]:
            display(r)
            positions.append(display.steps_done)
        assert display.steps_total == 600
    finally:
        display.close()
    assert positions == [100, 150, 250, 260]


def test_train_on_gpus_names_a_failed_fold_and_resume_trains_only_it(
    store: Path, serial: BacktestResult, worker_log: Path
) -> None:
    def block_fold_1(run_id: str) -> None:  # a folder where fold 1's evaluations must go
        (fold_dir(store / "runs" / run_id, 1) / "evals.json").mkdir(parents=True)

    started: list[str] = []
    with pytest.raises(FoldFailedError) as err:
        train(THREE, store, gpus=TWO_GPUS, on_start=lambda r: (started.append(r), block_fold_1(r)))
    run_dir = store / "runs" / started[0]
    message = str(err.value)
    assert message.startswith("fold 2: ") and "fold01/evals.json" in message
    assert f"--resume {started[0]}" in message and "\n" not in message
    assert [(fold_dir(run_dir, i) / "results.npz").is_file() for i in range(3)] == [1, 0, 1]
    assert json.loads((run_dir / "status.json").read_text())["folds_done"] == 2
    (fold_dir(run_dir, 1) / "evals.json").rmdir()
    for note in worker_log.iterdir():
        note.unlink()

    resumed = train(THREE, store, resume=started[0], gpus=TWO_GPUS)

    assert [fold for fold, _, _ in _trained(worker_log)] == [1]
    assert_same_run(serial.run_dir, resumed.run_dir)


def die_in_fold_1(task: FoldTask) -> dict[str, FoldResult]:
    """:func:`loop.run_fold_task`, but fold 1's worker process dies (as the OOM killer ends it)."""
    if task.fold.index == 1:
        os._exit(9)
    return loop.run_fold_task(task)


def test_train_on_gpus_a_dead_worker_fails_its_fold_and_the_others_finish(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop, "run_fold_task", die_in_fold_1)
    started: list[str] = []

    with pytest.raises(FoldFailedError) as err:
        train(THREE, store, gpus=TWO_GPUS, on_start=started.append)

    assert str(err.value).startswith("fold 2: its worker process on GPU 1 died (")
    run_dir = store / "runs" / started[0]
    assert [(fold_dir(run_dir, i) / "results.npz").is_file() for i in range(3)] == [1, 0, 1]


def wait_for_the_stop_then_train(task: FoldTask) -> dict[str, FoldResult]:
    """:func:`loop.run_fold_task` once the driver has asked the pool to stop (so that the
    fold is surely in flight when the stop comes)."""
    event = gpus.worker_stop_event()
    assert event is not None and event.wait(timeout=60)
    return loop.run_fold_task(task)


def test_train_on_gpus_stopped_by_a_signal_saves_the_folds_in_flight_and_resumes_to_serial(
    store: Path, serial: BacktestResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop = StopRequest()
    no_periodic = dataclasses.replace(THREE, checkpoint_every=0)  # only the stop saves one
    monkeypatch.setattr(loop, "run_fold_task", wait_for_the_stop_then_train)

    with pytest.raises(RunInterruptedError) as err:  # Ctrl-C as the first folds start
        train(
            no_periodic,
            store,
            gpus=TWO_GPUS,
            stop=stop,
            on_start=lambda _: stop.request(signal.SIGINT),
        )
    monkeypatch.undo()
    run_dir = store / "runs" / err.value.run_id
    assert not any((fold_dir(run_dir, i) / "results.npz").is_file() for i in range(3))
    assert [(fold_dir(run_dir, i) / "checkpoint.npz").is_file() for i in range(3)] == [1, 1, 0]

    resumed = train(no_periodic, store, resume=err.value.run_id)

    assert_same_run(serial.run_dir, resumed.run_dir)


def test_train_gpus_with_the_ray_executor_is_refused_before_the_run_folder(
    tmp_path: Path,
) -> None:
    from fxstore.config.executor import ExecutorConfig

    with pytest.raises(InvalidInputError, match="`gpus` is for the local executor"):
        train(THREE, tmp_path, gpus=TWO_GPUS, executor=ExecutorConfig("ray"))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("listed", "nvidia_smi", "expected"),
    [
        (None, None, ()),
        (None, ["GPU 0: H200 (UUID: GPU-aa)", "GPU 1: H200 (UUID: GPU-bb)"], ("0", "1")),
        ("1,0", ["GPU 0: H200 (UUID: GPU-aa)", "GPU 1: H200 (UUID: GPU-bb)"], ("1", "0")),
        ("0,2,1", ["GPU 0: H200 (UUID: GPU-aa)", "GPU 1: H200 (UUID: GPU-bb)"], ("0",)),
        ("GPU-bb", ["GPU 0: H200 (UUID: GPU-aa)", "GPU 1: H200 (UUID: GPU-bb)"], ("GPU-bb",)),
        ("2,3", None, ("2", "3")),
        ("", None, ()),
        ("-1", None, ()),
    ],
)
def test_visible_gpus_reads_cuda_visible_devices_as_cuda_does(
    listed: str | None,
    nvidia_smi: list[str] | None,
    expected: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpus, "_nvidia_smi_gpus", lambda: nvidia_smi)

    assert gpus.visible_gpus(listed) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--gpus", "3", "--device", "cuda"],
            "Error: --gpus 3: 2 GPUs are visible (0, 1) to this process "
            "(CUDA_VISIBLE_DEVICES, nvidia-smi -L); pass --gpus 2 or fewer.",
        ),
        (
            ["--gpus", "2", "--device", "cpu"],
            "Error: --gpus 2 trains folds on GPUs, but the device is 'cpu'; pass --device "
            "cuda (or auto), or leave out --gpus.",
        ),
        (
            ["--gpus", "2", "--device", "cuda", "--executor", "ray"],
            "Error: --gpus 2 is for the local executor; with --executor ray each fold asks "
            "Ray for one GPU and as many run at once as the cluster has: leave out --gpus.",
        ),
        (["--gpus", "0", "--device", "cuda"], "Error: --gpus must be >= 1, was 0."),
    ],
)
def test_cli_train_bad_gpus_is_one_error_line_and_writes_nothing(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpus, "visible_gpus", lambda _listed: TWO_GPUS)

    result = CliRunner().invoke(
        cli, ["train", "--profile", "smoke", "--store", str(tmp_path), *args]
    )

    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == message
    assert list(tmp_path.iterdir()) == []


def test_cli_train_gpus_without_a_visible_gpu_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpus, "visible_gpus", lambda _listed: ())

    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--profile",
            "smoke",
            "--device",
            "auto",
            "--store",
            str(tmp_path),
            "--gpus",
            "1",
        ],
    )

    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: --gpus 1: 0 GPUs are visible to this process (CUDA_VISIBLE_DEVICES, "
        "nvidia-smi -L); leave out --gpus."
    )
