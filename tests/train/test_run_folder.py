"""A training run's folder: each fold's results.npz keeps the bars' close times, and folders
written before it did stay readable."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from fxstore.train.runs.folder import RunFolder
from tests.train.test_plots import results_of

pytestmark = pytest.mark.quick


def test_write_fold_then_read_fold_keeps_ts_close(tmp_path: Path) -> None:
    results = {r.policy: r for r in results_of(("agent", "flat"))}
    fold = results["agent"].fold
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()

    run.write_fold(fold, results)
    back = run.read_fold(fold, bars_per_day=20.0, capital=100_000.0, seed=0)

    assert back is not None
    for policy, result in results.items():
        assert back[policy].ts_close is not None and result.ts_close is not None
        np.testing.assert_array_equal(back[policy].ts_close, result.ts_close)
        np.testing.assert_array_equal(back[policy].pnl, result.pnl)


def test_write_fold_then_read_fold_keeps_a_references_choice(tmp_path: Path) -> None:
    agent, linear = results_of(("agent", "linear"))
    choice = {"horizon_bars": 16.0, "ridge_lambda": 0.01, "band_sd": math.inf}
    results = {"agent": agent, "linear": dataclasses.replace(linear, choice=choice)}
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()

    run.write_fold(agent.fold, results)
    back = run.read_fold(agent.fold, bars_per_day=20.0, capital=100_000.0, seed=0)
    recorded = json.loads((run.path / "fold00" / "metrics.json").read_text())

    assert back is not None
    assert back["linear"].choice == choice and back["agent"].choice is None
    assert recorded["choices"] == {"linear": {**choice, "band_sd": None}}


def test_read_fold_of_a_folder_without_ts_close_gives_none(tmp_path: Path) -> None:
    results = {r.policy: r for r in results_of(("agent",), with_ts=False)}
    fold = results["agent"].fold
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    run.write_fold(fold, results)  # as older versions wrote it: no ts_close
    with np.load(run.path / "fold00" / "results.npz") as data:
        assert "ts_close" not in data.files

    back = run.read_fold(fold, bars_per_day=20.0, capital=100_000.0, seed=0)

    assert back is not None and back["agent"].ts_close is None
    assert (run.path / "fold00" / "equity.png").is_file()


def test_read_fold_of_a_fold_not_started_gives_none_and_makes_no_folder(tmp_path: Path) -> None:
    # A run reads every fold before training; a folder made there looked like a fold in
    # progress (a Ctrl-C test waited on it and raced the run's first checkpoint).
    fold = results_of(("agent",))[0].fold
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()

    assert run.read_fold(fold, bars_per_day=20.0, capital=100_000.0, seed=0) is None
    assert list(run.path.iterdir()) == []
