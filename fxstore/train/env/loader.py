"""Open a symbol's fxcache and put it on the GPU: the one data path of every trainer.

Selected shards (Arrow IPC files of one record batch; DESIGN.md "fxcache") are memory-mapped
read-only and their columns handed out zero-copy: numpy views on a CPU; on a GPU, CuPy arrays over
the same pages, registered with CUDA as pinned, device-mapped, read-only host memory.
:meth:`FxCacheView.features_to_device` copies features and targets in one bulk pass into float32
matrices in device memory, where random access belongs (gathers through mapped host memory are
~100x slower). Lifetimes: every handed-out array owns a reference to its shard's mapping (and
registration), so it stays valid after the view is closed; the mapping is unregistered and
unmapped exactly once, when its last array dies, or at the close when none is left. numpy and
CuPy arrays export DLPack: ``torch.from_dlpack(x)`` takes X without a copy.

Examples
--------
>>> with open_fxcache("data", "ES.FUT", start=t0, end=t1) as view:  # doctest: +SKIP
...     x, y = view.features_to_device()
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import mmap
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.fxcache import (
    REDO,
    FxCacheManifest,
    ShardEntry,
    find_folder,
    open_shard,
    read_manifest,
    verify_sha256,
)

if TYPE_CHECKING:
    from fxstore.train.gpu.cuda_host import ColumnBlock, HostRegistration

__all__ = ["DeviceName", "FxCacheView", "ShardView", "TimeBound", "open_fxcache"]

logger = logging.getLogger(__name__)

DeviceName: TypeAlias = Literal["auto", "cpu", "cuda"]
#: int nanoseconds UTC, a timezone-aware datetime, a numpy datetime64 (read as UTC), or None.
TimeBound: TypeAlias = int | dt.datetime | np.datetime64 | None
#: numpy on a CPU; cupy.ndarray on a GPU (CuPy has no type stubs: typed as its numpy twin).
Array: TypeAlias = npt.NDArray[np.generic]
FloatMatrix: TypeAlias = npt.NDArray[np.float32]

_BLOCK_ROWS: Final = 1 << 13  # CPU copy: a block of X (8192 x 64 floats: 2 MiB) stays in cache


@dataclass(frozen=True, slots=True)
class ShardView:
    """The selected rows of one shard, as zero-copy column arrays."""

    file: str
    """Shard file name (``YYYY-MM.arrow``)."""
    row_offset: int
    """Index of this shard's first selected row in the whole view."""
    n_rows: int
    columns: Mapping[str, Array]
    """Column name -> 1-D array of `n_rows` items, in file order. Read-only memory: numpy marks
    it so; on a GPU, writing to it from a kernel is an illegal access."""


@dataclass(frozen=True, slots=True)
class _Part:
    offsets: Mapping[str, int]  # byte offset of each column's data in the file
    registration: HostRegistration | None  # set on a GPU
    row_start: int  # first selected row in the file
    view: ShardView


def _column_offsets(
    mapping: mmap.mmap, path: Path, manifest: FxCacheManifest, entry: ShardEntry
) -> dict[str, int]:
    """Byte offset of each column's data in a mapped shard, after checking its layout."""
    data = pa.py_buffer(mapping)  # released on return: the mapping stays closable
    batch = open_shard(data, path, manifest, entry)
    dtypes = manifest.dtypes
    offsets = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        offset = column.buffers()[1].address - data.address
        if column.null_count or column.offset or offset % dtypes[name].itemsize:
            raise SchemaError(f"{path}: column {name} has nulls or is unaligned; {REDO}.")
        offsets[name] = offset
    return offsets


def _map_shards(
    manifest: FxCacheManifest, entries: list[ShardEntry], verify: bool
) -> list[tuple[mmap.mmap, dict[str, int]]]:
    """Memory-map shards read-only, check their SHA-256 (in parallel), locate their columns.

    The mappings are MAP_SHARED (Python's mmap), not pyarrow's MAP_PRIVATE ``memory_map``: on
    an H200 machine, cudaHostRegister of a private file mapping hung (> 40 s for 112 MB) where a
    shared one registers at ~20 GB/s. Python's mmap keeps a duplicate of the file descriptor
    while the mapping lives (until 3.13's ``trackfd=False``): one descriptor per open shard.
    """
    paths = [manifest.shard_path(entry) for entry in entries]
    mapped = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                mapped.append(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
        except FileNotFoundError as err:
            raise InvalidInputError(
                f"{path}: shard of {manifest.symbol!r} listed in the manifest is missing; {REDO}."
            ) from err
        except ValueError as err:  # an empty file cannot be mapped
            raise SchemaError(f"{path}: {err}; {REDO}.") from err
    if verify:  # hashlib releases the GIL: one thread per shard, up to the cores
        with ThreadPoolExecutor(min(len(entries), os.cpu_count() or 1) or 1) as pool:
            digests = list(pool.map(lambda data: hashlib.sha256(data).hexdigest(), mapped))
        for path, entry, actual in zip(paths, entries, digests, strict=True):
            verify_sha256(path, actual, entry.sha256)
    return [
        (data, _column_offsets(data, path, manifest, entry))
        for data, path, entry in zip(mapped, paths, entries, strict=True)
    ]


class FxCacheView:
    """An open, time-range-selected fxcache of one symbol; made by :func:`open_fxcache`.

    Use it as a context manager (or call :meth:`close`). Arrays it handed out stay valid after
    the close: each keeps its own shard mapped (and registered) until it dies.
    """

    def __init__(
        self, manifest: FxCacheManifest, device: Literal["cpu", "cuda"], parts: list[_Part]
    ):
        self._dtypes = manifest.dtypes
        self._parts: list[_Part] | None = parts
        self.symbol: str = manifest.symbol
        """The store symbol, continuous (e.g. "ES.FUT")."""
        self.device: Literal["cpu", "cuda"] = device
        """Where the arrays live: "cpu" (numpy) or "cuda" (CuPy)."""
        self.n_rows: int = sum(p.view.n_rows for p in parts)
        """Rows selected, over all shards."""
        self.feature_names: tuple[str, ...] = manifest.features
        """Feature columns, in the order of X's columns."""
        self.target_names: tuple[str, ...] = manifest.targets
        """Target columns, in the order of Y's columns."""
        self.manifest: Mapping[str, object] = manifest.data
        """The cache's manifest.json as read: feature-set definition, statistics, shard list."""
        self.folder: Path = manifest.folder
        """The cache's folder, ``fxcache/<symbol>/<featureset-hash>``."""

    def __enter__(self) -> FxCacheView:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Drop the view's mappings: those no array refers to are released now. Idempotent."""
        self._parts = None

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._parts is None

    @property
    def shards(self) -> tuple[ShardView, ...]:
        """The selected shards in time order, each with its zero-copy columns."""
        return tuple(p.view for p in self._open_parts())

    @property
    def columns(self) -> dict[str, tuple[Array, ...]]:
        """Column name -> one zero-copy array per selected shard, in time order.

        On a GPU these read host memory over PCIe: stream through them, never gather.
        """
        views = self.shards
        return {name: tuple(v.columns[name] for v in views) for name in self._dtypes}

    def features_to_device(self) -> tuple[FloatMatrix, FloatMatrix]:
        """Copy the selected rows into a feature matrix X and a target matrix Y, in one pass.

        Returns
        -------
        tuple of arrays
            X, float32 ``(n_rows, n_features)``, and Y, float32 ``(n_rows, n_targets)``,
            C-ordered, rows in time order, columns as :attr:`feature_names` and
            :attr:`target_names`. On a GPU, CuPy arrays in device memory (the place for random
            access), complete on return; on a CPU, numpy arrays. Either way they own their
            memory: closing the view does not touch them.
        """
        features, targets = self.feature_names, self.target_names
        if self.device == "cpu":
            return _copy_to_host(self._open_parts(), features, targets)
        from fxstore.train.gpu import cuda_host as _cuda_host

        blocks = self._column_blocks()
        return _cuda_host.copy_blocks_to_device(blocks, len(features), len(targets))

    def _column_blocks(self) -> list[ColumnBlock]:
        """The selected rows of every feature and target column, per registered shard."""
        from fxstore.train.gpu.cuda_host import ColumnBlock

        names = self.feature_names + self.target_names
        return [
            ColumnBlock(
                p.registration, tuple(p.offsets[n] for n in names), p.row_start, p.view.n_rows
            )
            for p in self._open_parts()
            if p.registration is not None
        ]

    def _open_parts(self) -> list[_Part]:
        if self._parts is None:
            raise InvalidInputError(
                f"the fxcache view of {self.symbol!r} is closed; open it again with open_fxcache "
                "(arrays taken from it before the close are still valid)."
            )
        return self._parts


def _copy_to_host(
    parts: list[_Part], features: tuple[str, ...], targets: tuple[str, ...]
) -> tuple[FloatMatrix, FloatMatrix]:
    """CPU twin of the device copy: one pass, in row blocks that stay in cache."""
    n_rows = sum(p.view.n_rows for p in parts)
    x = np.empty((n_rows, len(features)), dtype=np.float32)
    y = np.empty((n_rows, len(targets)), dtype=np.float32)
    for part in parts:
        cols, first = part.view.columns, part.view.row_offset
        for lo in range(0, part.view.n_rows, _BLOCK_ROWS):
            hi = min(lo + _BLOCK_ROWS, part.view.n_rows)
            for out, names in ((x, features), (y, targets)):
                for j, name in enumerate(names):
                    out[first + lo : first + hi, j] = cols[name][lo:hi]
    return x, y


def _to_ns(value: TimeBound, param: str) -> int | None:
    """A time bound as int nanoseconds UTC (None stays None)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise InvalidInputError(f"`{param}` must be timezone-aware (UTC), was {value!r}.")
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    if isinstance(value, np.datetime64) and not np.isnat(value):
        return int(value.astype("datetime64[ns]").astype(np.int64))
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    raise InvalidInputError(
        f"`{param}` must be int ns UTC, a timezone-aware datetime or a datetime64, was {value!r}."
    )


def _resolve_device(device: DeviceName) -> Literal["cpu", "cuda"]:
    """ "auto" -> "cuda" when CuPy finds a GPU, else "cpu"; "cuda" without one is an error."""
    if device not in ("auto", "cpu", "cuda"):
        raise InvalidInputError(f"`device` must be 'auto', 'cpu' or 'cuda', was {device!r}.")
    if device == "cpu":
        return "cpu"
    try:
        from fxstore.train.gpu import cuda_host as _cuda_host
    except ImportError as err:
        count, why = 0, f"needs CuPy ({err}); install fxstore[gpu] or"
    else:
        count, why = _cuda_host.cuda_device_count(), "but CUDA finds no GPU;"
    if count > 0 or device == "auto":
        return "cuda" if count > 0 else "cpu"
    raise InvalidInputError(f"device='cuda' {why} pass device='cpu'.")


def _open_part(
    mapped: tuple[mmap.mmap, dict[str, int]],
    entry: ShardEntry,
    dtypes: Mapping[str, np.dtype[Any]],
    bounds: tuple[int | None, int | None],
    row_offset: int,
    device: Literal["cpu", "cuda"],
) -> _Part | None:
    """Select a mapped shard's rows inside `bounds` and wrap every column (zero-copy)."""
    mapping, offsets = mapped
    ts = np.frombuffer(mapping, dtype=np.int64, count=entry.rows, offset=offsets["ts_close"])
    start, end = bounds
    row_start = 0 if start is None else int(np.searchsorted(ts, start, side="left"))
    n_rows = (entry.rows if end is None else int(np.searchsorted(ts, end))) - row_start
    if n_rows <= 0:
        return None  # the range falls between two bars of this shard
    registration = None
    if device == "cuda":
        from fxstore.train.gpu import cuda_host as _cuda_host

        registration = _cuda_host.HostRegistration(mapping)
    columns: dict[str, Array] = {}
    for name, dtype in dtypes.items():
        offset = offsets[name] + row_start * dtype.itemsize
        if registration is None:
            columns[name] = np.frombuffer(mapping, dtype=dtype, count=n_rows, offset=offset)
        else:
            columns[name] = _cuda_host.mapped_array(registration, offset, dtype, n_rows)
    return _Part(
        offsets, registration, row_start, ShardView(entry.file, row_offset, n_rows, columns)
    )


def open_fxcache(
    root: str | Path,
    symbol: str,
    *,
    featureset: str | None = None,
    start: TimeBound = None,
    end: TimeBound = None,
    device: DeviceName = "auto",
    verify: bool = True,
) -> FxCacheView:
    """Open the fxcache of `symbol`, selecting the rows with ``start <= ts_close < end``.

    Only shards whose time span overlaps ``[start, end)`` are mapped, checksummed and (on a
    GPU) registered; rows inside them are found by binary search on ``ts_close``.

    Parameters
    ----------
    root
        Store root, the folder holding ``fxcache/``.
    symbol
        Store symbol, continuous (e.g. "ES.FUT").
    featureset
        Feature-set hash (folder name under ``fxcache/<symbol>/``); None when there is one.
    start, end
        Half-open range on ``ts_close``; None is unbounded. int values are ns UTC.
    device
        "cpu": numpy views; "cuda": CuPy arrays over CUDA-registered mappings; "auto": "cuda"
        when CuPy finds a GPU, else "cpu".
    verify
        Check each selected shard's SHA-256 against the manifest (reads it once). Pass False
        in hot loops that reopen a cache already verified once.

    Returns
    -------
    FxCacheView
        The open view; use it as a context manager.

    Raises
    ------
    SymbolNotFoundError
        `symbol` has no fxcache (the message lists those that have one).
    InvalidInputError
        Bad arguments, no rows in the range, a missing shard file or a checksum mismatch.
    SchemaError
        A manifest or shard that does not follow the fxcache format.
    """
    root = Path(root)
    start_ns, end_ns = _to_ns(start, "start"), _to_ns(end, "end")
    if start_ns is not None and end_ns is not None and start_ns >= end_ns:
        raise InvalidInputError(f"`start` must be before `end`, was {start_ns} >= {end_ns} ns.")
    resolved = _resolve_device(device)
    folder = find_folder(root, symbol, featureset)
    manifest = read_manifest(folder, symbol)
    overlapping = [
        entry
        for entry in manifest.shards
        if (start_ns is None or entry.ts_end >= start_ns)
        and (end_ns is None or entry.ts_start < end_ns)
    ]
    parts: list[_Part] = []
    n_rows = 0
    dtypes = manifest.dtypes
    for entry, mapped in zip(overlapping, _map_shards(manifest, overlapping, verify), strict=True):
        part = _open_part(mapped, entry, dtypes, (start_ns, end_ns), n_rows, resolved)
        if part is not None:
            parts.append(part)
            n_rows += part.view.n_rows
    if not parts:
        raise InvalidInputError(
            f"no rows of {symbol!r} with {start_ns} <= ts_close < {end_ns} ns; the cache spans "
            f"{manifest.shards[0].ts_start}..{manifest.shards[-1].ts_end}."
        )
    logger.info(
        "opened fxcache %s: %d rows in %d shards on %s", symbol, n_rows, len(parts), resolved
    )
    return FxCacheView(manifest, resolved, parts)
