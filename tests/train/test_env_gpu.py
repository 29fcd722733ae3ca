"""VecEnv on CuPy: the fused step kernel against the numpy reference.

Tests marked `gpu` need CuPy and a CUDA device; tests/train/conftest.py skips them otherwise.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from fxstore.config import EnvConfig
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.env.vecenv import VecEnv
from tests.train.test_env import CHANGED, ES, random_market

N_ENVS = 300  # two full blocks of 128 envs and a partial one
WINDOW = (3, 296)


def on_cupy(market: Market) -> Market:
    """`market` with its arrays on the GPU (trading_day stays on the host)."""
    import cupy

    return Market(
        features=cupy.asarray(market.features),
        close=cupy.asarray(market.close),
        half_spread=cupy.asarray(market.half_spread),
        is_roll=cupy.asarray(market.is_roll),
        trading_day=market.trading_day,
        feature_names=market.feature_names,
        bars_per_day=market.bars_per_day,
        contract_runs=market.contract_runs,
    )


def make_pair(
    config: EnvConfig, *, seed: int = 4, spec: ContractSpec = ES
) -> tuple[VecEnv, VecEnv, ModuleType]:
    """The same env over the same market on numpy and on CuPy; rolls inside and at the edge.
    The market's contracts alternate ESH4 and ESM4 (for a `spec` that books them apart)."""
    import cupy

    rolls = (40, 41, 120, 200, 294)
    market = random_market(300, seed=5, rolls=rolls)
    runs = tuple((row, ("ESH4", "ESM4")[k % 2]) for k, row in enumerate((0, *rolls)))
    market = dataclasses.replace(market, contract_runs=runs)

    def make(m: Market) -> VecEnv:
        return VecEnv(m, config, spec, n_envs=N_ENVS, window=WINDOW, episode_bars=17, seed=seed)

    return make(market), make(on_cupy(market)), cupy


def assert_same_state(host: VecEnv, device: VecEnv) -> None:
    want, got = host.state_dict(), device.state_dict()
    assert want.keys() == got.keys()
    for name in ("t", "stop", "draws", "is_started"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    np.testing.assert_allclose(got["held"], want["held"], rtol=0, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("roll", ["roll", "close"])
@pytest.mark.parametrize("reward", ["dollars", "vol"])
@pytest.mark.parametrize("spec", [ES, CHANGED], ids=["one-spec", "per-contract"])
def test_vecenv_cupy_steps_equal_numpy_across_episode_ends_and_rolls(
    roll: str, reward: str, spec: ContractSpec
) -> None:
    config = EnvConfig(roll=roll, reward=reward, slippage_ticks=0.5, vol_window=7)  # type: ignore[arg-type]
    host, device, cupy = make_pair(config, spec=spec)
    actions = np.random.default_rng(1).integers(0, 5, (300, N_ENVS))

    np.testing.assert_array_equal(cupy.asnumpy(device.reset()), host.reset())
    n_done = 0
    for action in actions:
        want, got = host.step(action), device.step(cupy.asarray(action))
        np.testing.assert_array_equal(cupy.asnumpy(got.obs), want.obs)
        np.testing.assert_allclose(cupy.asnumpy(got.pnl), want.pnl, rtol=0, atol=1e-9)
        np.testing.assert_allclose(cupy.asnumpy(got.reward), want.reward, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(cupy.asnumpy(got.done), want.done)
        n_done += int(want.done.sum())
    assert_same_state(host, device)

    assert n_done > 5 * N_ENVS  # many episode ends (and restarts) were compared
    assert (got.obs.dtype, got.reward.dtype, got.pnl.dtype) == (np.float32, np.float32, np.float64)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_vecenv_cupy_step_other_int_actions_equal_int64(dtype: type[np.integer]) -> None:
    _, first, cupy = make_pair(EnvConfig())
    _, second, _ = make_pair(EnvConfig())
    first.reset()
    second.reset()
    actions = np.random.default_rng(2).integers(0, 5, (40, N_ENVS))

    for action in actions:
        a = first.step(cupy.asarray(action))
        b = second.step(cupy.asarray(action.astype(dtype)))

        np.testing.assert_array_equal(cupy.asnumpy(a.obs), cupy.asnumpy(b.obs))
        np.testing.assert_array_equal(cupy.asnumpy(a.pnl), cupy.asnumpy(b.pnl))


@pytest.mark.gpu
def test_vecenv_cupy_step_strided_actions_equal_contiguous() -> None:
    _, first, cupy = make_pair(EnvConfig())
    _, second, _ = make_pair(EnvConfig())
    first.reset()
    second.reset()
    table = cupy.asarray(np.random.default_rng(3).integers(0, 5, (N_ENVS, 30)))

    for i in range(30):
        a = first.step(cupy.ascontiguousarray(table[:, i]))
        b = second.step(table[:, i])

        np.testing.assert_array_equal(cupy.asnumpy(a.obs), cupy.asnumpy(b.obs))
        np.testing.assert_array_equal(cupy.asnumpy(a.pnl), cupy.asnumpy(b.pnl))


@pytest.mark.gpu
def test_vecenv_cupy_resumes_from_numpy_state_dict_and_continues_equal() -> None:
    host, device, cupy = make_pair(EnvConfig(reward="dollars"), seed=7)
    actions = np.random.default_rng(4).integers(0, 5, (80, N_ENVS))
    host.reset()
    for action in actions[:33]:
        host.step(action)

    device.load_state_dict(host.state_dict())
    for action in actions[33:]:
        want, got = host.step(action), device.step(cupy.asarray(action))

        np.testing.assert_array_equal(cupy.asnumpy(got.obs), want.obs)
        np.testing.assert_allclose(cupy.asnumpy(got.pnl), want.pnl, rtol=0, atol=1e-9)
    assert_same_state(host, device)


@pytest.mark.gpu
def test_vecenv_cupy_step_keeps_earlier_rows_unchanged() -> None:
    _, device, cupy = make_pair(EnvConfig())
    device.reset()

    rows = device.rows
    before = cupy.asnumpy(rows)
    device.step(cupy.zeros(N_ENVS, dtype=cupy.int64))

    np.testing.assert_array_equal(cupy.asnumpy(rows), before)
    assert device.rows is not rows


def test_numpy_vecenv_never_imports_the_cupy_kernels() -> None:
    code = """
import sys
import numpy as np
from fxstore.config import EnvConfig
from fxstore.train.env.vecenv import VecEnv
from tests.train.test_env import CHANGED, ES, random_market

env = VecEnv(random_market(30, seed=1), EnvConfig(), ES, n_envs=2, window=(0, 30), episode_bars=5)
env.reset()
env.step(np.zeros(2, dtype=np.int64))
print("fxstore.train.gpu.env_kernels" in sys.modules)
"""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )

    assert out.stdout.strip() == "False"


@pytest.mark.gpu
def test_vecenv_cupy_with_a_reward_close_steps_equal_numpy() -> None:
    import cupy

    config = EnvConfig(slippage_ticks=0.5, vol_window=7)
    market = random_market(300, seed=5, rolls=(40, 120))
    shaped = np.asarray(market.close) + 0.25 * np.sin(np.arange(300.0))

    def make(m: Market, close: object) -> VecEnv:
        return VecEnv(
            m,
            config,
            ES,
            n_envs=N_ENVS,
            window=WINDOW,
            episode_bars=17,
            seed=4,
            reward_close=close,  # type: ignore[arg-type]
        )

    host, device = make(market, shaped), make(on_cupy(market), cupy.asarray(shaped))
    actions = np.random.default_rng(1).integers(0, 5, (100, N_ENVS))
    np.testing.assert_array_equal(cupy.asnumpy(device.reset()), host.reset())
    for action in actions:
        want, got = host.step(action), device.step(cupy.asarray(action))
        np.testing.assert_allclose(cupy.asnumpy(got.pnl), want.pnl, rtol=0, atol=1e-9)
        np.testing.assert_allclose(cupy.asnumpy(got.reward), want.reward, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(cupy.asnumpy(got.done), want.done)
    assert_same_state(host, device)
