"""The ingest stage: Databento DBN MBP-10 files → instrument selection → bars → Parquet.

This module is the stage's front door: it names what the other stages, the CLI and the
benchmarks may use. Behind it are four rooms, each owning one concern:

- :mod:`fxstore.ingest.dbn`: reading DBN (the format, plain and zstd files, symbology,
  the ts_recv merge of many files into bounded chunks);
- :mod:`fxstore.ingest.select`: which instrument's records become bars (traded activity
  per trading day, the causal front-month selector and its roll schedule);
- :mod:`fxstore.ingest.bars`: bar construction (the builder, its engine and numba kernels,
  the bar table's schema);
- :mod:`fxstore.ingest.run`: orchestration (the typed plan, groups of files, the worker
  pool, day files, the manifest, resumable progress, and `fxstore scan`).

Names are imported on first use (PEP 562), so importing this package stays cheap: the CLI
starts the worker pool's server before it pays for numpy, numba and pyarrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from fxstore.ingest.bars.builder import BarBuilder, build_bars
    from fxstore.ingest.bars.table import BAR_SCHEMA
    from fxstore.ingest.dbn.format import (
        F_LAST,
        F_MBP,
        FIXED_PRICE_SCALE,
        MBP10_DTYPE,
        N_LEVELS,
        RTYPE_MBP10,
        UNDEF_PRICE,
        WRITE_VERSION,
        DbnMetadata,
        SymbolInterval,
        encode_metadata,
    )
    from fxstore.ingest.dbn.reader import DbnFile, DbnSource, open_dbn
    from fxstore.ingest.run.manifest import IngestSummary
    from fxstore.ingest.run.pipeline import ingest
    from fxstore.ingest.run.pool import start_worker_server
    from fxstore.ingest.run.rolls import RollsReport, read_rolls
    from fxstore.ingest.run.scan import ScanReport, scan_dbn
    from fxstore.ingest.select.front_month import (
        FrontMonthSelector,
        RollEntry,
        select_front_month,
    )
    from fxstore.ingest.select.transitions import (
        ADJUSTED_COLUMNS,
        Transition,
        adjusted_column,
        roll_of_manifest,
        transitions_from_manifest,
        with_adjusted_prices,
    )

#: Public name → the module that defines it.
_HOME: Final = {
    "ADJUSTED_COLUMNS": "fxstore.ingest.select.transitions",
    "BAR_SCHEMA": "fxstore.ingest.bars.table",
    "BarBuilder": "fxstore.ingest.bars.builder",
    "build_bars": "fxstore.ingest.bars.builder",
    "DbnFile": "fxstore.ingest.dbn.reader",
    "DbnMetadata": "fxstore.ingest.dbn.format",
    "DbnSource": "fxstore.ingest.dbn.reader",
    "F_LAST": "fxstore.ingest.dbn.format",
    "F_MBP": "fxstore.ingest.dbn.format",
    "FIXED_PRICE_SCALE": "fxstore.ingest.dbn.format",
    "FrontMonthSelector": "fxstore.ingest.select.front_month",
    "IngestSummary": "fxstore.ingest.run.manifest",
    "MBP10_DTYPE": "fxstore.ingest.dbn.format",
    "N_LEVELS": "fxstore.ingest.dbn.format",
    "RTYPE_MBP10": "fxstore.ingest.dbn.format",
    "RollEntry": "fxstore.ingest.select.front_month",
    "RollsReport": "fxstore.ingest.run.rolls",
    "Transition": "fxstore.ingest.select.transitions",
    "read_rolls": "fxstore.ingest.run.rolls",
    "with_adjusted_prices": "fxstore.ingest.select.transitions",
    "adjusted_column": "fxstore.ingest.select.transitions",
    "roll_of_manifest": "fxstore.ingest.select.transitions",
    "transitions_from_manifest": "fxstore.ingest.select.transitions",
    "ScanReport": "fxstore.ingest.run.scan",
    "UNDEF_PRICE": "fxstore.ingest.dbn.format",
    "WRITE_VERSION": "fxstore.ingest.dbn.format",
    "SymbolInterval": "fxstore.ingest.dbn.format",
    "encode_metadata": "fxstore.ingest.dbn.format",
    "ingest": "fxstore.ingest.run.pipeline",
    "open_dbn": "fxstore.ingest.dbn.reader",
    "scan_dbn": "fxstore.ingest.run.scan",
    "select_front_month": "fxstore.ingest.select.front_month",
    "start_worker_server": "fxstore.ingest.run.pool",
}

__all__ = [
    "ADJUSTED_COLUMNS",
    "BAR_SCHEMA",
    "FIXED_PRICE_SCALE",
    "F_LAST",
    "F_MBP",
    "MBP10_DTYPE",
    "N_LEVELS",
    "RTYPE_MBP10",
    "UNDEF_PRICE",
    "WRITE_VERSION",
    "BarBuilder",
    "DbnFile",
    "DbnMetadata",
    "DbnSource",
    "FrontMonthSelector",
    "IngestSummary",
    "RollEntry",
    "RollsReport",
    "ScanReport",
    "SymbolInterval",
    "Transition",
    "adjusted_column",
    "build_bars",
    "encode_metadata",
    "ingest",
    "open_dbn",
    "read_rolls",
    "roll_of_manifest",
    "scan_dbn",
    "select_front_month",
    "start_worker_server",
    "transitions_from_manifest",
    "with_adjusted_prices",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'fxstore.ingest' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
