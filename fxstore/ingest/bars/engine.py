"""The state of one instrument-day's streaming bars, between the kernels and the public API.

:class:`BarEngine` owns the arrays the kernels of :mod:`fxstore.ingest.bars.stream` carry from
chunk to chunk: a few scalars, the previous consistent book, the day's last F_LAST record, three
accumulator rows and the bar arrays, which grow by doubling. Its memory is O(bars + chunk),
whatever the day's length: records are read in place and only a bar's closing record is copied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fxstore.config import BarConfig
from fxstore.errors import InvalidInputError, SchemaError
from fxstore.ingest.bars import stream
from fxstore.ingest.bars.kernels import BI_START, N_BF, N_BI, N_LEVELS, RECORD_BYTES
from fxstore.ingest.bars.params import bar_params
from fxstore.ingest.dbn.format import MBP10_DTYPE


@dataclass(frozen=True, slots=True)
class BarArrays:
    """A finished day's bars, one row each, in order."""

    #: int64 (n_bars, N_BI): see the BI_* columns of ``_bar_kernels``.
    ints: npt.NDArray[np.int64]
    #: float64 (n_bars, N_BF): see the BF_* columns.
    floats: npt.NDArray[np.float64]
    #: MBP10_DTYPE (n_bars,): the record whose book each bar closes with (see BI_HAS_BOOK).
    books: npt.NDArray[np.void]
    #: The records' instrument_id; None when there were none.
    instrument_id: int | None
    #: 'T' records skipped as damaged (undefined price or size 0).
    n_damaged: int
    #: Records outside the session (before its open or after its close): in no bar.
    n_out_of_session: int


class BarEngine:
    """Streams one instrument's records of one day into bars (see ``BarBuilder``)."""

    def __init__(
        self,
        config: BarConfig,
        *,
        instrument_id: int | None,
        session_open_ns: int,
        session_close_ns: int,
        price_range: tuple[float, float] | None = None,
        tick_size: float | None = None,
    ) -> None:
        self._params = bar_params(
            config, int(session_open_ns), int(session_close_ns), price_range, tick_size
        )
        st_i = np.zeros(stream.N_SI, dtype=np.int64)
        st_i[stream.SI_LAST_TS] = np.iinfo(np.int64).min
        st_i[stream.SI_INSTRUMENT] = -1 if instrument_id is None else instrument_id
        st_i[stream.SI_INTERVAL] = -1
        st_i[stream.SI_NEXT_INTERVAL_NS] = np.iinfo(np.int64).min  # the first record starts one
        st_f = np.zeros(stream.N_SF, dtype=np.float64)
        st_f[stream.SF_THRESHOLD] = self._params.threshold
        st_f[stream.SF_MIN_TRADES], st_f[stream.SF_MAX_TRADES] = 1.0, math.inf
        st_f[stream.SF_FLOW + 2] = 1.0  # (1 - alpha)^n_day
        prev_book = np.zeros((4, N_LEVELS), dtype=np.int64)
        self._state = (st_i, st_f, prev_book, np.zeros(RECORD_BYTES, dtype=np.uint8))
        self._acc = (np.zeros((3, N_BI), np.int64), np.zeros((3, N_BF), np.float64))
        self._acc[0][:, BI_START] = -1  # empty
        self._bars = self._allocate(64)

    @staticmethod
    def _allocate(
        capacity: int,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
        return (
            np.empty((capacity, N_BI), dtype=np.int64),
            np.empty((capacity, N_BF), dtype=np.float64),
            np.empty((capacity, RECORD_BYTES), dtype=np.uint8),
        )

    @property
    def n_bars(self) -> int:
        return int(self._state[0][stream.SI_N_BARS])

    def _reserve(self, extra: int) -> None:
        """Make room for `extra` more bars (a chunk closes at most one per record)."""
        need, capacity = self.n_bars + extra, self._bars[0].shape[0]
        if need <= capacity:
            return
        n, grown = self.n_bars, self._allocate(max(need, 2 * capacity))
        grown[0][:n], grown[1][:n], grown[2][:n] = (
            self._bars[0][:n],
            self._bars[1][:n],
            self._bars[2][:n],
        )
        self._bars = grown

    def update(self, records: np.ndarray, where: str, rows: np.ndarray | None = None) -> None:
        """Add a C-contiguous MBP10_DTYPE chunk, or its `rows` (int64, ascending; None: all);
        raise, changing nothing, if rows are not ascending indices into the chunk, or the
        records are out of order or of another instrument."""
        if rows is None:
            rows = np.arange(records.shape[0], dtype=np.int64)
        n = rows.shape[0]
        if n == 0:
            return
        self._reserve(n + 1)
        m = records.shape[0]
        chunk = (
            records.view(np.int64).reshape(m, RECORD_BYTES // 8),
            records.view(np.uint32).reshape(m, RECORD_BYTES // 4),
            records.view(np.uint8).reshape(m, RECORD_BYTES),
        )
        st_i = self._state[0]
        known = int(st_i[stream.SI_INSTRUMENT])
        status, row = stream.update_bars(
            chunk, rows, self._params, self._state, self._acc, self._bars
        )
        if status == stream.BAD_ROWS:
            raise InvalidInputError(
                f"{where}: `rows` must be ascending indices into the {m} records, "
                f"rows[{row}] is {int(rows[row])}; sort them and drop duplicates."
            )
        if status == stream.BACK_IN_TIME:
            index = int(st_i[stream.SI_N_SEEN]) + row
            raise SchemaError(
                f"{where}: records must be sorted by ts_recv; record {index} goes back in time."
            )
        if status == stream.OTHER_INSTRUMENT:
            ids = records["instrument_id"][rows]
            unique = np.unique(ids if known < 0 else np.r_[ids, known])
            shown = ", ".join(str(i) for i in unique[:5])
            also = "" if known < 0 else f" (this builder's is {known})"
            raise InvalidInputError(
                f"{where}: records hold {unique.size} instruments ({shown}){also}; "
                "pass one instrument's."
            )

    def finish(self) -> BarArrays:
        """Close the day's last bar and return the bars; the engine is spent afterwards."""
        self._reserve(1)
        stream.finish_bars(self._params, self._state, self._acc, self._bars)
        n, st_i = self.n_bars, self._state[0]
        known = int(st_i[stream.SI_INSTRUMENT])
        return BarArrays(
            ints=self._bars[0][:n],
            floats=self._bars[1][:n],
            books=self._bars[2][:n].view(MBP10_DTYPE).reshape(n),
            instrument_id=None if known < 0 else known,
            n_damaged=int(st_i[stream.SI_N_DAMAGED]),
            n_out_of_session=int(st_i[stream.SI_N_OUT]),
        )
