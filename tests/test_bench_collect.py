"""bench/collect_runs.py: runs' totals pooled over markets, seeds and shares of the ceiling."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.quick


@pytest.fixture()
def collect(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("collect_runs")


def _metrics(pnl: dict[str, float], days: int = 20) -> dict[str, Any]:
    totals = {
        p: {
            "total_pnl": v,
            "n_trades": 3,
            "n_days": days,
            "sharpe_daily": 0.1,
            "pnl_per_day": v / days,
        }
        for p, v in pnl.items()
    }
    significance = [
        {"policy": p, "psr_p_value": 0.4, "dsr_p_value": 0.9, "n_trials": 7}
        for p in ("agent", "ensemble")
    ]
    return {"folds": [{}, {}], "totals": totals, "significance": significance}


def test_one_run_keeps_its_seeds_and_shares(collect: ModuleType) -> None:
    run = collect.summarise(
        _metrics({"agent": 100.0, "agent-s1": 300.0, "ensemble": 50.0, "ceiling": 400.0})
    )
    assert run["n_folds"] == 2
    assert run["seeds_pnl_mean_std"] == [200.0, pytest.approx(math.sqrt(20000.0))]
    assert run["share_of_ceiling"] == {"agent": 0.25, "agent-s1": 0.75, "ensemble": 0.125}
    assert run["significance"]["ensemble"] == {"psr_p": 0.4, "dsr_p": 0.9, "n_trials": 7}


def test_folds_traded_once_are_counted_per_agent(collect: ModuleType) -> None:
    metrics = _metrics({"agent": 100.0, "agent-s1": 300.0, "ensemble": 50.0, "ceiling": 400.0})
    trades = [{"agent": 1, "agent-s1": 0, "ensemble": 1, "linear": 1}, {"agent": 1, "agent-s1": 7}]
    metrics["folds"] = [{"policies": {p: {"n_trades": n} for p, n in t.items()}} for t in trades]

    run = collect.summarise(metrics)

    assert run["folds_with_one_trade"] == {"agent": 2, "agent-s1": 0, "ensemble": 1}
    assert collect.summarise(_metrics({"agent": 1.0}))["folds_with_one_trade"] == {}


def test_a_losing_ceiling_gives_no_share(collect: ModuleType) -> None:
    run = collect.summarise(_metrics({"agent": 100.0, "ceiling": -10.0}))
    assert math.isnan(run["share_of_ceiling"]["agent"])
    assert math.isnan(run["seeds_pnl_mean_std"][1])  # one seed has no spread


def test_pooling_adds_each_seed_over_markets_before_the_spread(collect: ModuleType) -> None:
    a = collect.summarise(
        _metrics({"agent": 100.0, "agent-s1": -100.0, "ceiling": 100.0, "linear": 5.0}, 20)
    )
    b = collect.summarise(
        _metrics({"agent": -100.0, "agent-s1": 100.0, "ceiling": 300.0, "oracle": 9.0}, 40)
    )
    pooled = collect.pooled({"x": a, "y": b})
    assert pooled["n_days"] == 60
    assert pooled["pnl"] == {"agent": 0.0, "agent-s1": 0.0, "ceiling": 400.0}
    assert pooled["pnl_per_day"] == {"agent": 0.0, "agent-s1": 0.0, "ceiling": 400.0 / 60}
    # each seed pooled to 0: no spread, although every run on its own had one
    assert pooled["seeds_pnl_mean_std"] == [0.0, 0.0]
    assert pooled["seeds_share_of_ceiling"] == 0.0
    assert "linear" not in pooled["share_of_ceiling"]  # only policies every run has


def test_a_bench_result_gives_its_runs_and_machine(collect: ModuleType, tmp_path: Path) -> None:
    metrics = _metrics({"agent": 10.0, "agent-s1": 30.0, "ceiling": 40.0})
    run = {"n_folds": 9, "totals": metrics["totals"], "significance": metrics["significance"]}
    path = tmp_path / "learn.json"
    path.write_text(json.dumps({"machine": {"hostname_kind": "box"}, "runs": {"m": run}}))
    runs = collect._from_bench(path)
    assert runs["m"]["machine"] == "box"
    assert runs["m"]["n_folds"] == 9
    assert runs["m"]["seeds_pnl_mean_std"][0] == 20.0
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(SystemExit, match="cannot read the runs of"):
        collect._from_bench(tmp_path / "bad.json")
