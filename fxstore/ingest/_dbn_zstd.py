"""Check that a Zstandard file is complete, without decompressing it.

python-zstandard's streaming reader stops silently where a file was cut off mid-frame, so
the reader walks the frame and block headers first (RFC 8878 §3.1): a frame header, 3-byte
block headers up to the block flagged last, an optional 4-byte checksum; skippable frames
carry their own size. One small ``pread`` per block (a block holds at most 128 KiB of
output): about 15k reads for 1.8 GB of records, 20-30 ms, and no memory mapped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from fxstore.errors import InvalidInputError, SchemaError

__all__ = ["check_zstd_complete"]

_FRAME_MAGIC: Final = 0xFD2FB528
_SKIPPABLE_MASK: Final = 0xFFFFFFF0
_SKIPPABLE_MAGIC: Final = 0x184D2A50
#: magic 4 + descriptor 1 + window 1 + dictionary id <= 4 + content size <= 8
_MAX_FRAME_HEADER: Final = 18
_BLOCK_HEADER: Final = 3
_RLE_BLOCK: Final = 1
_RESERVED_BLOCK: Final = 3
_DAMAGED: Final = "the file is damaged: download it again"


def _frame_header_bytes(descriptor: int) -> int:
    single_segment = (descriptor >> 5) & 1
    fcs_flag = descriptor >> 6
    content_size_bytes = single_segment if fcs_flag == 0 else 1 << fcs_flag
    dict_flag = descriptor & 3
    dict_bytes = 4 if dict_flag == 3 else dict_flag
    return 5 + (1 - single_segment) + dict_bytes + content_size_bytes


def _frame_end(fd: int, frame: int, size: int, where: str) -> int:
    """Return the offset just past the zstd frame starting at `frame` (magic checked)."""
    head = os.pread(fd, _MAX_FRAME_HEADER, frame)
    if len(head) < 5:
        raise _truncated(where, frame, size)
    descriptor = head[4]
    if descriptor & 0x08:
        raise SchemaError(f"{where} is corrupt: reserved bit set at byte {frame + 4}; {_DAMAGED}.")
    pos = frame + _frame_header_bytes(descriptor)
    while True:
        block = os.pread(fd, _BLOCK_HEADER, pos)
        if len(block) < _BLOCK_HEADER:
            raise _truncated(where, frame, size)
        header = int.from_bytes(block, "little")
        block_type = (header >> 1) & 3
        if block_type == _RESERVED_BLOCK:
            raise SchemaError(f"{where} is corrupt: reserved block type at byte {pos}; {_DAMAGED}.")
        pos += _BLOCK_HEADER + (1 if block_type == _RLE_BLOCK else header >> 3)
        if header & 1:  # last block of the frame
            break
    if (descriptor >> 2) & 1:
        pos += 4  # content checksum
    if pos > size:
        raise _truncated(where, frame, size)
    return pos


def _truncated(where: str, frame: int, size: int) -> SchemaError:
    return SchemaError(
        f"{where} is truncated: the frame starting at byte {frame} ends past the end of the "
        f"file ({size} bytes); the file was cut short: download it again."
    )


def check_zstd_complete(path: Path, size: int) -> None:
    """Raise SchemaError unless every frame of the `size`-byte file `path` is complete."""
    where = f"{path}: the Zstandard data"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot open the file ({err.strerror}).") from err
    try:
        pos = 0
        while pos < size:
            head = os.pread(fd, 8, pos)
            magic = int.from_bytes(head[:4], "little")
            if len(head) < 4:
                raise _truncated(where, pos, size)
            if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
                if len(head) < 8 or pos + 8 + int.from_bytes(head[4:], "little") > size:
                    raise _truncated(where, pos, size)
                pos += 8 + int.from_bytes(head[4:], "little")
            elif magic == _FRAME_MAGIC:
                pos = _frame_end(fd, pos, size, where)
            else:
                raise SchemaError(
                    f"{where} is corrupt: no frame starts at byte {pos} ({head[:4]!r}); {_DAMAGED}."
                )
    finally:
        os.close(fd)
