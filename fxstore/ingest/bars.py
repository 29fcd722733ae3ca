"""Bars from the MBP-10 records of one instrument over one trading day.

:func:`build_bars` turns the records (a structured array of
:data:`~fxstore.ingest.dbn_format.MBP10_DTYPE`, sorted by ``ts_recv``) into one row per bar with
the columns of :data:`BAR_SCHEMA`. Days are independent: a day's bars depend only on its records
and the :class:`~fxstore.config.BarConfig`, so a bar never spans a session break or a roll and
days can be built in parallel. The loops live in :mod:`fxstore.ingest._bar_kernels`.

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
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.config import BarConfig
from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError
from fxstore.ingest import _bar_kernels as kernels
from fxstore.ingest.dbn_format import (
    F_BAD_TS_RECV,
    F_LAST,
    F_MAYBE_BAD_BOOK,
    FIXED_PRICE_SCALE,
    MBP10_DTYPE,
    N_LEVELS,
    UNDEF_PRICE,
)

__all__ = ["BAR_SCHEMA", "BarRanges", "build_bars", "find_bar_ranges"]

logger = logging.getLogger(__name__)

_LEVELS: Final = tuple(f"{level:02d}" for level in range(N_LEVELS))
_BOOK_PX: Final = tuple(f"{side}_px_{lv}" for side in ("bid", "ask") for lv in _LEVELS)
_BOOK_QTY: Final = tuple(
    f"{side}_{kind}_{lv}" for kind in ("sz", "ct") for side in ("bid", "ask") for lv in _LEVELS
)
_OFI: Final = tuple(f"ofi_{lv}" for lv in _LEVELS)


def _field(name: str, type_: pa.DataType, *, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


#: One row per bar. Prices are float64 index points; book prices are null at empty levels;
#: ``threshold`` is null for the time warm-up bar that opens an imbalance-bar day; ``ofi_00`` ..
#: ``ofi_09`` (zero-padded, like Databento's level names; DESIGN.md writes ``ofi_0..ofi_9``)
#: sum the Cont-Kukanov-Stoikov order-flow imbalance per level over the bar.
BAR_SCHEMA: Final = pa.schema(
    [
        _field("ts_open", pa.int64()),
        _field("ts_close", pa.int64()),
        _field("trading_day", pa.date32()),
        _field("instrument_id", pa.uint32()),
        _field("contract", pa.string()),
        *(_field(name, pa.float64()) for name in ("open", "high", "low", "close")),
        *(_field(name, pa.int64()) for name in ("volume", "buy_volume", "sell_volume")),
        _field("n_trades", pa.int64()),
        _field("n_events", pa.int64()),
        _field("vwap", pa.float64()),
        _field("dollar_volume", pa.float64()),
        _field("imbalance", pa.float64()),
        _field("threshold", pa.float64(), nullable=True),
        _field("is_partial", pa.bool_()),
        *(_field(name, pa.float64(), nullable=True) for name in _BOOK_PX),
        *(_field(name, pa.uint32()) for name in _BOOK_QTY),
        *(_field(name, pa.float64()) for name in _OFI),
        _field("n_tick_rule", pa.int64()),
        _field("n_crossed", pa.int64()),
        _field("n_bad_ts_recv", pa.int64()),
        _field("n_maybe_bad_book", pa.int64()),
        _field("has_maybe_bad_book", pa.bool_()),
    ]
)


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


@dataclass(frozen=True, slots=True)
class _Columns:
    """The per-record columns the kernels read, extracted from the structured array."""

    ts: npt.NDArray[np.int64]
    is_trade: npt.NDArray[np.bool_]
    is_last: npt.NDArray[np.bool_]
    aggressor: npt.NDArray[np.int8]
    sign: npt.NDArray[np.int8]
    price: npt.NDArray[np.int64]
    size: npt.NDArray[np.uint32]
    #: b·v per trade (0 elsewhere), v in the unit of the bar type.
    signed: npt.NDArray[np.float64]
    #: v per trade (0 elsewhere).
    weight: npt.NDArray[np.float64]
    flags: npt.NDArray[np.uint8]


def _check_dtype(records: np.ndarray, where: str) -> None:
    if not isinstance(records, np.ndarray) or records.ndim != 1 or records.dtype != MBP10_DTYPE:
        got = getattr(records, "dtype", type(records).__name__)
        raise SchemaError(f"{where}: records must be a 1-d array of MBP10_DTYPE, got {got}.")


def _check_order_and_instrument(records: np.ndarray, ts: npt.NDArray[np.int64], where: str) -> None:
    back = np.flatnonzero(ts[1:] < ts[:-1])
    if back.size:
        raise SchemaError(
            f"{where}: records must be sorted by ts_recv; record {back[0] + 1} goes back in time."
        )
    ids = records["instrument_id"]
    if ids.size and (ids != ids[0]).any():
        unique = np.unique(ids)
        shown = ", ".join(str(i) for i in unique[:5])
        raise InvalidInputError(
            f"{where}: records hold {unique.size} instruments ({shown}); pass one instrument's."
        )


def _validate_session(session_open_ns: int, session_close_ns: int) -> None:
    if session_open_ns >= session_close_ns:
        raise InvalidInputError(
            f"`session_close_ns` must be after `session_open_ns`, was {session_close_ns} "
            f"<= {session_open_ns}."
        )


def _trade_weight(
    config: BarConfig, price: npt.NDArray[np.int64], size: npt.NDArray[np.uint32]
) -> npt.NDArray[np.float64]:
    """v per trade in the unit of the bar type: 1, contracts, or dollars."""
    if config.bar_type in ("tick", "tick_imbalance"):
        return np.ones(price.shape[0])
    if config.bar_type in ("dollar", "dollar_imbalance"):
        return np.asarray(price / FIXED_PRICE_SCALE * size * config.multiplier, dtype=np.float64)
    return size.astype(np.float64)  # volume bars, and the signed volume of time bars


def _extract_columns(records: np.ndarray, config: BarConfig, where: str) -> _Columns:
    """Check `records`, decode the fields the kernels read (one pass) and sign the trades."""
    _check_dtype(records, where)
    codes = (ord("T"), ord("B"), ord("A"), F_LAST, UNDEF_PRICE)
    ts, is_trade, is_last, aggressor, price, size, flags, n_damaged = kernels.decode_records(
        records["ts_recv"],
        records["action"].view(np.uint8),
        records["side"].view(np.uint8),
        records["flags"],
        records["price"],
        records["size"],
        codes,
    )
    _check_order_and_instrument(records, ts, where)
    if n_damaged:
        warnings.warn(
            FxStoreWarning(f"skipped {n_damaged} trade records with an undefined price or size 0."),
            stacklevel=3,
        )
    sign = kernels.sign_trades(is_trade, aggressor, price)
    weight = np.zeros(price.shape[0])
    weight[is_trade] = _trade_weight(config, price[is_trade], size[is_trade])
    return _Columns(
        ts, is_trade, is_last, aggressor, sign, price, size, sign * weight, weight, flags
    )


def _ranges(
    cols: _Columns, config: BarConfig, session_open_ns: int, session_close_ns: int
) -> BarRanges:
    threshold = float(config.threshold or 0.0)
    if config.is_imbalance:
        start, end, thresholds, last_is_partial = kernels.imbalance_bar_ranges(
            cols.ts,
            cols.is_trade,
            cols.is_last,
            cols.signed,
            (session_close_ns - session_open_ns) / config.target_bars_per_day,
            config.band,
            2.0 / (config.ewma_span_bars + 1.0),
            2.0 / (config.ewma_span_trades + 1.0),
        )
    elif config.bar_type == "time":
        interval_ns = round(threshold * 1e9)
        start, end, last_is_partial = kernels.time_bar_ranges(
            cols.ts, cols.is_trade, cols.is_last, session_open_ns, interval_ns, session_close_ns
        )
        thresholds = np.full(start.shape[0], threshold)
    else:
        start, end, last_is_partial = kernels.plain_bar_ranges(
            cols.is_trade, cols.is_last, cols.weight, threshold
        )
        thresholds = np.full(start.shape[0], threshold)
    is_partial = np.zeros(start.shape[0], dtype=np.bool_)
    if is_partial.size:
        is_partial[-1] = last_is_partial
    return BarRanges(start=start, end=end, threshold=thresholds, is_partial=is_partial)


def find_bar_ranges(
    records: np.ndarray,
    config: BarConfig,
    *,
    session_open_ns: int,
    session_close_ns: int,
) -> BarRanges:
    """Find which records form each bar, without aggregating them.

    Parameters and errors are those of :func:`build_bars`.
    """
    _validate_session(session_open_ns, session_close_ns)
    cols = _extract_columns(records, config, "find_bar_ranges")
    return _ranges(cols, config, session_open_ns, session_close_ns)


def _level_view(records: np.ndarray, prefix: str) -> np.ndarray:
    """Read-only (n, N_LEVELS) view of the fields `prefix`_00 .. `prefix`_09, without a copy."""
    offsets = [MBP10_DTYPE.fields[f"{prefix}_{lv}"][1] for lv in _LEVELS]  # type: ignore[index]
    steps = set(np.diff(offsets).tolist())
    if len(steps) != 1:  # MBP10_DTYPE interleaves the levels at a fixed stride
        raise SchemaError(f"MBP10_DTYPE levels of {prefix} are not evenly spaced.")
    return np.lib.stride_tricks.as_strided(
        records[f"{prefix}_00"],
        shape=(records.shape[0], N_LEVELS),
        strides=(records.strides[0], steps.pop()),
        writeable=False,
    )


def _trade_columns(cols: _Columns, ranges: BarRanges, multiplier: float) -> dict[str, np.ndarray]:
    prices, counts, sums = kernels.aggregate_records(
        ranges.start,
        ranges.end,
        cols.is_trade,
        cols.sign,
        cols.aggressor,
        cols.price,
        cols.size,
        cols.signed,
        cols.flags,
        (F_BAD_TS_RECV, F_MAYBE_BAD_BOOK),
    )
    notional = sums[:, 0] / FIXED_PRICE_SCALE  # Σ price·size in index points × contracts
    with np.errstate(invalid="ignore", divide="ignore"):  # only trade-less bars, never emitted
        vwap = notional / counts[:, 0]
    return {
        **{
            name: prices[:, j] / FIXED_PRICE_SCALE
            for j, name in enumerate(("open", "high", "low", "close"))
        },
        "volume": counts[:, 0],
        "buy_volume": counts[:, 1],
        "sell_volume": counts[:, 2],
        "n_trades": counts[:, 3],
        "n_events": ranges.end - ranges.start + 1,
        "vwap": vwap,
        "dollar_volume": notional * multiplier,
        "imbalance": sums[:, 1],
        "n_tick_rule": counts[:, 4],
        "n_bad_ts_recv": counts[:, 5],
        "n_maybe_bad_book": counts[:, 6],
        "has_maybe_bad_book": counts[:, 6] > 0,
    }


def _book_columns(records: np.ndarray, cols: _Columns, ranges: BarRanges) -> dict[str, pa.Array]:
    ofi, n_crossed, book_index = kernels.aggregate_book(
        ranges.start,
        ranges.end,
        cols.is_last,
        UNDEF_PRICE,
        *(_level_view(records, name) for name in ("bid_px", "ask_px", "bid_sz", "ask_sz")),
    )
    has_book = book_index >= 0
    snapshot = records[np.maximum(book_index, 0)]
    out: dict[str, pa.Array] = {}
    for side in ("bid", "ask"):
        for lv in _LEVELS:
            px = snapshot[f"{side}_px_{lv}"]
            empty = ~has_book | (px == UNDEF_PRICE)  # null price; size and count 0
            out[f"{side}_px_{lv}"] = pa.array(
                np.where(empty, 0, px) / FIXED_PRICE_SCALE, mask=empty
            )
            for kind in ("sz", "ct"):
                qty = snapshot[f"{side}_{kind}_{lv}"]
                out[f"{side}_{kind}_{lv}"] = pa.array(np.where(empty, 0, qty).astype(np.uint32))
    for level, name in enumerate(_OFI):
        out[name] = pa.array(ofi[:, level])
    out["n_crossed"] = pa.array(n_crossed)
    return out


def build_bars(
    records: np.ndarray,
    config: BarConfig,
    *,
    trading_day: dt.date,
    contract: str,
    session_open_ns: int,
    session_close_ns: int,
) -> pa.Table:
    """Build the bars of one instrument over one trading day.

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
        The session bounds, int64 ns UTC (:func:`~fxstore.ingest.calendar.session_bounds_ns`):
        time bars are aligned to the open; imbalance bars aim at
        ``config.target_bars_per_day`` bars over the session's length.

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
    _validate_session(session_open_ns, session_close_ns)
    if not contract:
        raise InvalidInputError(f"`contract` must be a non-empty raw symbol, was {contract!r}.")
    cols = _extract_columns(records, config, "build_bars")
    ranges = _ranges(cols, config, session_open_ns, session_close_ns)
    n_bars = ranges.start.shape[0]
    instrument_id = int(records["instrument_id"][0]) if records.size else 0
    columns: dict[str, np.ndarray | pa.Array] = {
        "ts_open": cols.ts[ranges.start],
        "ts_close": cols.ts[ranges.end],
        "trading_day": pa.array(np.full(n_bars, np.datetime64(trading_day, "D")), pa.date32()),
        "instrument_id": np.full(n_bars, instrument_id, dtype=np.uint32),
        "contract": pa.array([contract] * n_bars, pa.string()),
        "threshold": pa.array(ranges.threshold, mask=np.isnan(ranges.threshold)),
        "is_partial": ranges.is_partial,
        **_trade_columns(cols, ranges, config.multiplier),
        **_book_columns(records, cols, ranges),
    }
    logger.debug("built %d %s bars from %d records", n_bars, config.key, records.size)
    arrays = [pa.array(columns[field.name], field.type) for field in BAR_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=BAR_SCHEMA)
