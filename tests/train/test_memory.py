"""The host-memory check before training: seeds side by side hold their arrays at once."""

from __future__ import annotations

import dataclasses

import pytest

from fxstore.errors import InvalidInputError
from fxstore.train.agent import memory
from tests.train._tiny import TINY

pytestmark = pytest.mark.quick

SIZES = {"n_envs": 64, "batch_size": 256, "replay_size": 1_000_000}


def test_seeds_side_by_side_need_each_seeds_arrays_at_once() -> None:
    one = memory.host_bytes_needed(dataclasses.replace(TINY, seeds=3), SIZES, 52, 5)
    side = dataclasses.replace(TINY, seeds=3, concurrent_seeds=True)

    assert memory.host_bytes_needed(side, SIZES, 52, 5) == {k: 3 * v for k, v in one.items()}
    assert memory.host_bytes_needed(TINY, SIZES, 52, 5) == one  # one seed: as one at a time


def test_memory_for_one_seed_but_not_three_side_by_side_says_how_to_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = sum(memory.host_bytes_needed(TINY, SIZES, 52, 5).values())
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 2 * one)
    memory.check_host_memory(dataclasses.replace(TINY, seeds=3), SIZES, 52, 5)

    with pytest.raises(InvalidInputError) as err:
        memory.check_host_memory(
            dataclasses.replace(TINY, seeds=3, concurrent_seeds=True), SIZES, 52, 5
        )

    message = str(err.value)
    assert message.startswith("`replay_size` 1000000 needs about ")
    assert "for the whole run, 3 seeds side by side), more than the " in message
    assert message.endswith(
        "lower --replay-size or train the seeds one after another (--no-concurrent-seeds)."
    )
