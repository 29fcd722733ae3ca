"""A fold's seeds trained side by side (``concurrent_seeds``): the same run as one after
another, a stop that saves every seed's checkpoint, and the driver's order and errors."""

from __future__ import annotations

import dataclasses
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fxstore.config import TrainConfig
from fxstore.errors import InvalidInputError, RunInterruptedError
from fxstore.train.loop import FoldSteps, KeptValues, Progress, _side_by_side, train
from fxstore.train.runs.status import StopRequest
from tests.train._tiny import TINY, assert_same_run

pytestmark = pytest.mark.quick

SEEDS = dataclasses.replace(TINY, seeds=3, ensemble=True, no_trade_bands=(0.0, 0.5))


def _same_folds(a: Path, b: Path) -> None:
    """:func:`assert_same_run`, every seed's evaluations included."""
    assert_same_run(a, b)
    assert (b / "fold00" / "evals-seed2.json").is_file()


def assert_side_by_side_is_serial(config: TrainConfig, store: Path) -> None:
    """`config` (several seeds) trained with its seeds side by side gives the run of its
    seeds one after another."""
    serial = train(config, store)
    side = train(dataclasses.replace(config, concurrent_seeds=True), store)

    _same_folds(serial.run_dir, side.run_dir)
    assert json.loads((side.run_dir / "config.json").read_text())["config"]["concurrent_seeds"]


def assert_a_stop_saves_every_seed(config: TrainConfig, store: Path) -> None:
    """Stopped in its second fold at step 100, a side-by-side run of `config` has saved every
    seed's checkpoint there, and resumed it gives the uninterrupted run."""
    config = dataclasses.replace(config, concurrent_seeds=True, checkpoint_every=0)
    whole = train(config, store)
    stop = StopRequest()

    def stop_in_the_second_fold(report: Progress) -> None:
        if report.fold == 1 and report.step == 100:
            stop.request(signal.SIGINT)

    with pytest.raises(RunInterruptedError) as err:
        train(config, store, stop=stop, on_progress=stop_in_the_second_fold)
    fold = store / "runs" / err.value.run_id / "fold01"
    names = ("checkpoint.npz", "checkpoint-seed1.npz", "checkpoint-seed2.npz")
    assert all((fold / name).is_file() for name in names)

    resumed = train(config, store, resume=err.value.run_id)

    _same_folds(whole.run_dir, resumed.run_dir)


def test_seeds_side_by_side_give_the_run_of_seeds_one_after_another(store: Path) -> None:
    assert_side_by_side_is_serial(SEEDS, store)


def test_a_stop_saves_every_seeds_checkpoint_and_resumes_to_the_same_run(store: Path) -> None:
    assert_a_stop_saves_every_seed(SEEDS, store)


def test_seeds_side_by_side_step_in_turn(store: Path) -> None:
    """Each seed reports its steps while the others are still at theirs (one after another,
    every report of seed 0 would come before seed 1's first)."""
    seen: list[tuple[int, int]] = []
    config = dataclasses.replace(SEEDS, concurrent_seeds=True, max_folds=1)

    train(config, store, on_progress=lambda r: seen.append((r.seed, r.step)))

    firsts = {seed: seen.index(next(s for s in seen if s[0] == seed)) for seed in range(3)}
    last_of_seed0 = max(i for i, s in enumerate(seen) if s[0] == 0)
    assert max(firsts.values()) < last_of_seed0


def _steps(name: str, n: int, log: list[str], fail: BaseException | None = None) -> Iterator[None]:
    for step in range(n):
        log.append(f"{name}{step}")
        if fail is not None and step == 1:
            raise fail
        yield
    return KeptValues(np.zeros(0, np.float32), np.zeros(0, np.float32), np.zeros(0, np.float32), n)


def test_the_driver_steps_each_seed_in_turn_and_keeps_the_seed_order() -> None:
    log: list[str] = []
    runs: list[FoldSteps] = [_steps("a", 3, log), _steps("b", 1, log), _steps("c", 2, log)]  # type: ignore[list-item]

    kept = _side_by_side(runs, np)

    assert [k.band if k else None for k in kept] == [3, 1, 2]
    assert log == ["a0", "b0", "c0", "a1", "c1", "a2"]


def test_a_stop_lets_every_seed_reach_its_stop_and_raises_the_first_seeds() -> None:
    log: list[str] = []
    first, second = (
        RunInterruptedError("seed 1", run_id="r", signum=2),
        RunInterruptedError("seed 2", run_id="r", signum=2),
    )
    runs = [_steps("a", 5, log), _steps("b", 5, log, first), _steps("c", 5, log, second)]

    with pytest.raises(RunInterruptedError) as err:
        _side_by_side(runs, np)  # type: ignore[arg-type]

    assert err.value is first
    assert log == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "a3", "a4"]


def test_any_other_error_ends_every_seed_at_once() -> None:
    log: list[str] = []
    bad = InvalidInputError("seed 0 failed")
    runs = [_steps("a", 5, log, bad), _steps("b", 5, log), _steps("c", 5, log)]

    with pytest.raises(InvalidInputError) as err:
        _side_by_side(runs, np)  # type: ignore[arg-type]

    assert err.value is bad
    assert log == ["a0", "b0", "c0", "a1"]
    assert all(r.gi_frame is None for r in runs)  # type: ignore[attr-defined]  # closed
