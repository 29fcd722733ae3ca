"""Shared fixtures: small synthetic markets spanning two quarterly rolls (made once per session),
and the benchmark scripts of bench/ as modules."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pytest

from fxstore.config import SynthConfig

if TYPE_CHECKING:
    from fxstore.synth import SynthSummary

# The ingest stack (numba, zstandard) is imported inside the fixtures, so that the GPU
# tests can run on a machine that has only CuPy, numpy and pyarrow.

#: The benchmark scripts' folder.
BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture()
def bench_script(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """Import ``bench/<name>.py`` afresh, with bench/ on the path for its own imports."""
    monkeypatch.syspath_prepend(str(BENCH))

    def load(name: str) -> ModuleType:
        sys.modules.pop(name, None)
        return importlib.import_module(name)

    return load


#: Two quarterly rolls: March 2024 (roll date Mon 03-11) and June 2024 (roll date Mon 06-17).
TWO_ROLLS = SynthConfig(
    start=dt.date(2024, 2, 26), end=dt.date(2024, 6, 28), events_per_day=3_000, seed=5
)


@dataclass(frozen=True)
class SynthMarket:
    """A generated market: its folder, files and what the generator says it traded."""

    folder: Path
    summary: SynthSummary


def write_single_file(folder: Path, out: Path) -> Path:
    """Concatenate every DBN file of `folder` into one .dbn.zst (metadata mappings merged)."""
    import zstandard

    from fxstore.ingest.dbn.format import encode_metadata
    from fxstore.ingest.dbn.reader import open_dbn

    source = open_dbn([folder])
    metas = [f.metadata for f in source.files]
    mappings = sorted(
        {m for meta in metas for m in meta.mappings},
        key=lambda m: (m.raw_symbol, m.start_date),
    )
    meta = dataclasses.replace(
        metas[0],
        start=min(m.start for m in metas),
        end=max(m.end or 0 for m in metas),
        mappings=tuple(mappings),
    )
    records = np.concatenate([c.records for c in source.iter_chunks()])
    out.write_bytes(zstandard.ZstdCompressor().compress(encode_metadata(meta) + records.tobytes()))
    return out


@pytest.fixture(scope="session")
def two_roll_market(tmp_path_factory: pytest.TempPathFactory) -> SynthMarket:
    """ES from 2024-02-26 to 2024-06-28, one file per trading day."""
    from fxstore.synth import generate_market

    folder = tmp_path_factory.mktemp("two_rolls")
    return SynthMarket(folder, generate_market(TWO_ROLLS, folder))


@pytest.fixture(scope="session")
def two_roll_market_utc(tmp_path_factory: pytest.TempPathFactory) -> SynthMarket:
    """The same market split into UTC-day files, as Databento batch downloads are."""
    from fxstore.synth import generate_market

    folder = tmp_path_factory.mktemp("two_rolls_utc")
    config = dataclasses.replace(TWO_ROLLS, split="utc-day")
    return SynthMarket(folder, generate_market(config, folder))


@pytest.fixture(scope="session")
def two_roll_single_file(
    tmp_path_factory: pytest.TempPathFactory, two_roll_market: SynthMarket
) -> Path:
    """The same market as one .dbn.zst file."""
    folder = tmp_path_factory.mktemp("two_rolls_single")
    return write_single_file(two_roll_market.folder, folder / "es-fut.mbp-10.dbn.zst")
