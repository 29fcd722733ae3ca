"""Bars from the MBP-10 records of one instrument over one trading day.

:func:`build_bars` turns the records (a structured array of
:data:`~fxstore.ingest.dbn.format.MBP10_DTYPE`, sorted by ``ts_recv``) into one row per bar with
the columns of :data:`BAR_SCHEMA`. Days are independent: a day's bars depend only on its records
and the :class:`~fxstore.config.BarConfig`, so a bar never spans a session break or a roll and
days can be built in parallel. :class:`BarBuilder` builds them from a stream of record chunks,
with memory in O(bars + chunk); the loops live in :mod:`fxstore.ingest.bars.stream`.

Conventions
-----------
Trades
    Records with action 'T'. Action 'F' (fill) is not counted: Databento's MBP schemas report
    trades as 'T', and 'F' belongs to the MBO schema, where it is the resting order's side of a
    trade already reported by 'T'; counting it would count trades twice. A 'T' record with an
    undefined price or size 0 is damaged: it is skipped with an FxStoreWarning.
Trade sign b
    The aggressor side from the data: side 'B' (buyer-initiated) is +1, 'A' is -1. Only where
    the side is unknown ('N') the tick rule applies (see ``sign_trades``); such trades are
    counted in ``n_tick_rule``. b = 0 only for an unsigned trade with no earlier trade that day
    (the opening auction print); it is in neither ``buy_volume`` nor ``sell_volume``.
Signed flow b·v
    v is 1 for tick bars, the size for volume and time bars, price × size × multiplier for
    dollar bars; ``imbalance`` is θ = Σ b·v over the bar's trades.
Bar boundaries
    A bar closes only at a record carrying F_LAST, where the book is consistent: a threshold
    crossed mid-packet closes the bar at the packet's F_LAST record, and the book at close is
    that record's. The day's last bar ends at the day's last record, its book being the last
    consistent one; ``is_partial`` marks it when the day ended before its own rule closed it
    (threshold not reached; a time interval cut by the session close). Only bars with a trade
    are emitted: time intervals without trades are skipped, and records outside every bar
    (skipped intervals, a trade-less tail) count in no bar's ``n_events`` or OFI.
Sessions
    A bar opens at or after the session open and closes at or before the session close.
    Records outside the session (the pre-open of the maintenance window, a weekend or a
    holiday, which :mod:`fxstore.market.calendar` assigns to the next session) are in no bar
    and count in no bar's ``n_events`` or OFI; the pre-open's last consistent book is the
    one the session's first OFI is measured against, so the first bar starts from the book
    the market opened on. Ingest counts them per day in the manifest (``n_out_of_session``).
Timestamps
    ``ts_open`` / ``ts_close`` are the ``ts_recv`` of the bar's first and last record, so
    ``ts_open <= ts_close <= next ts_open`` (strict ``<`` whenever packets have distinct
    ``ts_recv``). A time bar's content is known once its interval ends.

Imbalance bars
--------------
López de Prado (AFML 2.3.2): θ accumulates until |θ| >= E0[T]·|E0[b·v]|. Left alone, E0[T]
(the EWMA of past bars' trade counts) feeds on itself and bars collapse to a trade or blow up
to one a day; fxstore adds causal guards that use only the day's own records:

- T*, the trades a bar should hold for the day to make ``target_bars_per_day`` bars, is the
  larger of the day's average trade rate so far and the recent rate (about one target bar's
  duration, exponentially weighted), times session length / target.
- The day's first bar is a time warm-up: it closes session length / target after the first trade.
- E0[T] is clipped to [T*/band, T*·band].
- The threshold is floored at sqrt(T*·var), the standard deviation of θ over T* trades, var
  being the larger of the per-trade variance of b·v and the per-trade variance of θ realised over
  past bars (which counts runs of same-side trades): balanced flow, E0[b·v] ≈ 0, then still
  needs about T* trades.
- Every bar holds between ceil(T*/band) and ceil(T*·band) trades, so bars per day stay within
  about [target/band, target·band] whatever the flow. The guards are a backstop: in the tests'
  nine regimes (quiet to busy, one-sided, ES intraday profile, sweeps, heavy-tailed sizes) a
  day stays within a factor of about 2 of the target.

Everything is fixed when a bar opens; ``threshold`` holds its threshold (null for the warm-up).
"""

from __future__ import annotations

import datetime as dt
import logging
import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.config import BarConfig
from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError
from fxstore.ingest.bars import kernels
from fxstore.ingest.bars.engine import BarArrays, BarEngine
from fxstore.ingest.bars.table import BAR_SCHEMA, bar_table
from fxstore.ingest.dbn.format import MBP10_DTYPE

__all__ = ["BAR_SCHEMA", "BarBuilder", "BarRanges", "build_bars", "find_bar_ranges"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BarRanges:
    """Which records form each bar: rows sorted, ranges disjoint, every trade in one range."""

    #: int64 (n_bars,): index of the bar's first record.
    start: npt.NDArray[np.int64]
    #: int64 (n_bars,): index of the bar's last record (F_LAST, except maybe the last bar's).
    end: npt.NDArray[np.int64]
    #: float64 (n_bars,): threshold in force at close, in the bar's unit; NaN if none.
    threshold: npt.NDArray[np.float64]
    #: bool (n_bars,): the day ended before the bar's own rule closed it (last bar only).
    is_partial: npt.NDArray[np.bool_]


def _check_rows(rows: np.ndarray, where: str) -> np.ndarray:
    """`rows` as a 1-d int64 array (the bar kernel checks that they are ascending indices)."""
    rows = np.asarray(rows)
    if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer):
        raise InvalidInputError(f"{where}: `rows` must be a 1-d integer array, was {rows.dtype}.")
    return rows.astype(np.int64, copy=False)


def _check_dtype(records: np.ndarray, where: str) -> None:
    if not isinstance(records, np.ndarray) or records.ndim != 1 or records.dtype != MBP10_DTYPE:
        got = getattr(records, "dtype", type(records).__name__)
        raise SchemaError(f"{where}: records must be a 1-d array of MBP10_DTYPE, got {got}.")


def _validate_session(session_open_ns: int, session_close_ns: int) -> None:
    if session_open_ns >= session_close_ns:
        raise InvalidInputError(
            f"`session_close_ns` must be after `session_open_ns`, was {session_close_ns} "
            f"<= {session_open_ns}."
        )


def _validate_instrument_id(instrument_id: int | None) -> None:
    if instrument_id is not None and not 0 <= instrument_id <= 0xFFFFFFFF:
        raise InvalidInputError(
            f"`instrument_id` must be a DBN instrument id (0 to 2**32 - 1), was {instrument_id}."
        )


class BarBuilder:
    """Build one instrument's bars of one trading day from its records, chunk by chunk.

    Feed the day's records in ``ts_recv`` order with :meth:`update`, in chunks of any size
    (the chunks are read in place and never kept: a reader may reuse their memory once
    `update` returns), then call :meth:`finish` once. The table is the same, bit for bit,
    for any chunking, and the same as :func:`build_bars` of all the records at once. Memory
    is O(bars + chunk): bar sums live in small state arrays, and the only record data kept
    is each bar's closing record (its book at close).

    Parameters
    ----------
    config
        The bar type and its parameters.
    trading_day
        The CME trading day the records belong to (written to every row).
    contract
        The raw symbol of the instrument, e.g. 'ESZ4' (written to every row).
    instrument_id
        The records' DBN ``instrument_id``; by default the first record's.
    session_open_ns, session_close_ns
        The session bounds, int64 ns UTC (:func:`~fxstore.market.calendar.session_bounds_ns`):
        time bars are aligned to the open; imbalance bars aim at
        ``config.target_bars_per_day`` bars over the session's length.
    price_range
        The contract's plausible prices, points (:func:`~fxstore.market.plausible.
        plausible_range`): each bar counts its book states and trades outside them in
        ``n_implausible_px``. None: any price is plausible.
    tick_size
        The contract's tick, points: with `price_range`, each bar also counts there its
        trades off the tick grid. None: not known.

    Raises
    ------
    InvalidInputError
        The session bounds are reversed, `contract` is empty, or `instrument_id` is out of range.

    Examples
    --------
    >>> builder = BarBuilder(config, trading_day=day, contract="ESZ4",
    ...                      session_open_ns=t0, session_close_ns=t1)  # doctest: +SKIP
    >>> for chunk in chunks:  # doctest: +SKIP
    ...     builder.update(chunk)
    >>> bars = builder.finish()  # doctest: +SKIP
    """

    def __init__(
        self,
        config: BarConfig,
        *,
        trading_day: dt.date,
        contract: str,
        instrument_id: int | None = None,
        session_open_ns: int,
        session_close_ns: int,
        price_range: tuple[float, float] | None = None,
        tick_size: float | None = None,
    ) -> None:
        _validate_session(session_open_ns, session_close_ns)
        if not contract:
            raise InvalidInputError(f"`contract` must be a non-empty raw symbol, was {contract!r}.")
        _validate_instrument_id(instrument_id)
        self._config = config
        self._trading_day = trading_day
        self._contract = contract
        self._engine: BarEngine | None = BarEngine(
            config,
            instrument_id=instrument_id,
            session_open_ns=session_open_ns,
            session_close_ns=session_close_ns,
            price_range=price_range,
            tick_size=tick_size,
        )
        self._where = "BarBuilder.update"

    def _live_engine(self, method: str) -> BarEngine:
        if self._engine is None:
            raise InvalidInputError(
                f"BarBuilder.{method}: the day is finished; start a new BarBuilder for the next."
            )
        return self._engine

    def update(self, records: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Add the next records of the day.

        Parameters
        ----------
        records
            Structured array of ``MBP10_DTYPE``, shape (n,), possibly empty or read-only: the
            instrument's next records, sorted by ``ts_recv``, none earlier than the last
            record of the previous call.
        rows
            Which of `records` are the instrument's (ascending indices; None: all of them),
            when `records` hold other instruments too: they are read in place, not copied.

        Raises
        ------
        SchemaError
            `records` is not a 1-d ``MBP10_DTYPE`` array, or goes back in time (within it or
            from the previous call); the chunk is rejected whole, the builder unchanged.
        InvalidInputError
            `records` (or its `rows`) hold another ``instrument_id`` than the builder's
            (rejected whole too), `rows` are not ascending indices into `records`, or the
            day is finished.
        """
        engine = self._live_engine("update")
        _check_dtype(records, self._where)
        if rows is not None:
            rows = _check_rows(rows, self._where)
        engine.update(np.ascontiguousarray(records), self._where, rows)

    def finish(self) -> pa.Table:
        """Close the day and return its bars.

        Returns
        -------
        pyarrow.Table
            One row per bar with at least one trade, schema :data:`BAR_SCHEMA`, sorted by
            ``ts_close``; 0 rows when the day has no trade.

        Raises
        ------
        InvalidInputError
            The day was finished already.
        """
        bars = self._finish_arrays()
        table = bar_table(bars, self._config, self._trading_day, self._contract)
        logger.debug("built %d %s bars", table.num_rows, self._config.key)
        return table

    def _finish_arrays(self) -> BarArrays:
        bars = self._live_engine("finish").finish()
        self._engine = None
        if bars.n_damaged:
            warnings.warn(
                FxStoreWarning(
                    f"skipped {bars.n_damaged} trade records with an undefined price or size 0."
                ),
                stacklevel=3,
            )
        return bars


def find_bar_ranges(
    records: np.ndarray,
    config: BarConfig,
    *,
    session_open_ns: int,
    session_close_ns: int,
) -> BarRanges:
    """Find which records form each bar, without building the table.

    Parameters and errors are those of :func:`build_bars`.
    """
    builder = BarBuilder(
        config,
        trading_day=dt.date(1970, 1, 1),
        contract="-",
        session_open_ns=session_open_ns,
        session_close_ns=session_close_ns,
    )
    builder._where = "find_bar_ranges"
    builder.update(records)
    bars = builder._finish_arrays()
    return BarRanges(
        start=bars.ints[:, kernels.BI_START].copy(),
        end=bars.ints[:, kernels.BI_END].copy(),
        threshold=bars.floats[:, kernels.BF_THRESHOLD].copy(),
        is_partial=bars.ints[:, kernels.BI_PARTIAL] != 0,
    )


def build_bars(
    records: np.ndarray,
    config: BarConfig,
    *,
    trading_day: dt.date,
    contract: str,
    session_open_ns: int,
    session_close_ns: int,
    price_range: tuple[float, float] | None = None,
    tick_size: float | None = None,
) -> pa.Table:
    """Build the bars of one instrument over one trading day.

    The same as one :meth:`BarBuilder.update` with all the records, then
    :meth:`BarBuilder.finish`; to build a day from a stream of chunks, use :class:`BarBuilder`.

    Parameters
    ----------
    records
        Structured array of ``MBP10_DTYPE``, shape (n,): every MBP-10 record of one
        instrument in the trading day's session, sorted by ``ts_recv``.
    config
        The bar type and its parameters.
    trading_day
        The CME trading day the records belong to (written to every row).
    contract
        The raw symbol of the instrument, e.g. 'ESZ4' (written to every row).
    session_open_ns, session_close_ns
        The session bounds, int64 ns UTC (:func:`~fxstore.market.calendar.session_bounds_ns`):
        time bars are aligned to the open; imbalance bars aim at
        ``config.target_bars_per_day`` bars over the session's length.
    price_range, tick_size
        The contract's plausible prices and tick, points (see :class:`BarBuilder`).

    Returns
    -------
    pyarrow.Table
        One row per bar with at least one trade, schema :data:`BAR_SCHEMA`, sorted by
        ``ts_close``; 0 rows when the day has no trade.

    Raises
    ------
    SchemaError
        `records` is not a 1-d ``MBP10_DTYPE`` array, or is not sorted by ``ts_recv``.
    InvalidInputError
        `records` hold more than one ``instrument_id``, the session bounds are reversed,
        or `contract` is empty.

    Examples
    --------
    >>> config = BarConfig("tick", threshold=500)
    >>> bars = build_bars(records, config, trading_day=day, contract="ESZ4",
    ...                   session_open_ns=t0, session_close_ns=t1)  # doctest: +SKIP
    """
    builder = BarBuilder(
        config,
        trading_day=trading_day,
        contract=contract,
        session_open_ns=session_open_ns,
        session_close_ns=session_close_ns,
        price_range=price_range,
        tick_size=tick_size,
    )
    builder._where = "build_bars"
    builder.update(records)
    return builder.finish()
