from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config import BarConfig, IngestConfig
from fxstore.config.executor import ExecutorConfig
from fxstore.errors import SchemaError
from fxstore.ingest.run.manifest import IngestSummary
from fxstore.ingest.run.pipeline import ingest
from tests.conftest import SynthMarket
from tests.ray.conftest import digests

pytestmark = pytest.mark.usefixtures("ray_cluster")

FRONT = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20))
RAY = ExecutorConfig("ray")


@pytest.fixture(scope="module")
def one_core(
    two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory
) -> IngestSummary:
    return ingest(FRONT, [two_roll_market.folder], tmp_path_factory.mktemp("store"))


def _manifest_days(summary: IngestSummary) -> list[object]:
    return list(json.loads((summary.out_dir / "manifest.json").read_text())["days"])


@pytest.mark.parametrize("workers", [2, 0])
def test_ingest_on_ray_is_byte_identical_to_one_core(
    workers: int, one_core: IngestSummary, two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    config = dataclasses.replace(FRONT, workers=workers, executor=RAY)

    summary = ingest(config, [two_roll_market.folder], tmp_path)

    assert digests(summary.out_dir) == digests(one_core.out_dir)
    assert _manifest_days(summary) == _manifest_days(one_core)
    assert summary.schedule == one_core.schedule


def test_ingest_on_ray_splits_utc_day_files_by_trading_day_byte_identically(
    one_core: IngestSummary, two_roll_market_utc: SynthMarket, tmp_path: Path
) -> None:
    # 8 tasks at once for one chain of files: split by trading day (resplit), on Ray.
    config = dataclasses.replace(FRONT, workers=8, executor=RAY)

    summary = ingest(config, [two_roll_market_utc.folder], tmp_path)

    assert digests(summary.out_dir) == digests(one_core.out_dir)


def _corrupt_copy(market: SynthMarket, where: Path) -> Path:
    """The market with one day file damaged past its first records (met by a worker)."""
    folder = where / "market"
    shutil.copytree(market.folder, folder)
    victim = sorted(folder.glob("*.mbp-10.dbn.zst"))[10]
    data = bytearray(victim.read_bytes())
    data[len(data) - 200] ^= 0xFF
    victim.write_bytes(bytes(data))
    return folder


def test_ingest_task_error_on_ray_is_the_local_pools_error(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    folder = _corrupt_copy(two_roll_market, tmp_path)
    local = dataclasses.replace(FRONT, workers=2)
    with pytest.raises(SchemaError) as in_pool:
        ingest(local, [folder], tmp_path / "a")

    with pytest.raises(SchemaError) as on_ray:
        ingest(dataclasses.replace(local, executor=RAY), [folder], tmp_path / "b")

    assert str(on_ray.value) == str(in_pool.value)
    assert "the Zstandard data is corrupt" in str(on_ray.value)
    assert ".mbp-10.dbn.zst" in str(on_ray.value)


def test_cli_ingest_executor_ray_prints_one_error_line_for_a_task_error(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    folder = _corrupt_copy(two_roll_market, tmp_path)
    args = [str(folder), "--target-bars-per-day", "20", "--store", str(tmp_path / "s"), "-q"]

    result = CliRunner().invoke(cli, ["ingest", *args, "--executor", "ray", "--workers", "2"])

    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "the Zstandard data is corrupt" in lines[0]


def test_cli_ingest_executor_ray_writes_what_the_local_pool_writes(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    args = [str(two_roll_market.folder), "--target-bars-per-day", "20", "-q"]
    outs = []
    for executor in ("local", "ray"):
        store = tmp_path / executor
        result = CliRunner().invoke(
            cli,
            ["ingest", *args, "--store", str(store), "--executor", executor, "--workers", "2"],
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output
        outs.append(next(store.glob("bars/ES.FUT/mbp10_front_month/*/v0001")))

    assert digests(outs[1]) == digests(outs[0])
    assert (outs[1] / "manifest.json").read_bytes() == (outs[0] / "manifest.json").read_bytes()


def test_cli_ray_address_without_executor_ray_is_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["ingest", str(tmp_path), "--ray-address", "auto", "--store", str(tmp_path)]
    )

    assert result.exit_code == 1
    assert result.output == (
        "Error: `ray_address` ('auto') needs the Ray executor: add --executor ray.\n"
    )


def test_precompute_on_ray_writes_the_same_fxcache(one_core: IngestSummary) -> None:
    from fxstore.config import FeatureConfig
    from fxstore.features.precompute import precompute

    root = one_core.out_dir.parents[4]
    local = precompute(FeatureConfig(), root)
    files = {p.name: p.read_bytes() for p in local.out_dir.iterdir() if p.suffix != ".lock"}

    on_ray = precompute(FeatureConfig(force=True, executor=RAY), root)

    assert on_ray.out_dir == local.out_dir
    assert {p.name: p.read_bytes() for p in on_ray.out_dir.iterdir() if p.name in files} == files
