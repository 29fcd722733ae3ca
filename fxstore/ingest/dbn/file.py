"""One DBN file: sniffing, the metadata header, and its MBP-10 records in bounded blocks.

The record stream is read in blocks of ``chunk_records`` MBP-10 records. A block of pure
MBP-10 records (checked with one strided comparison of the record headers) becomes a
zero-copy structured view; a block holding other records is walked by a numba kernel that
keeps the MBP-10 records, parses SymbolMapping records and counts the rest.
"""

from __future__ import annotations

import hashlib
import io
import logging
import struct
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt
import zstandard

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.ingest.dbn.blocks import BlockDecoder, check_order
from fxstore.ingest.dbn.format import (
    DAMAGED,
    DBN_MAGIC,
    DBZ_SKIPPABLE_MAGIC_HIGH,
    DBZ_SKIPPABLE_MAGIC_LOW,
    MBP10_DTYPE,
    SUPPORTED_VERSIONS,
    TS_OUT_BYTES,
    ZSTD_MAGIC,
    DbnMetadata,
    decode_metadata,
)
from fxstore.ingest.dbn.symbology import Symbology
from fxstore.ingest.dbn.zstd import check_zstd_complete

__all__ = [
    "DbnFile",
    "FileCounters",
    "FileStats",
    "iter_file_records",
    "open_dbn_file",
    "open_dbn_head",
]

logger = logging.getLogger(__name__)

_PREFIX_BYTES: Final = 8  # b"DBN" + version:u8 + metadata length:u32
#: Compressed bytes the zstd reader pulls from the file per read (measured: size is irrelevant).
_ZSTD_READ_SIZE: Final = 1 << 17


class _Readable(Protocol):
    def readinto(self, buffer: memoryview, /) -> int | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class DbnFile:
    """One validated DBN input file (see :func:`fxstore.ingest.dbn.reader.open_dbn`)."""

    path: Path
    metadata: DbnMetadata
    #: True for a Zstandard-compressed file (detected by its magic bytes, not its name).
    is_compressed: bool
    size_bytes: int
    #: Decompressed length of the prefix and metadata header: the byte offset of record 0.
    header_bytes: int
    #: ts_recv of the first MBP-10 record (ns since the epoch), None when it has none.
    first_ts_recv: int | None = None
    #: The first MBP-10 record's bytes (368), None when it has none: with the metadata, what
    #: tells a copy of a file from another file of the same request.
    first_record: bytes | None = None

    @property
    def record_bytes(self) -> int:
        """Bytes per MBP-10 record in this file: 368, or 376 with ts_out."""
        return MBP10_DTYPE.itemsize + (TS_OUT_BYTES if self.metadata.ts_out else 0)


@dataclass(frozen=True, slots=True)
class FileStats:
    """What reading one file found (before and after the instrument filter)."""

    path: Path
    #: MBP-10 records decoded.
    n_records: int
    #: MBP-10 records that passed the instrument filter (all of them without a filter).
    n_kept: int
    #: SymbolMapping records parsed into the symbology.
    n_symbol_mappings: int
    #: (rtype, count) of the other records passed over (system, error, status, ...).
    skipped_rtypes: tuple[tuple[int, int], ...]
    #: Bytes of a partial record at the end of a truncated stream, dropped with a warning.
    n_dropped_bytes: int
    #: ts_recv of the last MBP-10 record read (None before any).
    last_ts_recv: int | None
    #: Hex SHA-256 of the file's bytes, computed as they were read; None unless the read
    #: reached the end of the file.
    sha256: str | None = None

    @property
    def n_skipped(self) -> int:
        """Records other than MBP-10 and SymbolMapping that were passed over."""
        return sum(count for _, count in self.skipped_rtypes)


@dataclass(slots=True)
class FileCounters:
    """Mutable tallies of one read of one file; frozen into :class:`FileStats`."""

    n_records: int = 0
    n_kept: int = 0
    n_symbol_mappings: int = 0
    skipped: dict[int, int] = field(default_factory=dict)
    n_dropped_bytes: int = 0
    last_ts_recv: int | None = None
    sha256: str | None = None

    def freeze(self, path: Path) -> FileStats:
        return FileStats(
            path=path,
            n_records=self.n_records,
            n_kept=self.n_kept,
            n_symbol_mappings=self.n_symbol_mappings,
            skipped_rtypes=tuple(sorted(self.skipped.items())),
            n_dropped_bytes=self.n_dropped_bytes,
            last_ts_recv=self.last_ts_recv,
            sha256=self.sha256,
        )


def _sniff(path: Path) -> tuple[bool, int]:
    """Return (is_compressed, size) from the file's first bytes; raise for anything not DBN."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(8)
    except OSError as err:
        raise InvalidInputError(
            f"{path}: cannot read the file ({err.strerror}); check that it exists and is readable."
        ) from err
    return _sniff_head(path, head, size), size


def _sniff_head(path: Path, head: bytes, size: int) -> bool:
    """Whether the `size`-byte file starting with `head` is compressed; raise for anything
    not DBN."""
    if size == 0:
        raise SchemaError(f"{path}: the file is empty (0 bytes), not DBN; download it again.")
    if head.startswith(ZSTD_MAGIC):
        return True
    if head.startswith(DBN_MAGIC):
        return False
    if len(head) >= 4:
        (magic,) = struct.unpack_from("<I", head)
        if DBZ_SKIPPABLE_MAGIC_LOW <= magic <= DBZ_SKIPPABLE_MAGIC_HIGH:
            raise SchemaError(
                f"{path}: this is the legacy DBZ format (zstd skippable frame 0x{magic:08X} at "
                "byte 0), which fxstore does not read; convert it to DBN with Databento's "
                f"`dbn` CLI: dbn {path.name} -o {path.stem}.dbn.zst"
            )
    raise SchemaError(
        f"{path}: not a DBN file: it starts with {head[:8]!r}, expected b'DBN' or a Zstandard "
        "frame (28 b5 2f fd); pass Databento .dbn or .dbn.zst files."
    )


class _HashingReader:
    """A raw file that hashes the bytes read through it (so the input checksum costs no
    second pass over the file: the bytes are hashed while they are in cache)."""

    def __init__(self, fh: io.FileIO, digest: hashlib._Hash) -> None:
        self._fh = fh
        self.digest = digest

    def read(self, size: int = -1, /) -> bytes:
        data = self._fh.read(size)
        self.digest.update(data)
        return data

    def readinto(self, buffer: memoryview, /) -> int | None:
        n = self._fh.readinto(buffer)
        if n:
            self.digest.update(buffer[:n])
        return n

    def finish(self) -> str:
        """Hash what is left of the file (nothing, after the stream's end); the digest."""
        while data := self._fh.read(_ZSTD_READ_SIZE):
            self.digest.update(data)
        return self.digest.hexdigest()

    def close(self) -> None:
        self._fh.close()


def _open_raw(path: Path) -> io.FileIO:
    try:
        return io.FileIO(path, "r")
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot open the file ({err.strerror}).") from err


def _open_stream(path: Path, is_compressed: bool, raw: _Readable | None = None) -> _Readable:
    """The decompressed byte stream of `path` (read through `raw` when given)."""
    source: _Readable = _open_raw(path) if raw is None else raw
    if not is_compressed:
        return source
    reader: _Readable = zstandard.ZstdDecompressor().stream_reader(
        source,  # type: ignore[arg-type]  # any object with read() will do
        read_size=_ZSTD_READ_SIZE,
        read_across_frames=True,
        closefd=True,
    )
    return reader


def _read(stream: _Readable, n_bytes: int, path: Path) -> npt.NDArray[np.uint8]:
    """Read up to `n_bytes` (fewer only at the end of the stream) into a new array."""
    buf = np.empty(n_bytes, np.uint8)
    view = buf.data
    got = 0
    while got < n_bytes:
        try:
            n = stream.readinto(view[got:])
        except zstandard.ZstdError as err:
            raise SchemaError(f"{path}: the Zstandard data is corrupt ({err}); {DAMAGED}.") from err
        except OSError as err:
            raise InvalidInputError(f"{path}: reading failed ({err.strerror}).") from err
        if not n:
            break
        got += n
    return buf[:got]


def _read_header(stream: _Readable, path: Path) -> tuple[DbnMetadata, int]:
    prefix = _read(stream, _PREFIX_BYTES, path).tobytes()
    if not prefix.startswith(DBN_MAGIC):  # only reachable for zstd: _sniff checked plain files
        raise SchemaError(
            f"{path}: Zstandard-compressed but not DBN: the data starts with {prefix!r}, "
            "expected b'DBN'; pass Databento .dbn or .dbn.zst files."
        )
    if len(prefix) < _PREFIX_BYTES:
        raise SchemaError(f"{path}: the DBN prefix is truncated ({len(prefix)} bytes); {DAMAGED}.")
    version = prefix[3]
    if version not in SUPPORTED_VERSIONS:
        decode_metadata(version, b"", str(path))  # raises the one "version not supported" error
    (length,) = struct.unpack_from("<I", prefix, 4)
    body = _read(stream, length, path).tobytes()
    if len(body) < length:
        raise SchemaError(
            f"{path}: the DBN metadata header is truncated ({len(body)} of {length} bytes); "
            f"{DAMAGED}."
        )
    return decode_metadata(version, body, str(path)), _PREFIX_BYTES + length


def open_dbn_file(path: Path, *, check_frames: bool) -> DbnFile:
    """Sniff `path` and decode its metadata header (reads no records).

    With `check_frames`, a compressed MBP-10 file's Zstandard frames are then checked
    complete. A file of another schema is not: its schema is what the user must fix first,
    and :func:`~fxstore.ingest.dbn.reader.open_dbn` refuses it for that.
    """
    is_compressed, size = _sniff(path)
    stream = _open_stream(path, is_compressed)
    try:
        meta, header_bytes = _read_header(stream, path)
    except SchemaError:
        if is_compressed and check_frames:  # a cut or garbled stream: say that instead
            check_zstd_complete(path, size)
        raise
    finally:
        stream.close()
    if is_compressed and check_frames and meta.schema == "mbp-10":
        check_zstd_complete(path, size)
    return DbnFile(path, meta, is_compressed, size, header_bytes)


def open_dbn_head(path: Path, head: bytes, size: int) -> DbnFile:
    """Decode the metadata header of the `size`-byte file `path` from its first bytes `head`
    (an object in storage, read with a byte range: `path` is only its name here).

    Its Zstandard frames are not checked: whoever reads the whole file does
    (:func:`open_dbn_file` in the task that reads it). A `head` too short for the header
    raises SchemaError (read more bytes and call again).
    """
    is_compressed = _sniff_head(path, head[:8], size)
    stream = _open_stream(path, is_compressed, io.BytesIO(head))
    try:
        meta, header_bytes = _read_header(stream, path)
    finally:
        stream.close()
    return DbnFile(path, meta, is_compressed, size, header_bytes)


def iter_file_records(
    file: DbnFile,
    chunk_records: int,
    counters: FileCounters,
    symbology: Symbology,
    *,
    checksum: bool = True,
    head: bytes | None = None,
) -> Generator[tuple[npt.NDArray[np.void], int], None, None]:
    """Yield ``(records, first_index)`` of `file`, each at most `chunk_records` long.

    records is a C-contiguous MBP10_DTYPE array (a view of the decompressed block when it
    holds MBP-10 records only), first_index the index of records[0] among the file's MBP-10
    records. ts_recv order is checked within and across blocks. A partial record at the end
    of the stream is dropped and counted in ``counters.n_dropped_bytes``; warning about it is
    the caller's job, which knows whether this is the real read or a peek. With `checksum`,
    ``counters.sha256`` holds the file's checksum once the stream ends. With `head` (the
    first bytes of a file read elsewhere: :func:`open_dbn_head`), those are read instead of
    the file, and the records end where they end.
    """
    try:
        yield from _iter_records(
            file, chunk_records, counters, symbology, checksum=checksum, head=head
        )
    except SchemaError as err:
        # Garbled zstd blocks often decompress without complaint until the frame's checksum
        # at its end; records out of order or of no known shape are then the first sign.
        if head is None and file.is_compressed and (damage := _zstd_damage(file.path)):
            raise SchemaError(
                f"{file.path}: the Zstandard data is corrupt ({damage}); {DAMAGED}."
            ) from err
        raise


def _zstd_damage(path: Path) -> str | None:
    """Decompress all of `path` (discarding the output): the zstd error, or None if clean."""
    stream = _open_stream(path, True)
    view = memoryview(bytearray(1 << 20))
    try:
        while stream.readinto(view):
            pass
    except zstandard.ZstdError as err:
        return f"zstd decompress error: {err}".replace("zstd decompress error: zstd", "zstd")
    finally:
        stream.close()
    return None


def _iter_records(
    file: DbnFile,
    chunk_records: int,
    counters: FileCounters,
    symbology: Symbology,
    *,
    checksum: bool,
    head: bytes | None,
) -> Generator[tuple[npt.NDArray[np.void], int], None, None]:
    """The loop of :func:`iter_file_records`."""
    decoder = BlockDecoder(file, counters, symbology)
    block_bytes = chunk_records * file.record_bytes
    index, offset, last_ts = 0, file.header_bytes, None
    carry = np.empty(0, np.uint8)
    raw: _Readable | None = None
    if head is not None:
        raw = io.BytesIO(head)
    elif checksum:
        raw = _HashingReader(_open_raw(file.path), hashlib.sha256())
    stream = _open_stream(file.path, file.is_compressed, raw)
    try:
        _read(stream, file.header_bytes, file.path)
        while True:
            if carry.size:
                # Complete the partial record first, so big reads stay record-aligned.
                need = int(carry[0]) * 4 - carry.size
                tail = _read(stream, need, file.path)
                if tail.size < need:
                    counters.n_dropped_bytes += carry.size + tail.size
                    counters.sha256 = _finish(raw)
                    return
                buf = np.concatenate([carry, tail])
            else:
                buf = _read(stream, block_bytes, file.path)
                if not buf.size:
                    counters.sha256 = _finish(raw)
                    return
            parts, carry = decoder.decode(buf, offset, index)
            logger.debug("%s: block of %d bytes at byte %d", file.path, buf.size, offset)
            offset += buf.size - carry.size
            for records in parts:
                last_ts = check_order(records, last_ts, file.path, index)
                counters.n_records += records.size
                counters.last_ts_recv = last_ts
                yield records, index
                index += records.size
    finally:
        stream.close()


def _finish(raw: _Readable | None) -> str | None:
    """The file's checksum once its stream ended (None: not hashed, or read from a head)."""
    return raw.finish() if isinstance(raw, _HashingReader) else None
