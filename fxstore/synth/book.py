"""Numba kernels for the synthetic 10-level books and for writing MBP-10 records.

Books are kept in ticks (int64) per instrument and side (0 = bid, 1 = ask), best level first:
bid prices strictly descending, ask prices strictly ascending, every non-empty level with
1 <= count <= size, and the first ``nlev`` levels filled. Records are written straight into
a buffer of :data:`~fxstore.ingest.dbn.format.MBP10_DTYPE` through integer views, whose
offsets are taken from that dtype, so no Python object is made per record.
"""

from __future__ import annotations

import logging
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit, njit_inner
from fxstore.ingest import MBP10_DTYPE, N_LEVELS, RTYPE_MBP10, UNDEF_PRICE
from fxstore.synth.rng import geometric, next_uniform

__all__ = [
    "ACTION_ADD",
    "ACTION_CANCEL",
    "ACTION_MODIFY",
    "ACTION_TRADE",
    "ASK",
    "BID",
    "Books",
    "Records",
    "emit",
    "init_book",
    "insert_level",
    "new_books",
    "record_views",
    "remove_level",
    "set_flags",
]

logger = logging.getLogger(__name__)

BID: Final = 0
ASK: Final = 1
SIDE_BYTE: Final = np.array([ord("B"), ord("A")], dtype=np.uint8)
ACTION_ADD: Final = ord("A")
ACTION_CANCEL: Final = ord("C")
ACTION_MODIFY: Final = ord("M")
ACTION_TRADE: Final = ord("T")
_UNDEF: Final = np.int64(UNDEF_PRICE)
_RECORD_WORDS: Final = MBP10_DTYPE.itemsize // 4  # the header's `length` field: 92


def _at(name: str, width: int) -> int:
    offset = int(MBP10_DTYPE.fields[name][1])  # type: ignore[index]
    if offset % width:
        raise AssertionError(f"MBP-10 field {name} is not {width}-byte aligned")
    return offset // width


# Byte / 4-byte-word / 8-byte-word indices of every field within one 368-byte record.
_B_RTYPE: Final = _at("rtype", 1)
_B_PUBLISHER: Final = _at("publisher_id", 1)
_B_ACTION: Final = _at("action", 1)
_B_SIDE: Final = _at("side", 1)
_B_FLAGS: Final = _at("flags", 1)
_B_DEPTH: Final = _at("depth", 1)
_W_INSTRUMENT: Final = _at("instrument_id", 4)
_W_SIZE: Final = _at("size", 4)
_W_TS_IN_DELTA: Final = _at("ts_in_delta", 4)
_W_SEQUENCE: Final = _at("sequence", 4)
_Q_TS_EVENT: Final = _at("ts_event", 8)
_Q_PRICE: Final = _at("price", 8)
_Q_TS_RECV: Final = _at("ts_recv", 8)
# Level l of side s (0 bid, 1 ask): price at 8-byte word _Q_PX0 + s + 4l, size and count at
# 4-byte words _W_SZ0 + s + 8l and _W_CT0 + s + 8l (DBN interleaves bid/ask per level).
_Q_PX0: Final = _at("bid_px_00", 8)
_W_SZ0: Final = _at("bid_sz_00", 4)
_W_CT0: Final = _at("bid_ct_00", 4)


def _check_level_layout() -> None:
    for level in range(N_LEVELS):
        for side, name in enumerate(("bid", "ask")):
            if (
                _at(f"{name}_px_{level:02d}", 8) != _Q_PX0 + side + 4 * level
                or _at(f"{name}_sz_{level:02d}", 4) != _W_SZ0 + side + 8 * level
                or _at(f"{name}_ct_{level:02d}", 4) != _W_CT0 + side + 8 * level
            ):
                raise AssertionError("MBP10_DTYPE levels are not in DBN's interleaved layout")


_check_level_layout()
_PUBLISHER_GLBX: Final = 1  # GLBX.MDP3


class Books(NamedTuple):
    """The books of every instrument of one day. Prices in ticks; side 0 bid, 1 ask."""

    #: (n_instruments, 2, 10) level prices in ticks; unused slots are undefined.
    px: npt.NDArray[np.int64]
    #: (n_instruments, 2, 10) level sizes (contracts).
    sz: npt.NDArray[np.int64]
    #: (n_instruments, 2, 10) orders per level.
    ct: npt.NDArray[np.int64]
    #: (n_instruments, 2) number of filled levels per side.
    nlev: npt.NDArray[np.int64]
    #: (n_instruments,) levels per side the instrument keeps when one is taken away.
    depth_target: npt.NDArray[np.int64]


class Records(NamedTuple):
    """Integer views of one MBP-10 record buffer: bytes, 4-byte and 8-byte words per record."""

    u8: npt.NDArray[np.uint8]
    u32: npt.NDArray[np.uint32]
    i64: npt.NDArray[np.int64]


def new_books(depth_target: npt.NDArray[np.int64]) -> Books:
    """Empty books for ``len(depth_target)`` instruments."""
    n = len(depth_target)
    shape = (n, 2, N_LEVELS)
    return Books(
        px=np.zeros(shape, dtype=np.int64),
        sz=np.zeros(shape, dtype=np.int64),
        ct=np.zeros(shape, dtype=np.int64),
        nlev=np.zeros((n, 2), dtype=np.int64),
        depth_target=np.asarray(depth_target, dtype=np.int64),
    )


def record_views(buffer: npt.NDArray[np.void]) -> Records:
    """Views of a C-contiguous MBP10_DTYPE `buffer` for the kernels to write through."""
    n = len(buffer)
    raw = buffer.view(np.uint8).reshape(n, MBP10_DTYPE.itemsize)
    return Records(u8=raw, u32=raw.view(np.uint32), i64=raw.view(np.int64))


@njit_inner
def new_level_size(key: np.uint64, ctr: npt.NDArray[np.int64], level: int) -> tuple[int, int]:
    """Size and order count of a fresh level `level` deep: deeper levels hold more."""
    size = geometric(next_uniform(key, ctr, 0), 12.0 + 6.0 * level)
    count = 1 + int(next_uniform(key, ctr, 0) * min(size, 8))
    return size, count


@njit
def insert_level(
    books: Books, j: int, side: int, pos: int, price: int, size: int, count: int
) -> None:
    """Insert a level at index `pos` of one side; the tenth level falls off a full side."""
    n = books.nlev[j, side]
    last = min(n, N_LEVELS - 1)
    for k in range(last, pos, -1):
        books.px[j, side, k] = books.px[j, side, k - 1]
        books.sz[j, side, k] = books.sz[j, side, k - 1]
        books.ct[j, side, k] = books.ct[j, side, k - 1]
    books.px[j, side, pos] = price
    books.sz[j, side, pos] = size
    books.ct[j, side, pos] = count
    books.nlev[j, side] = min(n + 1, N_LEVELS)


@njit
def remove_level(
    books: Books, j: int, side: int, pos: int, key: np.uint64, ctr: npt.NDArray[np.int64]
) -> None:
    """Remove level `pos` of one side; a full 10-deep book reveals a new tenth level."""
    n = books.nlev[j, side]
    for k in range(pos, n - 1):
        books.px[j, side, k] = books.px[j, side, k + 1]
        books.sz[j, side, k] = books.sz[j, side, k + 1]
        books.ct[j, side, k] = books.ct[j, side, k + 1]
    if n == N_LEVELS and books.depth_target[j] == N_LEVELS:
        step = 2 if next_uniform(key, ctr, 0) < 0.15 else 1
        direction = -1 if side == BID else 1
        size, count = new_level_size(key, ctr, N_LEVELS - 1)
        books.px[j, side, n - 1] = books.px[j, side, n - 2] + direction * step
        books.sz[j, side, n - 1] = size
        books.ct[j, side, n - 1] = count
    else:
        books.nlev[j, side] = n - 1


@njit
def init_book(
    books: Books, j: int, best_bid: int, key: np.uint64, ctr: npt.NDArray[np.int64]
) -> None:
    """Fill instrument `j` with ``depth_target`` levels a side around a 1-tick spread."""
    for side in range(2):
        direction = -1 if side == BID else 1
        price = best_bid if side == BID else best_bid + 1
        for level in range(books.depth_target[j]):
            if level >= 2 and next_uniform(key, ctr, 0) < 0.1:
                price += direction  # an occasional empty price between levels
            size, count = new_level_size(key, ctr, level)
            books.px[j, side, level] = price
            books.sz[j, side, level] = size
            books.ct[j, side, level] = count
            price += direction
        books.nlev[j, side] = books.depth_target[j]


@njit
def emit(
    rec: Records,
    i: int,
    books: Books,
    j: int,
    header: npt.NDArray[np.int64],
    action: int,
    side_byte: int,
    depth: int,
    price: int,
    size: int,
    flags: int,
) -> None:
    """Write record `i`: one event on instrument `j` plus its whole book after the event.

    `header` holds (instrument_id, ts_event, ts_recv, ts_in_delta, sequence, tick_fixed);
    `price` is in ticks and is scaled by tick_fixed to DBN's 1e-9 fixed point.
    """
    tick = header[5]
    rec.u8[i, 0] = _RECORD_WORDS
    rec.u8[i, _B_RTYPE] = RTYPE_MBP10
    rec.u8[i, _B_PUBLISHER] = _PUBLISHER_GLBX
    rec.u8[i, _B_PUBLISHER + 1] = 0
    rec.u32[i, _W_INSTRUMENT] = header[0]
    rec.i64[i, _Q_TS_EVENT] = header[1]
    rec.i64[i, _Q_PRICE] = price * tick
    rec.u32[i, _W_SIZE] = size
    rec.u8[i, _B_ACTION] = action
    rec.u8[i, _B_SIDE] = side_byte
    rec.u8[i, _B_FLAGS] = flags
    rec.u8[i, _B_DEPTH] = depth
    rec.i64[i, _Q_TS_RECV] = header[2]
    rec.u32[i, _W_TS_IN_DELTA] = header[3]
    rec.u32[i, _W_SEQUENCE] = header[4]
    for side in range(2):
        n = books.nlev[j, side]
        for level in range(N_LEVELS):
            q, w = _Q_PX0 + side + 4 * level, side + 8 * level
            if level < n:
                rec.i64[i, q] = books.px[j, side, level] * tick
                rec.u32[i, _W_SZ0 + w] = books.sz[j, side, level]
                rec.u32[i, _W_CT0 + w] = books.ct[j, side, level]
            else:
                rec.i64[i, q] = _UNDEF
                rec.u32[i, _W_SZ0 + w] = 0
                rec.u32[i, _W_CT0 + w] = 0


@njit_inner
def set_flags(rec: Records, i: int, flags: int) -> None:
    """OR `flags` into the flags byte of record `i` (e.g. F_LAST on a packet's last record)."""
    rec.u8[i, _B_FLAGS] |= flags
