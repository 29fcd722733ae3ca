"""``train --gpus`` on real GPUs: one GPU is the serial loop, and GPU workers give the serial
run's folder (two workers on one GPU where only one is visible: a context and a pinned
fxcache registration each, next to the driver's).

Every test here needs CuPy and a CUDA device; tests/train/conftest.py skips them otherwise.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore import gpus
from fxstore.cli import cli
from fxstore.train.loop import train
from tests.train._tiny import TINY, assert_same_run

pytestmark = pytest.mark.gpu

GPU = dataclasses.replace(TINY, device="cuda", batch_size=64, max_folds=3)


def test_cli_train_gpus_1_on_a_gpu_trains_fold_after_fold(store: Path) -> None:
    args = ["--profile", "smoke", "--max-folds", "1", "--device", "cuda", "--store", str(store)]

    result = CliRunner().invoke(
        cli, ["train", *args, "--gpus", "1", "-q", "--json"], catch_exceptions=False
    )

    assert result.exit_code == 0, result.output


def test_train_on_gpu_workers_gives_the_serial_run_folder(store: Path) -> None:
    visible = gpus.visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"))
    devices = visible[:2] if len(visible) >= 2 else (visible[0], visible[0])
    serial = train(GPU, store)

    on_workers = train(GPU, store, gpus=devices)

    assert_same_run(serial.run_dir, on_workers.run_dir)
