"""Every profile under bench/profiles loads: the recorded results name them in their
commands, so one a config change breaks would make those commands fail as written."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import BENCH

pytestmark = pytest.mark.quick

PROFILES = sorted((BENCH / "profiles").glob("*.toml"))


def test_the_bench_has_profiles() -> None:
    assert len(PROFILES) > 10


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_a_bench_profile_loads(path: Path, bench_script: Callable[[str], ModuleType]) -> None:
    config = bench_script("_common").profile_config(str(path))
    assert config.profile == path.stem


def test_the_expected_move_profile_differs_from_its_base_in_the_reward_alone(
    bench_script: Callable[[str], ModuleType],
) -> None:
    common = bench_script("_common")
    base = common.profile_config(str(BENCH / "profiles/learn_gpu_forecast_small_side.toml"))
    reward = common.profile_config(
        str(BENCH / "profiles/learn_gpu_forecast_small_side_reward.toml")
    )
    assert reward.reward_forecast == 1.0 and base.reward_forecast == 0.0
    same = dataclasses.replace(reward, reward_forecast=0.0, profile=base.profile)
    assert same == base
