"""A finished store (bars + fxcache of the two-roll market), built once, for the fault tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fxstore.config import BarConfig, IngestConfig
from tests.conftest import SynthMarket

#: The ingest every fault test builds and re-builds (one process: workers=1), as the CLI's
#: ``--target-bars-per-day 20 --workers 1`` builds it (a float: the same fingerprint).
INGEST = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20.0), workers=1)


@pytest.fixture(scope="session")
def clean_store(two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Bars and fxcache of the two-roll market, written without any fault (never modify it)."""
    from fxstore.config import FeatureConfig
    from fxstore.features.precompute import precompute
    from fxstore.ingest.run.pipeline import ingest

    root = tmp_path_factory.mktemp("clean_store")
    ingest(INGEST, [two_roll_market.folder], root)
    precompute(FeatureConfig(), root)
    return root


@pytest.fixture
def store_copy(clean_store: Path, tmp_path: Path) -> Path:
    """A private copy of the clean store, to damage."""
    root = tmp_path / "store"
    shutil.copytree(clean_store, root)
    return root
