"""bench/diag_positions.py: how a run's policies held their positions over its test windows."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytestmark = pytest.mark.quick


@pytest.fixture()
def diag(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("diag_positions")


def _fold(path: Path, **positions: list[float]) -> None:
    path.mkdir(parents=True)
    np.savez(
        path / "results.npz",
        **{f"{p}/positions": np.asarray(v, np.float32) for p, v in positions.items()},
        **{f"{p}/pnl": np.zeros(len(v), np.float32) for p, v in positions.items()},
    )


def test_folds_join_in_order_and_policies_compare(diag: ModuleType, tmp_path: Path) -> None:
    _fold(tmp_path / "fold01", agent=[0, 0, -1, -1], linear=[1, 1, -1, -1], flat=[0, 0, 0, 0])
    _fold(tmp_path / "fold00", agent=[1, 1, 1, 1], linear=[1, 1, 1, -1], flat=[0, 0, 0, 0])
    pos = diag.positions(tmp_path)
    assert pos["agent"].tolist() == [1, 1, 1, 1, 0, 0, -1, -1]  # fold00 first
    d = diag.describe(pos)
    assert set(d) == {"agent", "linear"}  # only the policies it reports
    assert d["agent"]["bars_per_change"] == 8 / 2
    assert d["agent"]["mean_abs_position"] == 0.75
    assert d["linear"]["corr_linear"] == pytest.approx(1.0)
    expected = np.corrcoef(pos["agent"], pos["linear"])[0, 1]
    assert d["agent"]["corr_linear"] == pytest.approx(expected)


def test_a_policy_that_never_moves_has_no_correlation(diag: ModuleType, tmp_path: Path) -> None:
    _fold(tmp_path / "fold00", agent=[1, 1, 1], linear=[1, -1, 1])
    d = diag.describe(diag.positions(tmp_path))
    assert math.isinf(d["agent"]["bars_per_change"])
    assert math.isnan(d["agent"]["corr_linear"])


def test_a_folder_without_folds_is_refused(diag: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no fold"):
        diag.positions(tmp_path)


def test_a_pool_averages_the_agents_correlations_over_its_runs(diag: ModuleType) -> None:
    nan = float("nan")
    runs = {
        "w1/a": {"agent": {"corr_linear": 0.2}, "ensemble": {"corr_linear": 0.4}},
        "w1/b": {"agent-s1": {"corr_linear": 0.6}, "linear": {"corr_linear": 1.0}},
        "w1/c": {"agent": {"corr_linear": nan, "corr_oracle": 0.1}},
    }

    pool = diag.pooled(runs)

    assert pool["agents"] == 4  # linear is no agent
    assert pool["corr_linear"] == pytest.approx(0.4)  # the NaN one left out
    assert pool["corr_oracle"] == pytest.approx(0.1)
    assert math.isnan(pool["corr_ceiling"])
    assert pool["runs"] == ["w1/a", "w1/b", "w1/c"]
