"""Loader fixtures, and the `gpu` marker: GPU tests skip cleanly without CuPy or a device."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxstore.config import BarConfig, IngestConfig
from tests.conftest import SynthMarket
from tests.train._fxcache import Fxcache, write_fxcache

_HERE = Path(__file__).resolve().parent


def _cuda_missing() -> str | None:
    """Why GPU tests cannot run here, or None when they can."""
    try:
        import cupy
    except ImportError:
        return "needs CuPy"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as err:
        return f"needs a CUDA device ({err})"
    return None if count > 0 else "needs a CUDA device"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [i for i in items if "gpu" in i.keywords and _HERE in i.path.parents]
    reason = _cuda_missing() if gpu_items else None
    if reason is not None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def cache(tmp_path: Path) -> Fxcache:
    """Three monthly shards of 500 rows (Jan-Mar 2024), 5 features, 2 targets."""
    return write_fxcache(tmp_path)


@pytest.fixture(scope="session")
def store(two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real fxcache: the two-roll synthetic market, ingested and precomputed (read-only)."""
    from fxstore.config import FeatureConfig
    from fxstore.features.precompute import precompute
    from fxstore.ingest.run.pipeline import ingest

    root = tmp_path_factory.mktemp("backtest_store")
    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20), workers=1)
    ingest(config, [two_roll_market.folder], root)
    precompute(FeatureConfig(), root)
    return root
