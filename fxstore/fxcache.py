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

This module is the one owner of the format: every reader (:class:`fxstore.FeatureStore`, the
training loader) parses manifests with :func:`read_manifest`, finds a cache with
:func:`find_folder` and checks shard bytes with :func:`open_shard` and :func:`verify_sha256`.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.errors import FxStoreError, InvalidInputError, SchemaError, SymbolNotFoundError
from fxstore.store import (
    MANIFEST,
    atomic_path,
    bars_dir,
    file_sha256,
    find_bar_version,
    fxcache_dir,
    list_fxcache_keys,
    list_fxcache_symbols,
    manifest_field,
    manifest_path,
    os_errors,
    read_json,
    resolve_manifest_file,
)

__all__ = [
    "FLAG_COLUMNS",
    "FORMAT",
    "LEADING_COLUMNS",
    "MANIFEST",
    "MARKET_COLUMNS",
    "REDO",
    "CacheChoice",
    "FxCacheManifest",
    "ShardBy",
    "ShardEntry",
    "choose_folder",
    "column_dtypes",
    "current_source_version",
    "describe_truncated",
    "find_folder",
    "open_shard",
    "read_entry",
    "read_manifest",
    "read_shard",
    "split_shards",
    "truncated_inputs",
    "verify_sha256",
    "write_shard",
]

logger = logging.getLogger(__name__)

FORMAT: Final = "fxcache/1"
ShardBy = Literal["month", "year", "day"]
FLAG_COLUMNS: Final = ("is_roll", "session_start")
MARKET_COLUMNS: Final = ("mkt_close", "mkt_half_spread")
#: Name and dtype of the columns every shard starts with, in file order; the features (``f_*``)
#: and targets (``target_*``) that follow are float32.
LEADING_COLUMNS: Final[tuple[tuple[str, np.dtype[Any]], ...]] = (
    ("ts_close", np.dtype(np.int64)),
    ("trading_day", np.dtype(np.int32)),
    *((name, np.dtype(np.uint8)) for name in FLAG_COLUMNS),
    *((name, np.dtype(np.float64)) for name in MARKET_COLUMNS),
)
#: What to do about a cache that is incomplete, damaged or of another format.
REDO: Final = "re-run `fxstore precompute --force`"
_PERIOD: Final[dict[str, tuple[str, str]]] = {
    "day": ("D", "%Y-%m-%d"),
    "month": ("M", "%Y-%m"),
    "year": ("Y", "%Y"),
}
_EPOCH: Final = dt.date(1970, 1, 1)


def column_dtypes(features: tuple[str, ...], targets: tuple[str, ...]) -> dict[str, np.dtype[Any]]:
    """Every column of a shard with these features and targets -> its dtype, in file order."""
    dtypes = dict(LEADING_COLUMNS)
    dtypes |= {name: np.dtype(np.float32) for name in features + targets}
    return dtypes


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

    #: File name, relative to the cache folder (:meth:`FxCacheManifest.shard_path`).
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
        """Parse an entry of manifest `where`; SchemaError if malformed or `file` leaves it."""
        fields = {n: str if n in ("file", "sha256") else int for n in cls.__slots__}
        if not isinstance(data, dict) or any(
            not isinstance(data.get(n), t) or isinstance(data.get(n), bool)
            for n, t in fields.items()
        ):
            raise SchemaError(f"{where}: a shard entry is malformed ({data!r}); {REDO}.")
        resolve_manifest_file(where, data["file"], allow_links=True)  # the name; links on read
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


def verify_sha256(path: Path, actual: str, expected: str) -> None:
    """Refuse shard `path` (InvalidInputError) when its SHA-256 `actual` is not `expected`."""
    if actual != expected:
        raise InvalidInputError(
            f"{path}: SHA-256 is {actual}, the manifest says {expected}: the shard is damaged "
            f"or was replaced; refusing to read it. {REDO.capitalize()}."
        )


def _check_file(path: Path, sha256: str | None) -> None:
    if not path.is_file():
        raise InvalidInputError(f"{path}: shard listed in the manifest is missing; {REDO}.")
    if sha256 is not None:
        verify_sha256(path, file_sha256(path), sha256)


def _open_file(data: Any, path: Path) -> Any:
    """An Arrow IPC file reader over `data` (a buffer or a memory-mapped file)."""
    try:
        return pa.ipc.open_file(data)
    except pa.ArrowInvalid as err:
        raise SchemaError(f"{path}: not an Arrow IPC file ({err}); {REDO}.") from err


def _one_batch(reader: Any, path: Path) -> pa.RecordBatch:
    if reader.num_record_batches != 1:
        raise SchemaError(
            f"{path}: holds {reader.num_record_batches} record batches, expected 1; {REDO}."
        )
    return reader.get_batch(0)


def read_shard(path: Path, sha256: str | None = None) -> pa.Table:
    """Memory-map one shard (zero-copy), after checking its SHA-256 when `sha256` is given.

    Raises
    ------
    InvalidInputError
        The file is missing, or its checksum differs from `sha256` (damaged or replaced).
    SchemaError
        It is not an Arrow IPC file of exactly one record batch.
    """
    _check_file(path, sha256)
    with os_errors(path, "read"):
        source = pa.memory_map(str(path))
    reader = _open_file(source, path)
    return pa.Table.from_batches([_one_batch(reader, path)])


def open_shard(
    data: Any, path: Path, manifest: FxCacheManifest, entry: ShardEntry
) -> pa.RecordBatch:
    """Check shard `entry` of `manifest` in `data` and return its record batch (zero-copy).

    `data` is the file's bytes (a pyarrow Buffer or memory-mapped file); `path` names it.

    Raises
    ------
    SchemaError
        Not an Arrow IPC file of one record batch with the manifest's columns, `entry.rows`
        rows and ``ts_close`` from `entry.ts_start` to `entry.ts_end`.
    """
    reader = _open_file(data, path)
    expected = manifest.schema()
    if not reader.schema.equals(expected):
        got, need = (", ".join(f"{f.name}:{f.type}" for f in x) for x in (reader.schema, expected))
        raise SchemaError(f"{path}: columns are [{got}], the manifest needs [{need}]; {REDO}.")
    batch = _one_batch(reader, path)
    if batch.num_rows != entry.rows:
        raise SchemaError(
            f"{path}: holds {batch.num_rows} rows, the manifest says {entry.rows}; {REDO}."
        )
    ts = batch.column(0)
    first, last = ts[0].as_py(), ts[-1].as_py()
    if (first, last) != (entry.ts_start, entry.ts_end):
        raise SchemaError(
            f"{path}: ts_close runs {first}..{last}, the manifest says "
            f"{entry.ts_start}..{entry.ts_end}; {REDO}."
        )
    return batch


def read_entry(manifest: FxCacheManifest, entry: ShardEntry, *, verify: bool = True) -> pa.Table:
    """Memory-map shard `entry` of `manifest` (zero-copy), checked as :func:`open_shard` does.

    Raises InvalidInputError when the file is missing or (`verify`) its SHA-256 is not the
    manifest's, SchemaError as :func:`open_shard`.
    """
    path = manifest.shard_path(entry)
    _check_file(path, entry.sha256 if verify else None)
    with os_errors(path, "read"):
        source = pa.memory_map(str(path))
    batch = open_shard(source, path, manifest, entry)
    return pa.Table.from_batches([batch])


def _names(columns: object, group: str, where: Path, prefix: str = "") -> tuple[str, ...]:
    names = columns.get(group) if isinstance(columns, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SchemaError(f"{where}: columns.{group} must be a list of names; {REDO}.")
    if not all(n.startswith(prefix) for n in names):
        raise SchemaError(f"{where}: columns.{group} must be names starting {prefix!r}; {REDO}.")
    return tuple(names)


def _fixed(columns: object, group: str, expected: tuple[str, ...], where: Path) -> tuple[str, ...]:
    if (names := _names(columns, group, where)) != expected:
        raise SchemaError(
            f"{where}: columns.{group} must be {list(expected)}, was {list(names)}; {REDO}."
        )
    return names


def truncated_inputs(manifest: Mapping[str, object]) -> list[dict[str, object]]:
    """The truncated DBN inputs a cache's bars were built from (its ``source`` records them:
    name, dropped_bytes, records_kept, last_trading_day); empty when none were."""
    source = manifest.get("source")
    found = source.get("truncated_inputs") if isinstance(source, Mapping) else None
    if not isinstance(found, Sequence) or isinstance(found, str):
        return []
    return [dict(e) for e in found if isinstance(e, Mapping)]


def describe_truncated(where: str, inputs: Sequence[Mapping[str, object]]) -> str:
    """The warning about a cache (or series) built from truncated inputs."""
    days = sorted({str(e.get("last_trading_day")) for e in inputs})
    names = ", ".join(str(e.get("name")) for e in inputs[:3]) + (" …" if len(inputs) > 3 else "")
    return (
        f"{where}: built from {len(inputs)} truncated input file(s) ({names}): trading "
        f"day(s) {', '.join(days)} are incomplete; download them again, then re-run "
        "`fxstore ingest --force` and `fxstore precompute`."
    )


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
    #: In time order, non-empty; each ends before the next starts.
    shards: tuple[ShardEntry, ...]
    n_rows: int
    bars_per_day: float
    data: Mapping[str, object]

    @property
    def path(self) -> Path:
        """The manifest file."""
        return manifest_path(self.folder)

    @property
    def column_names(self) -> tuple[str, ...]:
        """Every shard column, in file order."""
        return ("ts_close", "trading_day", *self.flags, *self.market, *self.features, *self.targets)

    @property
    def dtypes(self) -> dict[str, np.dtype[Any]]:
        """Every shard column -> its numpy dtype, in file order."""
        return column_dtypes(self.features, self.targets)

    def schema(self) -> pa.Schema:
        """The Arrow schema every shard has."""
        return pa.schema([(n, pa.from_numpy_dtype(d)) for n, d in self.dtypes.items()])

    def shard_path(self, entry: ShardEntry) -> Path:
        """The file of `entry`, inside the cache folder."""
        return resolve_manifest_file(self.path, entry.file)


def read_manifest(folder: Path, symbol: str) -> FxCacheManifest:
    """Read and check the manifest of one fxcache folder of `symbol`.

    Raises
    ------
    InvalidInputError
        No manifest (precompute never finished there) or it is not JSON.
    SchemaError
        Not an ``fxcache/1`` manifest of `symbol`, a field is missing or malformed, a shard
        file leads out of the folder, or the shards are not in time order.
    """
    path = manifest_path(folder)
    if not path.is_file():
        raise InvalidInputError(f"{folder}: no {MANIFEST}: the cache is incomplete; {REDO}.")
    data = read_json(path)
    if data.get("format") != FORMAT:
        raise SchemaError(f"{path}: format is {data.get('format')!r}, expected {FORMAT!r}.")
    if data.get("symbol") != symbol:
        raise SchemaError(
            f"{path}: the manifest is of symbol {data.get('symbol')!r}, expected {symbol!r}; "
            f"{REDO}."
        )
    columns = data.get("columns")
    raw_shards = manifest_field(data, "shards", list, path)
    n_rows = manifest_field(data, "n_rows", int, path)
    bars_per_day = manifest_field(data, "bars_per_day", float, path)
    shards = tuple(ShardEntry.from_json(s, path) for s in raw_shards)
    order_ok = all(a.ts_end < b.ts_start for a, b in itertools.pairwise(shards))
    if not shards or not order_ok or any(s.rows < 1 or s.ts_start > s.ts_end for s in shards):
        raise SchemaError(f"{path}: shards must be non-empty and in time order; {REDO}.")
    return FxCacheManifest(
        folder=folder,
        symbol=symbol,
        key=folder.name,
        flags=_fixed(columns, "flags", FLAG_COLUMNS, path),
        market=_fixed(columns, "market", MARKET_COLUMNS, path),
        features=_names(columns, "features", path, "f_"),
        targets=_names(columns, "targets", path, "target_"),
        shards=shards,
        n_rows=n_rows,
        bars_per_day=bars_per_day,
        data=data,
    )


@dataclass(frozen=True, slots=True)
class CacheChoice:
    """The fxcache a reader takes, and why (a line a command prints)."""

    folder: Path
    key: str
    #: Why this one: "the only fxcache of 'ES.FUT'", "built from the current bars (v0002)".
    reason: str


def current_source_version(root: Path, symbol: str, key: str) -> int | None:
    """The version number of the bars cache `key` was built from, if they are still the
    current version of their series (None: older bars, or a source it cannot tell)."""
    try:
        source = read_json(manifest_path(fxcache_dir(root, symbol, key))).get("source")
        if not isinstance(source, dict):
            return None
        keys = str(source.get("instrument_key")), str(source.get("bar_key"))
        current = find_bar_version(bars_dir(root, symbol, *keys))
    except FxStoreError:
        return None
    return current.version if current.manifest_sha256 == source.get("manifest_sha256") else None


def choose_folder(root: Path, symbol: str, featureset: str | None = None) -> CacheChoice:
    """The fxcache of `symbol` with hash `featureset`; None: the only one there is, else the
    only one built from the current version of its bars.

    Raises
    ------
    SymbolNotFoundError
        `symbol` has no complete fxcache (the message lists the symbols that have one).
    InvalidInputError
        `featureset` is not one of the symbol's hashes, or is None while no single cache is
        built from the current bars (the message lists them and names ``--featureset``).
    """
    hashes = sorted(list_fxcache_keys(root, symbol))
    if not hashes:
        known = ", ".join(list_fxcache_symbols(root)) or "none"
        raise SymbolNotFoundError(
            f"No fxcache for symbol {symbol!r} in {root}; known: {known}. "
            f"Run `fxstore precompute` for it first."
        )
    if featureset is not None:
        if featureset not in hashes:
            raise InvalidInputError(
                f"`--featureset` of {symbol!r} must be one of {', '.join(hashes)}, "
                f"was {featureset!r} (`fxstore ls` lists them)."
            )
        return CacheChoice(fxcache_dir(root, symbol, featureset), featureset, "--featureset")
    if len(hashes) == 1:
        reason = f"the only fxcache of {symbol!r}"
        return CacheChoice(fxcache_dir(root, symbol, hashes[0]), hashes[0], reason)
    current = {key: current_source_version(root, symbol, key) for key in hashes}
    fresh = [key for key, version in current.items() if version is not None]
    if len(fresh) == 1:
        reason = f"built from the current bars, v{current[fresh[0]]:04d}"
        return CacheChoice(fxcache_dir(root, symbol, fresh[0]), fresh[0], reason)
    which = (
        f"{len(fresh)} of them are built from the current bars ({', '.join(fresh)})"
        if fresh
        else "none is built from the current bars (`fxstore precompute` builds one)"
    )
    raise InvalidInputError(
        f"{symbol!r} has {len(hashes)} fxcaches ({', '.join(hashes)}) and {which}: "
        "pick one with --featureset KEY (`fxstore ls` lists them)."
    )


def find_folder(root: Path, symbol: str, featureset: str | None = None) -> Path:
    """The folder of :func:`choose_folder`'s cache."""
    return choose_folder(root, symbol, featureset).folder
