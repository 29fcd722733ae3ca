"""The fxcache on disk: Arrow IPC feature shards and their manifest, written and read back.

Layout (DESIGN.md, "Store layout")::

    <root>/fxcache/<SYMBOL>/<featureset-hash>/<shard>.arrow + manifest.json

Format ``fxcache/1``. Each shard is an uncompressed Arrow IPC *file* holding exactly one
record batch (every column one contiguous buffer; pyarrow pads buffers to 8 bytes) with no
nulls, so it memory-maps zero-copy and pyarrow, polars and DuckDB read it as it is. Columns,
in order: ``ts_close`` int64 (ns UTC, strictly increasing over the whole symbol),
``trading_day`` int32 (days since 1970-01-01), ``is_roll`` and ``session_start`` uint8,
``mkt_close`` and ``mkt_half_spread`` float64 (index points), features ``f_<name>`` float32,
targets ``target_<name>`` float32. Shards are named by the calendar period of
``trading_day``: ``YYYY-MM.arrow`` (month, the default), ``YYYY.arrow`` or ``YYYY-MM-DD.arrow``.
``manifest.json`` is written last and atomically; each shard's SHA-256 is in it, and a shard
that does not match is refused on read.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.store import atomic_path, file_sha256, read_json

__all__ = [
    "FLAG_COLUMNS",
    "FORMAT",
    "MANIFEST",
    "MARKET_COLUMNS",
    "FxCacheManifest",
    "ShardBy",
    "ShardEntry",
    "read_manifest",
    "read_shard",
    "split_shards",
    "write_shard",
]

logger = logging.getLogger(__name__)

FORMAT: Final = "fxcache/1"
MANIFEST: Final = "manifest.json"
ShardBy = Literal["month", "year", "day"]
FLAG_COLUMNS: Final = ("is_roll", "session_start")
MARKET_COLUMNS: Final = ("mkt_close", "mkt_half_spread")
_REDO: Final = "re-run `fxstore precompute --force`"
_PERIOD: Final[dict[str, tuple[str, str]]] = {
    "day": ("D", "%Y-%m-%d"),
    "month": ("M", "%Y-%m"),
    "year": ("Y", "%Y"),
}
_EPOCH: Final = dt.date(1970, 1, 1)


def split_shards(
    trading_day: npt.NDArray[np.int32], shard_by: ShardBy
) -> list[tuple[str, int, int]]:
    """Cut rows (non-decreasing `trading_day`, days since 1970) into calendar periods.

    Returns ``(file name, first row, end row)`` per shard, in order.
    """
    if shard_by not in _PERIOD:
        raise InvalidInputError(f"`shard_by` must be 'month', 'year' or 'day', was {shard_by!r}.")
    unit, fmt = _PERIOD[shard_by]
    period = trading_day.astype("datetime64[D]").astype(f"datetime64[{unit}]").astype(np.int64)
    cuts = [0, *(np.flatnonzero(period[1:] != period[:-1]) + 1).tolist(), len(period)]
    out = []
    for lo, hi in itertools.pairwise(cuts):
        day = _EPOCH + dt.timedelta(days=int(trading_day[lo]))
        out.append((f"{day.strftime(fmt)}.arrow", lo, hi))
    return out


@dataclass(frozen=True, slots=True)
class ShardEntry:
    """One shard as the manifest lists it."""

    file: str
    rows: int
    #: ``ts_close`` of the first and last row, int ns UTC.
    ts_start: int
    ts_end: int
    #: Trading days of the first and last row, days since 1970-01-01.
    first_trading_day: int
    last_trading_day: int
    sha256: str
    bytes: int

    def to_json(self) -> dict[str, object]:
        """The manifest entry."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: object, where: Path) -> ShardEntry:
        """Parse a manifest entry; SchemaError if a field is missing or of the wrong type."""
        fields = {n: str if n in ("file", "sha256") else int for n in cls.__slots__}
        if not isinstance(data, dict) or any(
            not isinstance(data.get(n), t) or isinstance(data.get(n), bool)
            for n, t in fields.items()
        ):
            raise SchemaError(f"{where}: a shard entry is malformed ({data!r}); {_REDO}.")
        return cls(**{n: data[n] for n in fields})


def write_shard(path: Path, table: pa.Table, metadata: Mapping[bytes, bytes]) -> ShardEntry:
    """Write `table` atomically as an uncompressed Arrow IPC file of one record batch.

    `table` holds the fxcache columns in order, no nulls, ``ts_close`` first and
    ``trading_day`` second. Returns the manifest entry (checksum of the written bytes).
    """
    if table.num_rows == 0:
        raise InvalidInputError(f"{path}: a shard needs at least one row.")
    (batch,) = table.combine_chunks().to_batches(max_chunksize=table.num_rows)
    schema = table.schema.with_metadata(dict(metadata))
    with (
        atomic_path(path) as tmp,
        pa.OSFile(str(tmp), "wb") as sink,
        pa.ipc.new_file(sink, schema) as writer,
    ):
        writer.write_batch(batch)
    logger.debug("wrote shard %s (%d rows)", path, table.num_rows)
    ts = table.column("ts_close")
    days = table.column("trading_day")
    return ShardEntry(
        file=path.name,
        rows=table.num_rows,
        ts_start=int(ts[0].as_py()),
        ts_end=int(ts[-1].as_py()),
        first_trading_day=int(days[0].as_py()),
        last_trading_day=int(days[-1].as_py()),
        sha256=file_sha256(path),
        bytes=path.stat().st_size,
    )


def read_shard(path: Path, sha256: str | None = None) -> pa.Table:
    """Memory-map one shard (zero-copy), after checking its SHA-256 when `sha256` is given.

    Raises
    ------
    InvalidInputError
        The file is missing, or its checksum differs from `sha256` (damaged or replaced).
    SchemaError
        It is not an Arrow IPC file of exactly one record batch.
    """
    if not path.is_file():
        raise InvalidInputError(f"{path}: shard listed in the manifest is missing; {_REDO}.")
    if sha256 is not None and (actual := file_sha256(path)) != sha256:
        raise InvalidInputError(
            f"{path}: SHA-256 is {actual}, the manifest says {sha256}: the shard is damaged "
            f"or was replaced; refusing to read it. {_REDO.capitalize()}."
        )
    try:
        reader = pa.ipc.open_file(pa.memory_map(str(path)))
    except pa.ArrowInvalid as err:
        raise SchemaError(f"{path}: not an Arrow IPC file ({err}); {_REDO}.") from err
    if reader.num_record_batches != 1:
        raise SchemaError(
            f"{path}: holds {reader.num_record_batches} record batches, expected 1; {_REDO}."
        )
    return pa.Table.from_batches([reader.get_batch(0)])


def _names(columns: object, group: str, where: Path) -> tuple[str, ...]:
    names = columns.get(group) if isinstance(columns, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SchemaError(f"{where}: columns.{group} must be a list of names; {_REDO}.")
    return tuple(names)


@dataclass(frozen=True, slots=True)
class FxCacheManifest:
    """A parsed fxcache ``manifest.json``; `data` is the whole JSON object."""

    folder: Path
    symbol: str
    #: The feature-set hash: the folder's name.
    key: str
    flags: tuple[str, ...]
    market: tuple[str, ...]
    features: tuple[str, ...]
    targets: tuple[str, ...]
    shards: tuple[ShardEntry, ...]
    n_rows: int
    bars_per_day: float
    data: Mapping[str, object]

    @property
    def column_names(self) -> tuple[str, ...]:
        """Every shard column, in file order."""
        return ("ts_close", "trading_day", *self.flags, *self.market, *self.features, *self.targets)

    def schema(self) -> pa.Schema:
        """The Arrow schema every shard has."""
        types = {"ts_close": pa.int64(), "trading_day": pa.int32()}
        types |= {n: pa.uint8() for n in self.flags} | {n: pa.float64() for n in self.market}
        return pa.schema([(n, types.get(n, pa.float32())) for n in self.column_names])


def read_manifest(folder: Path) -> FxCacheManifest:
    """Read and check the manifest of one fxcache folder.

    Raises
    ------
    InvalidInputError
        No manifest (precompute never finished there) or it is not JSON.
    SchemaError
        Not an ``fxcache/1`` manifest, or a field is missing.
    """
    path = folder / MANIFEST
    if not path.is_file():
        raise InvalidInputError(f"{folder}: no {MANIFEST}: the cache is incomplete; {_REDO}.")
    data = read_json(path)
    if data.get("format") != FORMAT:
        raise SchemaError(f"{path}: format is {data.get('format')!r}, expected {FORMAT!r}.")
    columns = data.get("columns")
    shards = data.get("shards")
    if not isinstance(shards, list) or not isinstance(data.get("n_rows"), int):
        raise SchemaError(f"{path}: `shards` or `n_rows` is missing; {_REDO}.")
    return FxCacheManifest(
        folder=folder,
        symbol=str(data.get("symbol")),
        key=folder.name,
        flags=_names(columns, "flags", path),
        market=_names(columns, "market", path),
        features=_names(columns, "features", path),
        targets=_names(columns, "targets", path),
        shards=tuple(ShardEntry.from_json(s, path) for s in shards),
        n_rows=int(data["n_rows"]),  # type: ignore[call-overload]
        bars_per_day=float(data.get("bars_per_day", 0.0)),  # type: ignore[arg-type]
        data=data,
    )
