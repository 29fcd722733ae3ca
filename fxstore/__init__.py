"""fxstore: Databento MBP-10 order books → imbalance bars → GPU-ready features → a trading agent.

Importing fxstore never imports CuPy; the GPU is only touched by ``fxstore.train``.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
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


def open(  # shadows builtins.open on purpose
    root: str | os.PathLike[str],
    *,
    endpoint: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> FeatureStore:
    """Open the store at `root` for reading: a mapping of symbols to their feature caches.

    Parameters
    ----------
    root
        The store root (the folder holding ``bars/`` and ``fxcache/``), or an ``s3://``
        store (``s3://bucket/prefix``): then only its manifests are downloaded here, and
        each read downloads the day files or shards of the trading days it asks for, once
        (into the local mirror under `cache_dir`), checked against their SHA-256.
    endpoint
        ``s3://`` only: the URL of an S3-compatible server (default: AWS_ENDPOINT_URL, else
        AWS).
    cache_dir
        ``s3://`` only: the cache folder (default: ``--cache-dir``'s).

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

    if str(root).startswith("s3://"):
        from fxstore.remote import open_reader

        where = os.environ.get("AWS_ENDPOINT_URL") if endpoint is None else endpoint
        cache = None if cache_dir is None else Path(cache_dir)
        local, fetch = open_reader(str(root), endpoint=where, cache_dir=cache)
        return FeatureStore(local, fetch=fetch)
    return FeatureStore(root)
