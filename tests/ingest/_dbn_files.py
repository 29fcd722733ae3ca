"""DBN byte streams built in code for the reader tests: records, other rtypes, whole files.

Headers come from :func:`fxstore.ingest.dbn.format.encode_metadata` (DBN version 3), records
are raw little-endian bytes, so a test controls every byte the reader sees.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import zstandard

from fxstore.ingest.dbn.format import (
    F_LAST,
    MBP10_DTYPE,
    RTYPE_MBP10,
    RTYPE_SYMBOL_MAPPING,
    DbnMetadata,
    SymbolInterval,
    encode_metadata,
    symbol_mapping_dtype,
)

#: 2020-12-28 00:00 UTC, the day the peer files cover.
T0 = 1_609_113_600_000_000_000
DAY_NS = 86_400 * 1_000_000_000
RTYPE_SYSTEM = 0x17


def mbp10_records(
    ts_recv: Sequence[int] | npt.NDArray[np.int64],
    instrument_id: int | Sequence[int] | npt.NDArray[np.int64] = 5482,
    *,
    first_sequence: int = 0,
) -> npt.NDArray[np.void]:
    """Return MBP-10 records with the given ts_recv; `sequence` numbers them for identity."""
    ts = np.asarray(ts_recv, dtype=np.uint64)
    records = np.zeros(ts.size, MBP10_DTYPE)
    records["length"] = MBP10_DTYPE.itemsize // 4
    records["rtype"] = RTYPE_MBP10
    records["publisher_id"] = 1
    records["instrument_id"] = instrument_id
    records["ts_recv"] = ts
    records["ts_event"] = ts - np.uint64(5)
    records["sequence"] = first_sequence + np.arange(ts.size)
    records["price"] = 3_700_000_000_000 + 250_000_000 * np.arange(ts.size)
    records["size"] = 1 + np.arange(ts.size) % 7
    records["action"] = b"A"
    records["side"] = b"B"
    records["flags"] = F_LAST
    records["bid_px_00"] = records["price"]
    records["ask_px_00"] = records["price"] + 250_000_000
    return records


def with_ts_out(records: npt.NDArray[np.void]) -> bytes:
    """Encode `records` as a ts_out stream: 8 more bytes per record, length byte 94."""
    rows = np.zeros((records.size, MBP10_DTYPE.itemsize + 8), np.uint8)
    rows[:, : MBP10_DTYPE.itemsize] = records.view(np.uint8).reshape(records.size, -1)
    rows[:, 0] = rows.shape[1] // 4
    rows[:, MBP10_DTYPE.itemsize :] = (
        (records["ts_recv"] + np.uint64(99)).view(np.uint8).reshape(-1, 8)
    )
    return rows.tobytes()


def symbol_mapping_record(
    instrument_id: int,
    out_symbol: str,
    *,
    in_symbol: str = "ES.FUT",
    start_ts: int = T0,
    end_ts: int = T0 + DAY_NS,
    version: int = 3,
) -> bytes:
    """Return one SymbolMapping record (rtype 0x16) in the layout of DBN `version`."""
    dtype = symbol_mapping_dtype(version)
    row = np.zeros(1, dtype)
    row["length"] = dtype.itemsize // 4
    row["rtype"] = RTYPE_SYMBOL_MAPPING
    row["instrument_id"] = instrument_id
    row["ts_event"] = start_ts
    row["stype_in_symbol"] = in_symbol.encode()
    row["stype_out_symbol"] = out_symbol.encode()
    if version > 1:
        row["stype_in"] = 4  # parent
        row["stype_out"] = 1  # raw_symbol
    row["start_ts"] = start_ts
    row["end_ts"] = end_ts
    return row.tobytes()


def other_record(rtype: int = RTYPE_SYSTEM, n_bytes: int = 320) -> bytes:
    """Return a record of another rtype (e.g. a system message) with a text body."""
    body = bytearray(n_bytes)
    body[0] = n_bytes // 4
    body[1] = rtype
    body[16:26] = b"Heartbeat\0"
    return bytes(body)


def metadata(
    *,
    dataset: str = "GLBX.MDP3",
    schema: str | None = "mbp-10",
    ts_out: bool = False,
    stype_in: str | None = "raw_symbol",
    stype_out: str = "instrument_id",
    mappings: tuple[SymbolInterval, ...] = (),
) -> DbnMetadata:
    return DbnMetadata(
        version=3,
        dataset=dataset,
        schema=schema,
        start=T0,
        end=T0 + DAY_NS,
        limit=0,
        stype_in=stype_in,
        stype_out=stype_out,
        ts_out=ts_out,
        mappings=mappings,
    )


def write_dbn(
    path: Path,
    *records: npt.NDArray[np.void] | bytes,
    meta: DbnMetadata | None = None,
    compress: bool = False,
) -> Path:
    """Write a DBN v3 file: header from `meta`, then the records (arrays or raw bytes)."""
    data = encode_metadata(meta or metadata()) + b"".join(
        r if isinstance(r, bytes) else r.tobytes() for r in records
    )
    if compress:
        data = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data)
    path.write_bytes(data)
    return path


def esh1_mapping(day: dt.date = dt.date(2020, 12, 28)) -> SymbolInterval:
    return SymbolInterval("ESH1", day, day + dt.timedelta(days=1), "5482")
