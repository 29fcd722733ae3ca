"""Runs you can find, interrupt and resume: status.json, the lock, SIGINT, `fxstore runs`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import numpy as np
import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config import BacktestConfig, TrainConfig
from fxstore.errors import InvalidInputError, RunBusyError
from fxstore.train.loop import train
from fxstore.train.profiles import load_profile
from fxstore.train.runs.backtest import run_backtest
from fxstore.train.runs.status import RunLock, read_status
from tests.train._tiny import TINY

_BACKTEST = BacktestConfig(env=TINY.env, walkforward=TINY.walkforward, plots=False)

#: TINY (tests/train/_tiny.py) as a profile file, so a subprocess can train it.
_PROFILE = """\
device = "cpu"
n_envs = 8
batch_size = 32
replay_size = 2000
episode_bars = 60
env_steps = {env_steps}
learn_start = 64
eval_every = 40
patience = 0
checkpoint_every = 50
max_folds = 2

[env]
positions = [-1, 0, 1]

[agent]
hidden = 16
n_atoms = 11
v_min = -5.0
v_max = 5.0
gamma = 0.9
lr = 1e-3

[walkforward]
train_days = 20
test_days = 10
validation_fraction = 0.2
"""


@pytest.fixture
def root(store: Path, tmp_path: Path) -> Path:
    """A private copy of the store, without runs."""
    copy = tmp_path / "store"
    shutil.copytree(store, copy, ignore=shutil.ignore_patterns("runs"))
    return copy


def _profile(tmp_path: Path, env_steps: int = 40) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(_PROFILE.format(env_steps=env_steps))
    return path


def _results(run_dir: Path, fold: int) -> dict[str, np.ndarray]:
    with np.load(run_dir / f"fold{fold:02d}" / "results.npz") as data:
        return {k: data[k] for k in data.files}


def test_train_sigint_saves_checkpoint_and_resume_equals_uninterrupted(
    root: Path, tmp_path: Path
) -> None:
    profile = _profile(tmp_path, env_steps=400)
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    args = [sys.executable, "-m", "fxstore", "train", "--store", str(root)]
    proc = subprocess.Popen(
        [*args, "--profile", str(profile), "-q"], stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("fxcache ES.FUT/")  # the cache it reads
    first = proc.stderr.readline()
    run_id = first.split()[1].rstrip(";")
    assert first == f"run {run_id}; to resume it: fxstore train --resume {run_id} --store {root}\n"
    deadline = time.monotonic() + 60
    while not (root / "runs" / run_id / "fold00").is_dir() and time.monotonic() < deadline:
        time.sleep(0.01)

    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)

    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"Interrupted: run {run_id!r} stopped on SIGINT at ")
    assert last.endswith(f"to resume it: fxstore train --resume {run_id} --store {root}")
    run_dir = root / "runs" / run_id
    assert read_status(run_dir).state == "interrupted"  # type: ignore[union-attr]
    assert list(run_dir.glob("fold*/checkpoint.npz")) or (run_dir / "fold00/results.npz").exists()

    resumed = train(TrainConfig(), root, resume=run_id)
    whole = train(load_profile(str(profile)), root)

    assert read_status(run_dir).state == "complete"  # type: ignore[union-attr]
    for fold in (0, 1):
        a, b = _results(resumed.run_dir, fold), _results(whole.run_dir, fold)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_train_status_is_complete_and_runs_show_prints_the_same_table(
    root: Path, tmp_path: Path
) -> None:
    args = ["train", "--store", str(root), "--profile", str(_profile(tmp_path)), "-q"]
    trained = CliRunner().invoke(cli, args, catch_exceptions=False)
    *table, folder_line, report_line = trained.stdout.splitlines()
    run_id = folder_line.rsplit("/", 1)[1]
    assert report_line == f"its report: fxstore report {run_id} --store {root}"

    shown = CliRunner().invoke(cli, ["runs", "show", run_id, "--store", str(root)])
    listed = CliRunner().invoke(cli, ["runs", "--store", str(root), "--json"])

    assert trained.exit_code == 0 and shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[:-1] == table
    assert shown.output.splitlines()[-1].startswith("complete: 2/2 folds; run folder: ")
    (entry,) = json.loads(listed.output)
    assert (entry["run_id"], entry["kind"], entry["state"]) == (run_id, "train", "complete")
    assert (entry["folds_done"], entry["n_folds"], entry["profile"]) == (2, 2, "tiny")
    assert entry["headline"]["policy"] == "agent"


def test_runs_lists_a_dead_running_run_as_interrupted(root: Path) -> None:
    result = run_backtest(_BACKTEST, root)
    status = json.loads((result.run_dir / "status.json").read_text())
    status["state"] = "running"  # as a killed process leaves it; nobody holds the lock
    (result.run_dir / "status.json").write_text(json.dumps(status))

    out = CliRunner().invoke(cli, ["runs", "--store", str(root)], catch_exceptions=False)

    row = out.output.splitlines()[2].split()
    assert row[:2] == [result.run_dir.name, "backtest"] and row[4] == "interrupted"


def test_resume_backtest_run_says_it_is_not_a_training_run(root: Path) -> None:
    run_id = run_backtest(_BACKTEST, root).run_dir.name

    result = CliRunner().invoke(cli, ["train", "--store", str(root), "--resume", run_id])

    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"Error: run {run_id!r} is a backtest run, not a training run: only `fxstore train` "
        f"runs resume; `fxstore runs show {run_id}` prints its table."
    )


def test_resume_with_another_profile_is_refused(root: Path, tmp_path: Path) -> None:
    run_id = train(load_profile(str(_profile(tmp_path))), root).run_dir.name
    args = ["train", "--store", str(root), "--resume", run_id, "--profile", "smoke"]

    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"Error: run {run_id!r} was trained with profile 'tiny', not 'smoke': a resumed run "
        "keeps its own settings, so drop --profile (or start a new run without --resume)."
    )


def test_resume_run_held_by_a_live_process_is_refused(root: Path, tmp_path: Path) -> None:
    run_dir = train(load_profile(str(_profile(tmp_path))), root).run_dir
    lock = RunLock(run_dir)
    lock.acquire()
    try:
        with pytest.raises(RunBusyError, match=r"is being written by a live process \(pid \d+\)"):
            train(TrainConfig(), root, resume=run_dir.name)
    finally:
        lock.release()


def test_resume_run_with_no_checkpoint_and_no_fold_says_so(root: Path, tmp_path: Path) -> None:
    run_dir = train(load_profile(str(_profile(tmp_path))), root).run_dir
    for path in run_dir.glob("fold*/results.npz"):
        path.unlink()  # as a run killed before its first checkpoint leaves it

    with pytest.raises(InvalidInputError, match=r"has no checkpoint and no finished fold in "):
        train(TrainConfig(), root, resume=run_dir.name)


def test_train_failing_before_its_first_fold_leaves_no_folder(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fxstore.train import loop

    def fail(*_args: object, **_kwargs: object) -> list[object]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(loop, "baseline_results", fail)

    with pytest.raises(OSError, match="No space left"):
        train(load_profile(str(_profile(tmp_path))), root)

    assert not (root / "runs").exists() or not any((root / "runs").iterdir())


def test_backtest_and_train_of_one_profile_give_the_same_baselines(
    root: Path, tmp_path: Path
) -> None:
    profile = str(_profile(tmp_path))
    common = ["--store", str(root), "--profile", profile, "--json", "-q"]

    trained = CliRunner().invoke(cli, ["train", *common], catch_exceptions=False)
    tested = CliRunner().invoke(cli, ["backtest", *common, "--no-plots"], catch_exceptions=False)

    def by_fold(output: str) -> dict[int, dict[str, object]]:
        return {f["fold"]["index"]: f["policies"] for f in json.loads(output)["folds"]}

    mine, theirs = by_fold(trained.stdout), by_fold(tested.stdout)
    assert sorted(mine) == [0, 1]
    for fold, policies in mine.items():
        for policy in ("flat", "long", "random", "ofi-sign", "linear"):
            assert policies[policy] == theirs[fold][policy], (fold, policy)


def _train_subprocess(
    root: Path, profile: Path, *, slow_update_s: float = 0.0, mark: Path | None = None
) -> subprocess.Popen[str]:
    """`fxstore train` in a child process; each learner update first touches `mark` (if
    given), then sleeps `slow_update_s`."""
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    touch = f"    pathlib.Path({str(mark)!r}).touch()\n" if mark is not None else ""
    code = (
        "import pathlib, sys, time\n"
        "import fxstore.train.agent.dqn as a\n"
        "update = a.Agent.update_async\n"
        f"def slow(self, batch):\n{touch}    time.sleep({slow_update_s})\n"
        "    return update(self, batch)\n"
        "a.Agent.update_async = slow\n"
        "from fxstore.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    args = ["train", "--store", str(root), "--profile", str(profile), "-q"]
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stderr=subprocess.PIPE, text=True, env=env
    )


def _announced_run_id(stderr: IO[str]) -> str:
    """The run id train prints on stderr after the line naming the fxcache it reads."""
    assert stderr.readline().startswith("fxcache ES.FUT/")
    return stderr.readline().split()[1].rstrip(";")


def _wait_for_fold_folder(root: Path, run_id: str) -> None:
    deadline = time.monotonic() + 60
    while not (root / "runs" / run_id / "fold00").is_dir() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_train_sigterm_stops_at_a_safe_point_and_exits_143(root: Path, tmp_path: Path) -> None:
    proc = _train_subprocess(root, _profile(tmp_path, env_steps=400))
    assert proc.stderr is not None
    run_id = _announced_run_id(proc.stderr)
    _wait_for_fold_folder(root, run_id)

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)

    assert proc.returncode == 143, err
    assert "SIGTERM: stopping at the next safe point" in err
    assert (
        err.strip().splitlines()[-1].startswith(f"Interrupted: run {run_id!r} stopped on SIGTERM")
    )
    assert read_status(root / "runs" / run_id).state == "interrupted"  # type: ignore[union-attr]


def test_train_second_sigint_stops_at_once(root: Path, tmp_path: Path) -> None:
    # Each update sleeps 6 s, so the first Ctrl-C's safe point (the end of the step in
    # progress) is seconds away; the second one must not wait for it.
    mark = tmp_path / "learning"
    proc = _train_subprocess(root, _profile(tmp_path, env_steps=400), slow_update_s=6.0, mark=mark)
    assert proc.stderr is not None
    run_id = _announced_run_id(proc.stderr)
    deadline = time.monotonic() + 120
    while not mark.exists() and time.monotonic() < deadline:  # inside the first update
        time.sleep(0.01)

    proc.send_signal(signal.SIGINT)
    assert "SIGINT: stopping at the next safe point" in proc.stderr.readline() + (
        proc.stderr.readline()
    )
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)

    assert proc.returncode == 130, err
    assert time.monotonic() - sent < 3.0, err  # did not sit out the 6 s update
    # Stopped inside the first update, before the first checkpoint: nothing to resume.
    assert err.strip().splitlines()[-1] == (
        "Stopped at once: no run was kept (it had no checkpoint yet)."
    ), err
    assert not (root / "runs" / run_id).exists()
