"""Bar stores for the feature tests: the two-roll synthetic market, ingested once per session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fxstore.config import BarConfig, FeatureConfig, IngestConfig
from fxstore.features.precompute import precompute
from fxstore.ingest.run.pipeline import ingest
from tests.conftest import SynthMarket

#: ~13 bars a day: 1,207 front-month bars over 90 trading days from 2024-02-26 to 2024-06-28
#: (Good Friday 2024 a short session; rolls 03-12, 06-18).
INGEST = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20))


@pytest.fixture(scope="session")
def bar_store(two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store root holding only the ingested bars (treat as read-only: copy to change)."""
    root = tmp_path_factory.mktemp("bar_store")
    ingest(INGEST, [two_roll_market.folder], root)
    return root


@pytest.fixture
def store(bar_store: Path, tmp_path: Path) -> Path:
    """A fresh copy of the bar store, without any fxcache."""
    root = tmp_path / "store"
    shutil.copytree(bar_store / "bars", root / "bars")
    return root


@pytest.fixture(scope="session")
def cached_store(bar_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with the default feature set precomputed (treat as read-only)."""
    root = tmp_path_factory.mktemp("cached_store")
    shutil.copytree(bar_store / "bars", root / "bars")
    precompute(FeatureConfig(), root)
    return root
