"""Check that a Zstandard file is complete, without decompressing it.

python-zstandard's streaming reader stops silently where a file was cut off mid-frame, so
the reader walks the frame and block headers first (RFC 8878 §3.1): a frame header, 3-byte
block headers up to the block flagged last, an optional 4-byte checksum; skippable frames
carry their own size. A numba kernel walks read-only maps of the file, 64 MiB at a time: a
block holds at most 128 KiB of output, so 1.8 GB of records are about 15k header reads, and
the cost is mapping the pages (about 4 ms for a 60 MB file in the page cache; 48 such files
took 0.64 s with one ``pread`` per header).
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit
from fxstore.errors import InvalidInputError, SchemaError
from fxstore.ingest.dbn.format import DAMAGED

I64 = npt.NDArray[np.int64]

__all__ = ["check_zstd_complete", "walk_frames"]

_FRAME_MAGIC: Final = 0xFD2FB528
_SKIPPABLE_MASK: Final = 0xFFFFFFF0
_SKIPPABLE_MAGIC: Final = 0x184D2A50
_BLOCK_HEADER: Final = 3
_RLE_BLOCK: Final = 1
_RESERVED_BLOCK: Final = 3

# Outcomes of the walk; `at` is the byte the message names.
_OK: Final = 0
_TRUNCATED: Final = 1  # at = start of the frame that runs past the end
_RESERVED_BIT: Final = 2  # at = the frame header descriptor byte
_RESERVED_BLOCK_TYPE: Final = 3  # at = the block header
_NO_FRAME: Final = 4  # at = where a frame should start
_NEED_MORE: Final = 5  # the walk goes on past the mapped window
#: A frame header is at most 18 bytes (magic 4, descriptor 1, window 1, dictionary id 4,
#: content size 8); a skippable frame's is 8, a block's 3.
_MAX_HEADER: Final = 18
#: Bytes of the file mapped at a time: the walk touches every page, and mapped pages count
#: in the process's resident memory while they are mapped.
_WINDOW: Final = 64 << 20


@njit
def _le(data: npt.NDArray[np.uint8], pos: int, n: int) -> int:
    """`n` bytes at `pos` as a little-endian unsigned int (widened to int64 first)."""
    value = 0
    for i in range(n):
        value |= int(np.int64(data[pos + i])) << (8 * i)
    return value


@njit
def walk_frames(data: npt.NDArray[np.uint8], offset: int, size: int, state: I64) -> tuple[int, int]:
    """Walk the frames of a `size`-byte file through `data`, its bytes from `offset` on.

    `state` (int64: position, frame start, frame descriptor, 1 inside a frame's blocks)
    carries the walk from one window of the file to the next. Returns ``(outcome, at)``:
    _NEED_MORE when the walk reached the end of `data` before the end of the file (map the
    bytes from ``state[0]`` on and call again), else the outcome for the whole file.
    """
    end = offset + data.shape[0]
    pos, frame, descriptor, in_blocks = state[0], state[1], state[2], state[3]
    while pos < size or in_blocks:
        if pos + _MAX_HEADER > end and end < size:  # the next header may lie past the window
            state[0], state[1], state[2], state[3] = pos, frame, descriptor, in_blocks
            return _NEED_MORE, pos
        if in_blocks:
            if pos + _BLOCK_HEADER > size:
                return _TRUNCATED, frame
            header = _le(data, pos - offset, _BLOCK_HEADER)
            block_type = (header >> 1) & 3
            if block_type == _RESERVED_BLOCK:
                return _RESERVED_BLOCK_TYPE, pos
            pos += _BLOCK_HEADER + (1 if block_type == _RLE_BLOCK else header >> 3)
            if header & 1:  # last block of the frame
                in_blocks = 0
                if (descriptor >> 2) & 1:
                    pos += 4  # content checksum
                if pos > size:
                    return _TRUNCATED, frame
            continue
        if pos + 4 > size:
            return _TRUNCATED, pos
        magic = _le(data, pos - offset, 4)
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            if pos + 8 > size or pos + 8 + _le(data, pos - offset + 4, 4) > size:
                return _TRUNCATED, pos
            pos += 8 + _le(data, pos - offset + 4, 4)
            continue
        if magic != _FRAME_MAGIC:
            return _NO_FRAME, pos
        frame = pos
        if pos + 5 > size:
            return _TRUNCATED, frame
        descriptor = int(np.int64(data[pos - offset + 4]))
        if descriptor & 0x08:
            return _RESERVED_BIT, pos + 4
        single_segment = (descriptor >> 5) & 1
        fcs_flag = descriptor >> 6
        content_size_bytes = single_segment if fcs_flag == 0 else 1 << fcs_flag
        dict_flag = descriptor & 3
        dict_bytes = 4 if dict_flag == 3 else dict_flag
        pos += 5 + (1 - single_segment) + dict_bytes + content_size_bytes
        in_blocks = 1
    return _OK, pos


def check_zstd_complete(path: Path, size: int) -> None:
    """Raise SchemaError unless every frame of the `size`-byte file `path` is complete."""
    where = f"{path}: the Zstandard data"
    state = np.zeros(4, np.int64)
    outcome, at, head = _NEED_MORE, 0, b""
    try:
        with path.open("rb") as fh:
            while outcome == _NEED_MORE and size:
                offset = int(state[0]) // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
                length = min(_WINDOW, size - offset)
                with mmap.mmap(fh.fileno(), length, access=mmap.ACCESS_READ, offset=offset) as m:
                    data = np.frombuffer(m, np.uint8)
                    outcome, at = walk_frames(data, offset, size, state)
                    if outcome == _NO_FRAME:
                        head = bytes(data[at - offset : at - offset + 4])
                    del data  # the map cannot close while an array views it
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot read the file ({err.strerror}).") from err
    if outcome == _TRUNCATED:
        raise SchemaError(
            f"{where} is truncated: the frame starting at byte {at} ends past the end of the "
            f"file ({size} bytes); the file was cut short: download it again."
        )
    if outcome == _RESERVED_BIT:
        raise SchemaError(f"{where} is corrupt: reserved bit set at byte {at}; {DAMAGED}.")
    if outcome == _RESERVED_BLOCK_TYPE:
        raise SchemaError(f"{where} is corrupt: reserved block type at byte {at}; {DAMAGED}.")
    if outcome == _NO_FRAME:
        raise SchemaError(
            f"{where} is corrupt: no frame starts at byte {at} ({head!r}); {DAMAGED}."
        )
