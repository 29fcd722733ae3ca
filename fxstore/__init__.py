"""fxstore: Databento MBP-10 order books → imbalance bars → GPU-ready features → a trading agent.

Importing fxstore never imports CuPy; the GPU is only touched by ``fxstore.train``.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from fxstore.errors import (
    FoldFailedError,
    FxStoreError,
    FxStoreWarning,
    InvalidInputError,
    NoFrontMonthError,
    RunBusyError,
    RunInterruptedError,
    SchemaError,
    StoreAccessError,
    SymbolNotFoundError,
    TrainingDivergedError,
    WorkerLostError,
)

if TYPE_CHECKING:
    from fxstore.features.reader import FeatureStore

try:
    __version__ = version("fxstore")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "FoldFailedError",
    "FxStoreError",
    "FxStoreWarning",
    "InvalidInputError",
    "NoFrontMonthError",
    "RunBusyError",
    "RunInterruptedError",
    "SchemaError",
    "StoreAccessError",
    "SymbolNotFoundError",
    "TrainingDivergedError",
    "WorkerLostError",
    "__version__",
    "open",
]


def open(root: str | os.PathLike[str]) -> FeatureStore:  # shadows builtins.open on purpose
    """Open the store at `root` for reading: a mapping of symbols to their feature caches.

    Parameters
    ----------
    root
        The store root (the folder holding ``bars/`` and ``fxcache/``).

    Returns
    -------
    FeatureStore
        ``list_symbols()``, ``list_featuresets(symbol)``, ``manifest(symbol)``,
        ``read(symbol, start=, end=, columns=)`` (pyarrow Table) and ``read_polars(...)``;
        the bars: ``read_bars(symbol, version=, as_of=, start=, end=)`` and
        ``list_bar_versions(symbol)``.

    Examples
    --------
    >>> store = fxstore.open("data")  # doctest: +SKIP
    >>> store["ES.FUT"].read(start="2024-03-01", columns=["ts_close", "f_ret_1"])
    """
    from fxstore.features.reader import FeatureStore

    return FeatureStore(root)
