"""Deliver the record chunks of several files in one ts_recv order: a streaming k-way merge.

Files are ranked by (first ts_recv, name) and opened only when the merge can reach them, so
day files that do not overlap are passed through chunk by chunk, one open file at a time.
Where files overlap, every step emits the records that no unread chunk can precede: all
records up to the smallest "last ts_recv of the current chunk" over the open files (the
horizon), ordered by (ts_recv, file rank, record index) with a stable argsort.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["Mbp10Chunk", "MergeInput", "Piece", "merge_in_ts_order"]


@dataclass(frozen=True, slots=True)
class Mbp10Chunk:
    """A run of MBP-10 records from one file, in ts_recv order.

    Chunks of several files come out in one global ts_recv order (ties: the file ranked
    first). `records` is often a view of a decompressed block; blocks are never reused, so a
    chunk stays valid after iteration moves on.
    """

    #: (n,) MBP10_DTYPE, C-contiguous, n >= 1, ts_recv non-decreasing.
    records: npt.NDArray[np.void]
    #: The file every record of the chunk came from.
    path: Path
    #: Index of records[0] among the MBP-10 records of `path` (0-based, before any
    #: instrument filter). Without a filter records[i] is record first_index + i.
    first_index: int


@dataclass(frozen=True, slots=True)
class Piece:
    """A filtered block of one file: `records` are the rows of the block where `mask` holds."""

    records: npt.NDArray[np.void]
    first_index: int
    #: Which rows of the unfiltered block were kept; None when all were.
    mask: npt.NDArray[np.bool_] | None

    def indices(self) -> npt.NDArray[np.int64]:
        """Index within the file of every record in `records`."""
        if self.mask is None:
            return self.first_index + np.arange(self.records.size, dtype=np.int64)
        return self.first_index + np.flatnonzero(self.mask)

    def chunk(self, path: Path) -> Mbp10Chunk:
        first = 0 if self.mask is None else int(np.argmax(self.mask))
        return Mbp10Chunk(self.records, path, self.first_index + first)


@dataclass(frozen=True, slots=True)
class MergeInput:
    """One file for the merge; `open` starts its stream of non-empty pieces."""

    path: Path
    #: ts_recv of its first record; files are activated in this order.
    first_ts: int
    open: Callable[[], Generator[Piece, None, None]]


class _Cursor:
    """The open stream of one file and the unread part of its current piece."""

    def __init__(self, rank: int, source: MergeInput) -> None:
        self.rank = rank
        self.path = source.path
        self.pieces = source.open()
        self.piece: Piece | None = None
        self.pos = 0
        self._ts: npt.NDArray[np.uint64] | None = None
        self._indices: npt.NDArray[np.int64] | None = None

    def ready(self) -> bool:
        """Load the next piece if the current one is used up; False at the end of the file."""
        while self.piece is None or self.pos == self.piece.records.size:
            piece = next(self.pieces, None)
            if piece is None:
                return False
            self.piece, self.pos, self._ts, self._indices = piece, 0, None, None
        return True

    @property
    def last_ts(self) -> int:
        assert self.piece is not None  # ready() was called
        return int(self.piece.records["ts_recv"][-1])

    def unread_ts(self) -> npt.NDArray[np.uint64]:
        assert self.piece is not None
        if self._ts is None:
            self._ts = np.ascontiguousarray(self.piece.records["ts_recv"])
        return self._ts[self.pos :]

    def take(self, n: int | None = None) -> Mbp10Chunk:
        """Return the next `n` unread records (all of them when None) as a chunk."""
        piece = self.piece
        assert piece is not None
        if self.pos == 0 and (n is None or n == piece.records.size):
            self.pos = piece.records.size
            return piece.chunk(self.path)
        if self._indices is None:
            self._indices = piece.indices()
        end = piece.records.size if n is None else self.pos + n
        chunk = Mbp10Chunk(piece.records[self.pos : end], self.path, int(self._indices[self.pos]))
        self.pos = end
        return chunk


def _merge_window(active: list[_Cursor]) -> Iterator[Mbp10Chunk]:
    """Emit, in (ts_recv, rank) order, every record that no unread chunk can precede."""
    star = min(active, key=lambda c: (c.last_ts, c.rank))
    horizon = np.uint64(star.last_ts)
    # A record at exactly the horizon is safe from files ranked up to `star` (their next
    # chunks start at or after their own last ts); later-ranked files must wait for `star`.
    counts = [
        int(np.searchsorted(c.unread_ts(), horizon, "right" if c.rank <= star.rank else "left"))
        for c in active
    ]
    window = [(c, n) for c, n in zip(active, counts, strict=True) if n]
    if len(window) == 1:
        yield window[0][0].take(window[0][1])
        return
    ts = np.concatenate([c.unread_ts()[:n] for c, n in window])
    order = np.argsort(ts, kind="stable")  # stable: ties keep (rank, index) order
    source = np.repeat(np.arange(len(window)), [n for _, n in window])[order]
    starts = np.flatnonzero(np.diff(source, prepend=-1))
    lengths = np.diff(starts, append=source.size)
    for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
        yield window[source[start]][0].take(length)


def merge_in_ts_order(sources: Sequence[MergeInput]) -> Iterator[Mbp10Chunk]:
    """Yield the chunks of `sources` in ts_recv order; each source must be ts_recv-sorted.

    `sources` must be given in rank order: sorted by (first_ts, name).
    """
    pending = deque(enumerate(sources))
    active: list[_Cursor] = []
    try:
        while True:
            active = [c for c in active if c.ready()]
            if not active:
                if not pending:
                    return
                active.append(_Cursor(*pending.popleft()))
                continue
            horizon = min(c.last_ts for c in active)
            if pending and pending[0][1].first_ts <= horizon:
                active.append(_Cursor(*pending.popleft()))
            elif len(active) == 1:
                yield active[0].take()  # disjoint files: no merge work at all
            else:
                yield from _merge_window(active)
    finally:
        for cursor in active:
            cursor.pieces.close()
