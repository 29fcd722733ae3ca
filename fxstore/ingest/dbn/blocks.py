"""Blocks of decompressed DBN bytes → MBP-10 record arrays, with the checks each block gets.

:class:`BlockDecoder` takes record-aligned blocks of one file's stream and returns its MBP-10
records (a view where the block holds nothing else), folds SymbolMapping records into the
symbology and counts the others; :func:`check_order` holds ts_recv non-decreasing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from fxstore.errors import SchemaError
from fxstore.ingest.dbn import kernels
from fxstore.ingest.dbn.format import (
    DAMAGED,
    MBP10_DTYPE,
    RTYPE_MBP10,
    TS_OUT_BYTES,
    DbnMetadata,
    symbol_mapping_dtype,
)
from fxstore.ingest.dbn.symbology import Symbology


class DbnLayout(Protocol):
    """What the decoder reads of a file: its path, record size and metadata."""

    @property
    def path(self) -> Path: ...
    @property
    def record_bytes(self) -> int: ...
    @property
    def metadata(self) -> DbnMetadata: ...


class Tallies(Protocol):
    """What the decoder counts into (the reader's per-file counters)."""

    n_symbol_mappings: int
    skipped: dict[int, int]
    """rtype -> records of that type skipped."""


__all__ = ["BlockDecoder", "check_order"]


class BlockDecoder:
    """Turns blocks of decompressed record bytes into MBP-10 record arrays for one file."""

    def __init__(self, file: DbnLayout, counters: Tallies, symbology: Symbology) -> None:
        self.path = file.path
        self.record_bytes = file.record_bytes
        ts_out = TS_OUT_BYTES if file.metadata.ts_out else 0
        self.symbol_dtype = symbol_mapping_dtype(file.metadata.version)
        self.symbol_bytes = self.symbol_dtype.itemsize + ts_out
        # The first two header bytes, length (in words) and rtype, read as one little-endian u16.
        self.header_key = np.uint16(self.record_bytes // 4 | RTYPE_MBP10 << 8)
        self.counters = counters
        self.symbology = symbology

    def _compact(self, rows: npt.NDArray[np.uint8]) -> npt.NDArray[np.void]:
        """View (n, record_bytes) rows as MBP-10 records; with ts_out, copy without it."""
        if rows.shape[1] != MBP10_DTYPE.itemsize:
            rows = np.ascontiguousarray(rows[:, : MBP10_DTYPE.itemsize])
            rows[:, 0] = MBP10_DTYPE.itemsize // 4  # the length of the record as returned
        return rows.view(MBP10_DTYPE).reshape(-1)

    def decode(
        self, buf: npt.NDArray[np.uint8], offset: int, index: int
    ) -> tuple[list[npt.NDArray[np.void]], npt.NDArray[np.uint8]]:
        """Return the MBP-10 record arrays of `buf` and the trailing partial record.

        `buf` starts at a record boundary, `offset` bytes into the decompressed stream and
        after `index` MBP-10 records (both only for messages).
        """
        n_rows = buf.size // self.record_bytes
        rows = buf[: n_rows * self.record_bytes].reshape(n_rows, self.record_bytes)
        headers = rows[:, :2].view(np.uint16).reshape(-1)
        is_mbp10 = headers == self.header_key
        n_fast = n_rows if is_mbp10.all() else int(np.argmin(is_mbp10))
        parts = [self._compact(rows[:n_fast])] if n_fast else []
        start = n_fast * self.record_bytes
        if start == buf.size:
            return parts, buf[:0]
        mbp10, symbols, others, end, status = kernels.walk_records(
            buf, start, self.record_bytes, self.symbol_bytes
        )
        if status != kernels.WALK_OK:
            self._raise_bad_record(buf, end, offset, index + n_fast + mbp10.size, status)
        if mbp10.size:
            parts.append(self._compact(kernels.gather_rows(buf, mbp10, self.record_bytes)))
        if symbols.size:
            rows = kernels.gather_rows(buf, symbols, self.symbol_dtype.itemsize)
            self.symbology.add_mapping_records(rows.view(self.symbol_dtype).reshape(-1))
            self.counters.n_symbol_mappings += symbols.size
        for rtype in np.flatnonzero(others):
            skipped = self.counters.skipped
            skipped[int(rtype)] = skipped.get(int(rtype), 0) + int(others[rtype])
        return parts, buf[end:].copy()

    def _raise_bad_record(
        self, buf: npt.NDArray[np.uint8], pos: int, offset: int, index: int, status: int
    ) -> None:
        length = int(buf[pos]) * 4
        where = f"{self.path}: corrupt record at byte {offset + pos} (after MBP-10 record {index})"
        if status == kernels.WALK_BAD_LENGTH:
            problem = f"length byte {length // 4} ({length} bytes) is shorter than a record header"
        elif status == kernels.WALK_BAD_MBP10_LENGTH:
            problem = (
                f"rtype 0x0A (MBP-10) with length {length} bytes, expected {self.record_bytes}"
            )
        else:
            problem = f"SymbolMapping (rtype 0x16) of {length} bytes, expected {self.symbol_bytes}"
        raise SchemaError(f"{where}: {problem}; {DAMAGED}.")


def check_order(records: npt.NDArray[np.void], last_ts: int | None, path: Path, index: int) -> int:
    """Return the last ts_recv of `records`; raise if ts_recv decreases anywhere."""
    ts = records["ts_recv"]
    if last_ts is not None and int(ts[0]) < last_ts:
        bad, before = 0, last_ts
    else:
        decreasing = ts[1:] < ts[:-1]
        if not decreasing.any():
            return int(ts[-1])
        bad = int(np.argmax(decreasing)) + 1
        before = int(ts[bad - 1])
    raise SchemaError(
        f"{path}: records are not in ts_recv order: record {index + bad} has ts_recv "
        f"{int(ts[bad])}, before it record {index + bad - 1} has {before}; fxstore needs "
        "files sorted by ts_recv, as Databento delivers them: download the file again."
    )
