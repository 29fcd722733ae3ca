"""Write fxcache folders as the precompute stage does, with random columns and a few facts.

Used by the loader tests and by bench/bench_loader.py. One shard per calendar month
(``YYYY-MM.arrow``) written by :func:`fxstore.fxcache.write_shard` (an uncompressed Arrow IPC
file holding one record batch with no nulls: ``ts_close`` int64, ``trading_day`` int32,
``is_roll`` uint8, ``session_start`` uint8, ``mkt_close`` float64, ``mkt_half_spread`` float64,
features ``f_*`` float32, targets ``target_*`` float32); plus ``manifest.json``. Shards are read
back for reference with plain pyarrow (:func:`read_shard`), independently of the loader.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore import fxcache
from fxstore.fxcache import FLAG_COLUMNS, FORMAT, MARKET_COLUMNS, ShardEntry
from fxstore.store import atomic_write_json, fxcache_dir, manifest_path

SYMBOL: Final = "ES.FUT"
FEATURESET: Final = "fs3c9a11d2e4b7"
NS_PER_DAY: Final = 86_400_000_000_000


@dataclass(frozen=True)
class Fxcache:
    """A written fxcache: where it is and what it holds."""

    root: Path
    folder: Path
    manifest: dict[str, object]
    paths: list[Path]
    """Shard files, in time order."""
    features: list[str]
    targets: list[str]


def month_start_ns(year: int, month: int) -> int:
    """Midnight UTC of the first day of `month`, in ns."""
    return int(dt.datetime(year, month, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000_000


def shard_columns(
    year: int,
    month: int,
    rows: int,
    features: Sequence[str],
    targets: Sequence[str],
    rng: np.random.Generator,
) -> dict[str, npt.NDArray[np.generic]]:
    """Random columns of one month: ts_close strictly increasing inside the month."""
    span = calendar.monthrange(year, month)[1] * NS_PER_DAY
    ts = month_start_ns(year, month) + np.arange(rows, dtype=np.int64) * (span // (rows + 1))
    cols: dict[str, npt.NDArray[np.generic]] = {
        "ts_close": ts,
        "trading_day": (ts // NS_PER_DAY).astype(np.int32),
        "is_roll": (rng.random(rows) < 0.01).astype(np.uint8),
        "session_start": (rng.random(rows) < 0.05).astype(np.uint8),
        "mkt_close": 5000.0 + np.cumsum(rng.standard_normal(rows)),
        "mkt_half_spread": np.full(rows, 0.125),
    }
    block = rng.standard_normal((len(features) + len(targets), rows), dtype=np.float32)
    for name, values in zip([*features, *targets], block, strict=True):
        cols[name] = values
    return cols


def write_shard(path: Path, columns: dict[str, npt.NDArray[np.generic]]) -> ShardEntry:
    """Write one shard of these columns (in this order) with the fxcache writer."""
    return fxcache.write_shard(path, pa.table(columns), {})


def write_fxcache(
    root: Path,
    *,
    symbol: str = SYMBOL,
    featureset: str = FEATURESET,
    months: Sequence[tuple[int, int]] = ((2024, 1), (2024, 2), (2024, 3)),
    rows_per_shard: int | Sequence[int] = 500,
    n_features: int = 5,
    n_targets: int = 2,
    seed: int = 0,
) -> Fxcache:
    """Write ``<root>/fxcache/<symbol>/<featureset>/`` with one shard per month and a manifest."""
    folder = fxcache_dir(root, symbol, featureset)
    folder.mkdir(parents=True, exist_ok=True)
    features = [f"f_{i:02d}" for i in range(n_features)]
    targets = [f"target_r{i}" for i in range(n_targets)]
    rows = [rows_per_shard] * len(months) if isinstance(rows_per_shard, int) else rows_per_shard
    rng = np.random.default_rng(seed)
    entries, paths, days = [], [], set()
    for (year, month), n in zip(months, rows, strict=True):
        cols = shard_columns(year, month, n, features, targets, rng)
        path = folder / f"{year:04d}-{month:02d}.arrow"
        entries.append(write_shard(path, cols).to_json())
        days.update(np.unique(cols["trading_day"]).tolist())
        paths.append(path)
    manifest: dict[str, object] = {
        "format": FORMAT,
        "symbol": symbol,
        "featureset": {"hash": featureset, "features": features},
        "columns": {
            "features": features,
            "targets": targets,
            "market": list(MARKET_COLUMNS),
            "flags": list(FLAG_COLUMNS),
        },
        "bars_per_day": sum(rows) / len(days),
        "n_rows": sum(rows),
        "max_target_horizon_bars": 8,
        "shards": entries,
    }
    atomic_write_json(manifest_path(folder), manifest)
    return Fxcache(root, folder, manifest, paths, features, targets)


def read_shard(path: Path) -> pa.Table:
    """The reference read of a shard: pyarrow, fully into memory."""
    with pa.OSFile(str(path), "rb") as source:
        return pa.ipc.open_file(source).read_all()
