"""Synthetic markets shared by the synth tests (generated once per session, small sizes)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.config import SynthConfig
from fxstore.ingest.dbn.format import DbnMetadata
from fxstore.synth import SynthSummary, generate_market
from tests.synth.dbn_io import read_dbn


@dataclass(frozen=True)
class Market:
    """A generated market and its files decoded."""

    config: SynthConfig
    summary: SynthSummary
    files: list[tuple[Path, DbnMetadata, npt.NDArray[np.void]]]

    @property
    def records(self) -> npt.NDArray[np.void]:
        """All records of all files, in file order."""
        return np.concatenate([recs for _, _, recs in self.files])


def make_market(config: SynthConfig, out_dir: Path) -> Market:
    summary = generate_market(config, out_dir)
    return Market(config, summary, [(p, *read_dbn(p)) for p in summary.files])


@pytest.fixture(scope="session")
def roll_market(tmp_path_factory: pytest.TempPathFactory) -> Market:
    """ES over the March 2024 roll (roll date Mon 2024-03-11, ESH4 expiry Fri 2024-03-15)."""
    config = SynthConfig(start=dt.date(2024, 3, 1), end=dt.date(2024, 3, 22), events_per_day=5_000)
    return make_market(config, tmp_path_factory.mktemp("roll"))
