"""The DBN binary format: constants, record dtypes and the metadata header.

This module is the single place that knows DBN's byte layout (versions 1, 2 and 3), as
published by Databento (https://databento.com/docs/standards-and-conventions/databento-binary-encoding).
It is shared by the reader (:mod:`fxstore.ingest.dbn.reader`) and the synthetic market's writer
(:mod:`fxstore.synth`). Everything is little-endian; prices are int64 fixed point with
1e-9 scale; timestamps are uint64 nanoseconds since the UNIX epoch.

A DBN stream is ``b"DBN" + version:u8 + length:u32 + metadata[length] + records...``. Each
record starts with a 16-byte header whose first byte is the record length in 4-byte words.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from fxstore.errors import SchemaError

__all__ = [
    "DAMAGED",
    "DBN_MAGIC",
    "FIXED_PRICE_SCALE",
    "F_BAD_TS_RECV",
    "F_LAST",
    "F_MAYBE_BAD_BOOK",
    "F_MBP",
    "F_SNAPSHOT",
    "F_TOB",
    "MBP10_DTYPE",
    "N_LEVELS",
    "RECORD_HEADER_DTYPE",
    "RTYPE_MBP10",
    "RTYPE_SYMBOL_MAPPING",
    "SCHEMA_NAMES",
    "STYPE_NAMES",
    "TS_OUT_BYTES",
    "UNDEF_PRICE",
    "DbnMetadata",
    "SymbolInterval",
    "decode_metadata",
    "encode_metadata",
    "symbol_mapping_dtype",
]

DBN_MAGIC: Final = b"DBN"
#: Zstandard frame magic, and the skippable-frame magic used by the legacy DBZ format.
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
DBZ_SKIPPABLE_MAGIC_LOW: Final = 0x184D2A50
DBZ_SKIPPABLE_MAGIC_HIGH: Final = 0x184D2A5F
SUPPORTED_VERSIONS: Final = (1, 2, 3)
#: The version fxstore writes.
WRITE_VERSION: Final = 3

FIXED_PRICE_SCALE: Final = 1_000_000_000
#: An empty book level, or a missing price. Never reaches arithmetic.
UNDEF_PRICE: Final = np.iinfo(np.int64).max
#: The end-of-timestamp sentinel Databento uses for open-ended metadata.
UNDEF_TIMESTAMP: Final = np.iinfo(np.uint64).max
N_LEVELS: Final = 10

# Record flags (the `flags` field of every market-data record).
F_LAST: Final = 1 << 7  # last record in the event for this instrument: the book is consistent
F_TOB: Final = 1 << 6  # top-of-book message, not an individual order
F_SNAPSHOT: Final = 1 << 5  # sourced from a replay / snapshot
F_MBP: Final = 1 << 4  # aggregated price level message
F_BAD_TS_RECV: Final = 1 << 3  # ts_recv is inaccurate (clock issue or reordering)
F_MAYBE_BAD_BOOK: Final = 1 << 2  # an unrecoverable channel gap: the book may be wrong

# Record types (the `rtype` byte of the record header).
RTYPE_MBP0: Final = 0x00
RTYPE_MBP1: Final = 0x01
RTYPE_MBP10: Final = 0x0A
#: Bytes of ts_out appended to every record when the metadata says ts_out.
TS_OUT_BYTES: Final = 8
#: What every "this file is damaged" error tells the user to do.
DAMAGED: Final = "the file is damaged: download it again"
RTYPE_STATUS: Final = 0x12
RTYPE_INSTRUMENT_DEF: Final = 0x13
RTYPE_IMBALANCE: Final = 0x14
RTYPE_ERROR: Final = 0x15
RTYPE_SYMBOL_MAPPING: Final = 0x16
RTYPE_SYSTEM: Final = 0x17
RTYPE_STATISTICS: Final = 0x18
RTYPE_MBO: Final = 0xA0

#: Schema enum values in the metadata header (0xFFFF = mixed).
SCHEMA_NAMES: Final[dict[int, str]] = {
    0: "mbo",
    1: "mbp-1",
    2: "mbp-10",
    3: "tbbo",
    4: "trades",
    5: "ohlcv-1s",
    6: "ohlcv-1m",
    7: "ohlcv-1h",
    8: "ohlcv-1d",
    9: "definition",
    10: "statistics",
    11: "status",
    12: "imbalance",
    13: "ohlcv-eod",
    14: "cmbp-1",
    15: "cbbo-1s",
    16: "cbbo-1m",
    17: "tcbbo",
    18: "bbo-1s",
    19: "bbo-1m",
}
SCHEMA_MBP10: Final = 2
SCHEMA_MIXED: Final = 0xFFFF

#: Symbology type enum values in the metadata header (0xFF = none / mixed).
STYPE_NAMES: Final[dict[int, str]] = {
    0: "instrument_id",
    1: "raw_symbol",
    2: "smart",
    3: "continuous",
    4: "parent",
    5: "nasdaq_symbol",
    6: "cms_symbol",
    7: "isin",
    8: "us_code",
    9: "bbg_comp_id",
    10: "bbg_comp_ticker",
    11: "figi",
    12: "figi_ticker",
}
STYPE_CODES: Final[dict[str, int]] = {name: code for code, name in STYPE_NAMES.items()}

_HEADER_FIELDS: Final = [
    ("length", "u1"),
    ("rtype", "u1"),
    ("publisher_id", "<u2"),
    ("instrument_id", "<u4"),
    ("ts_event", "<u8"),
]
#: The 16-byte header every record starts with. `length` counts 4-byte words.
RECORD_HEADER_DTYPE: Final = np.dtype(_HEADER_FIELDS)


def _mbp10_fields() -> list[tuple[str, str]]:
    fields = [
        *_HEADER_FIELDS,
        ("price", "<i8"),
        ("size", "<u4"),
        ("action", "S1"),
        ("side", "S1"),
        ("flags", "u1"),
        ("depth", "u1"),
        ("ts_recv", "<u8"),
        ("ts_in_delta", "<i4"),
        ("sequence", "<u4"),
    ]
    for level in range(N_LEVELS):
        fields += [
            (f"bid_px_{level:02d}", "<i8"),
            (f"ask_px_{level:02d}", "<i8"),
            (f"bid_sz_{level:02d}", "<u4"),
            (f"ask_sz_{level:02d}", "<u4"),
            (f"bid_ct_{level:02d}", "<u4"),
            (f"ask_ct_{level:02d}", "<u4"),
        ]
    return fields


#: One MBP-10 record (rtype 0x0A), 368 bytes, identical in DBN versions 1-3. Field names are
#: Databento's, so arrays of this dtype compare field-for-field with `DBNStore.to_ndarray()`.
MBP10_DTYPE: Final = np.dtype(_mbp10_fields())
assert MBP10_DTYPE.itemsize == 368


def symbol_mapping_dtype(version: int) -> np.dtype[np.void]:
    """Return the dtype of a SymbolMapping record (rtype 0x16) in DBN `version`.

    Version 1 stores two 22-byte symbols; versions 2 and 3 store the stypes and 71-byte symbols.
    """
    header = list(_HEADER_FIELDS)
    if version == 1:
        body = [
            ("stype_in_symbol", "S22"),
            ("stype_out_symbol", "S22"),
            ("_reserved", "V4"),
            ("start_ts", "<u8"),
            ("end_ts", "<u8"),
        ]
    else:
        body = [
            ("stype_in", "u1"),
            ("stype_in_symbol", "S71"),
            ("stype_out", "u1"),
            ("stype_out_symbol", "S71"),
            ("start_ts", "<u8"),
            ("end_ts", "<u8"),
        ]
    return np.dtype(header + body)


@dataclass(frozen=True, slots=True)
class SymbolInterval:
    """One metadata mapping: `raw_symbol` meant `symbol` on dates [start_date, end_date)."""

    raw_symbol: str
    start_date: dt.date
    end_date: dt.date
    #: The mapped-to symbol; for stype_out instrument_id this is the instrument_id as text.
    symbol: str


@dataclass(frozen=True, slots=True)
class DbnMetadata:
    """The decoded metadata header of a DBN stream."""

    version: int
    dataset: str
    #: Schema name ("mbp-10"), or None for a mixed-schema stream.
    schema: str | None
    start: int
    #: End of the query in ns since the epoch, or None when open-ended.
    end: int | None
    limit: int
    stype_in: str | None
    stype_out: str
    ts_out: bool
    symbols: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()
    not_found: tuple[str, ...] = ()
    mappings: tuple[SymbolInterval, ...] = field(default_factory=tuple)

    @property
    def symbol_cstr_len(self) -> int:
        """Width of every fixed-length symbol field: 22 in version 1, 71 after."""
        return 22 if self.version == 1 else 71


def _date_from_int(value: int) -> dt.date:
    return dt.date(value // 10000, value // 100 % 100, value % 100)


def _date_to_int(value: dt.date) -> int:
    return value.year * 10000 + value.month * 100 + value.day


class _Cursor:
    """Reads little-endian fields from the metadata bytes, failing with a SchemaError."""

    def __init__(self, buf: bytes, where: str) -> None:
        self.buf = buf
        self.pos = 0
        self.where = where

    def take(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise SchemaError(
                f"{self.where}: DBN metadata header is truncated at byte {self.pos}; "
                "the file is damaged: download it again."
            )
        values = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return values

    def cstr(self, width: int) -> str:
        raw = self.buf[self.pos : self.pos + width]
        if len(raw) < width:
            self.take(f"{width}s")  # raises the truncation error
        self.pos += width
        return raw.split(b"\0", 1)[0].decode("ascii", errors="replace")

    def symbol_list(self, width: int) -> tuple[str, ...]:
        (count,) = self.take("<I")
        return tuple(self.cstr(width) for _ in range(count))


def decode_metadata(version: int, body: bytes, where: str) -> DbnMetadata:
    """Decode the metadata `body` (the bytes after the 8-byte prefix) of a DBN `version` stream.

    Parameters
    ----------
    version
        The version byte that followed ``b"DBN"``.
    body
        Exactly the metadata bytes, as long as the prefix's length field says.
    where
        The file name, used in error messages.

    Raises
    ------
    SchemaError
        The version is not 1-3, or the header is truncated or inconsistent.
    """
    if version not in SUPPORTED_VERSIONS:
        raise SchemaError(
            f"{where}: DBN version {version} is not supported (fxstore reads versions 1-3); "
            "upgrade fxstore or convert the file with Databento's `dbn` tool."
        )
    cur = _Cursor(body, where)
    dataset = cur.cstr(16)
    (schema_code, start, end, limit) = cur.take("<HQQQ")
    if version == 1:
        cur.take("<Q")  # record_count, unused since v1
        (stype_in_code, stype_out_code, ts_out) = cur.take("<BBB")
        cstr_len = 22
        cur.take("47x")
    else:
        (stype_in_code, stype_out_code, ts_out, cstr_len) = cur.take("<BBBH")
        cur.take("53x")
    (schema_definition_len,) = cur.take("<I")
    cur.take(f"{schema_definition_len}x")
    symbols = cur.symbol_list(cstr_len)
    partial = cur.symbol_list(cstr_len)
    not_found = cur.symbol_list(cstr_len)
    (n_mappings,) = cur.take("<I")
    mappings: list[SymbolInterval] = []
    for _ in range(n_mappings):
        raw_symbol = cur.cstr(cstr_len)
        (n_intervals,) = cur.take("<I")
        for _ in range(n_intervals):
            (start_date, end_date) = cur.take("<II")
            symbol = cur.cstr(cstr_len)
            mappings.append(
                SymbolInterval(
                    raw_symbol, _date_from_int(start_date), _date_from_int(end_date), symbol
                )
            )
    if schema_code != SCHEMA_MIXED and schema_code not in SCHEMA_NAMES:
        raise SchemaError(f"{where}: unknown DBN schema code {schema_code} in the metadata header.")
    return DbnMetadata(
        version=version,
        dataset=dataset,
        schema=None if schema_code == SCHEMA_MIXED else SCHEMA_NAMES[schema_code],
        start=start,
        end=None if end == UNDEF_TIMESTAMP else end,
        limit=limit,
        stype_in=None
        if stype_in_code == 0xFF
        else STYPE_NAMES.get(stype_in_code, str(stype_in_code)),
        stype_out=STYPE_NAMES.get(stype_out_code, str(stype_out_code)),
        ts_out=bool(ts_out),
        symbols=symbols,
        partial=partial,
        not_found=not_found,
        mappings=tuple(mappings),
    )


def _encode_cstr(value: str, width: int) -> bytes:
    raw = value.encode("ascii")
    if len(raw) >= width:
        raise ValueError(f"symbol {value!r} does not fit a {width}-byte DBN symbol field")
    return raw.ljust(width, b"\0")


def encode_metadata(meta: DbnMetadata) -> bytes:
    """Encode `meta` as a complete DBN prefix + metadata header (version 2 or 3).

    The result is what a DBN stream starts with; records follow it directly. Version 3
    pads the header to a multiple of 8 bytes, as Databento's encoder does.
    """
    if meta.version not in (2, 3):
        raise ValueError(f"fxstore writes DBN versions 2 and 3, not {meta.version}")
    width = meta.symbol_cstr_len
    schema_code = next(code for code, name in SCHEMA_NAMES.items() if name == meta.schema)
    parts = [
        _encode_cstr(meta.dataset, 16),
        struct.pack(
            "<HQQQBBBH",
            schema_code,
            meta.start,
            UNDEF_TIMESTAMP if meta.end is None else meta.end,
            meta.limit,
            0xFF if meta.stype_in is None else STYPE_CODES[meta.stype_in],
            STYPE_CODES[meta.stype_out],
            int(meta.ts_out),
            width,
        ),
        b"\0" * 53,
        struct.pack("<I", 0),  # schema definition length: always 0
    ]
    for names in (meta.symbols, meta.partial, meta.not_found):
        parts.append(struct.pack("<I", len(names)))
        parts.extend(_encode_cstr(name, width) for name in names)
    by_raw: dict[str, list[SymbolInterval]] = {}
    for interval in meta.mappings:
        by_raw.setdefault(interval.raw_symbol, []).append(interval)
    parts.append(struct.pack("<I", len(by_raw)))
    for raw_symbol, intervals in by_raw.items():
        parts.append(_encode_cstr(raw_symbol, width))
        parts.append(struct.pack("<I", len(intervals)))
        for iv in intervals:
            parts.append(struct.pack("<II", _date_to_int(iv.start_date), _date_to_int(iv.end_date)))
            parts.append(_encode_cstr(iv.symbol, width))
    body = b"".join(parts)
    if meta.version == 3:
        body += b"\0" * (-(8 + len(body)) % 8)
    return DBN_MAGIC + bytes([meta.version]) + struct.pack("<I", len(body)) + body
