"""Numba kernels of the DBN reader: the record-header walk and a row gather.

Pure functions over uint8 arrays: no I/O, no logging. They run only where a vectorised numpy
expression cannot (a variable-length record stream), so a file of pure MBP-10 records never
calls :func:`walk_records`.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit

__all__ = [
    "WALK_BAD_LENGTH",
    "WALK_BAD_MBP10_LENGTH",
    "WALK_BAD_SYMBOL_MAPPING_LENGTH",
    "WALK_OK",
    "gather_rows",
    "walk_records",
]

WALK_OK: Final = 0
WALK_BAD_LENGTH: Final = 1  # length byte 0, or shorter than the 16-byte record header
WALK_BAD_MBP10_LENGTH: Final = 2  # rtype 0x0A whose length is not the MBP-10 length
WALK_BAD_SYMBOL_MAPPING_LENGTH: Final = 3  # rtype 0x16 shorter than a SymbolMapping

_RTYPE_MBP10: Final = 0x0A
_RTYPE_SYMBOL_MAPPING: Final = 0x16
_HEADER_BYTES: Final = 16


@njit
def _byte(buf: npt.NDArray[np.uint8], pos: int) -> int:
    # Widen to a *signed* int64 first: numba types int(uint8) as uint64, and uint64 mixed
    # with int64 arithmetic silently becomes float64.
    return int(np.int64(buf[pos]))


@njit
def walk_records(
    buf: npt.NDArray[np.uint8], start: int, mbp10_bytes: int, symbol_mapping_bytes: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], int, int]:
    """Walk the variable-length records of ``buf[start:]`` by their length bytes.

    Returns ``(mbp10_offsets, symbol_mapping_offsets, other_counts, end, status)``: byte
    offsets of the MBP-10 and SymbolMapping records, how many records of every other rtype
    were passed over (``other_counts[rtype]``, shape (256,)), where the walk stopped, and a
    ``WALK_*`` status. With ``WALK_OK``, ``end`` is the offset of the first incomplete record
    (``len(buf)`` when none); otherwise it is the offset of the bad record, and the offsets
    cover only the records before it. ``mbp10_bytes`` and ``symbol_mapping_bytes`` include
    any ts_out suffix.
    """
    n = buf.shape[0]
    other_counts = np.zeros(256, np.int64)
    n_mbp10 = 0
    n_symbol = 0
    pos = start
    status = WALK_OK
    # First pass: validate lengths and count; the second pass fills exact-size arrays.
    while pos < n:
        length = _byte(buf, pos) * 4
        if length < _HEADER_BYTES:
            status = WALK_BAD_LENGTH
            break
        if pos + length > n:
            # A partial record: the normal end of a truncated stream, unless the length
            # already contradicts the rtype (then the length byte itself is corrupt).
            if pos + 1 < n and buf[pos + 1] == _RTYPE_MBP10 and length != mbp10_bytes:
                status = WALK_BAD_MBP10_LENGTH
            break
        rtype = buf[pos + 1]
        if rtype == _RTYPE_MBP10:
            if length != mbp10_bytes:
                status = WALK_BAD_MBP10_LENGTH
                break
            n_mbp10 += 1
        elif rtype == _RTYPE_SYMBOL_MAPPING:
            if length < symbol_mapping_bytes:
                status = WALK_BAD_SYMBOL_MAPPING_LENGTH
                break
            n_symbol += 1
        else:
            other_counts[rtype] += 1
        pos += length
    end = pos
    mbp10_offsets = np.empty(n_mbp10, np.int64)
    symbol_offsets = np.empty(n_symbol, np.int64)
    i_mbp10 = 0
    i_symbol = 0
    pos = start
    while pos < end:
        rtype = buf[pos + 1]
        if rtype == _RTYPE_MBP10:
            mbp10_offsets[i_mbp10] = pos
            i_mbp10 += 1
        elif rtype == _RTYPE_SYMBOL_MAPPING:
            symbol_offsets[i_symbol] = pos
            i_symbol += 1
        pos += _byte(buf, pos) * 4
    return mbp10_offsets, symbol_offsets, other_counts, end, status


@njit
def gather_rows(
    buf: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64], width: int
) -> npt.NDArray[np.uint8]:
    """Copy ``buf[offsets[i] : offsets[i] + width]`` into row i of a new (n, width) array."""
    out = np.empty((offsets.shape[0], width), np.uint8)
    for i in range(offsets.shape[0]):
        out[i, :] = buf[offsets[i] : offsets[i] + width]
    return out
