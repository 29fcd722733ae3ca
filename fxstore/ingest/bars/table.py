"""The bar table: :data:`BAR_SCHEMA` and the columns built from a day's bar arrays."""

from __future__ import annotations

import datetime as dt
from typing import Final

import numpy as np
import pyarrow as pa

from fxstore.config import BarConfig
from fxstore.ingest.bars import kernels
from fxstore.ingest.bars.engine import BarArrays
from fxstore.ingest.bars.params import CLOSE_REASONS
from fxstore.ingest.dbn.format import FIXED_PRICE_SCALE, N_LEVELS, UNDEF_PRICE

_LEVELS: Final = tuple(f"{level:02d}" for level in range(N_LEVELS))
_BOOK_PX: Final = tuple(f"{side}_px_{lv}" for side in ("bid", "ask") for lv in _LEVELS)
_BOOK_QTY: Final = tuple(
    f"{side}_{kind}_{lv}" for kind in ("sz", "ct") for side in ("bid", "ask") for lv in _LEVELS
)
_OFI: Final = tuple(f"ofi_{lv}" for lv in _LEVELS)


def _field(name: str, type_: pa.DataType, *, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


#: One row per bar. Prices are float64 index points; book prices are null at empty levels;
#: ``threshold`` is null for the time warm-up bar that opens an imbalance-bar day;
#: ``min_trades`` / ``max_trades`` are the trade limits an imbalance bar was cut by (null
#: where none applied: plain and time bars, the warm-up); ``close_reason`` says which rule
#: closed the bar (:data:`~fxstore.ingest.bars.params.CLOSE_REASONS`); ``ofi_00`` ..
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
        _field("min_trades", pa.int64(), nullable=True),
        _field("max_trades", pa.int64(), nullable=True),
        _field("close_reason", pa.string()),
        _field("is_partial", pa.bool_()),
        *(_field(name, pa.float64(), nullable=True) for name in _BOOK_PX),
        *(_field(name, pa.uint32()) for name in _BOOK_QTY),
        *(_field(name, pa.float64()) for name in _OFI),
        _field("n_tick_rule", pa.int64()),
        _field("n_crossed", pa.int64()),
        _field("n_bad_ts_recv", pa.int64()),
        _field("n_maybe_bad_book", pa.int64()),
        _field("has_maybe_bad_book", pa.bool_()),
        _field("n_implausible_px", pa.int64()),
    ]
)


def _trade_columns(bars: BarArrays, multiplier: float) -> dict[str, np.ndarray]:
    ints, floats = bars.ints, bars.floats
    notional = floats[:, kernels.BF_NOTIONAL] / FIXED_PRICE_SCALE  # index points × contracts
    columns = {
        "ts_open": kernels.BI_TS_OPEN,
        "ts_close": kernels.BI_TS_CLOSE,
        "volume": kernels.BI_VOLUME,
        "buy_volume": kernels.BI_BUY,
        "sell_volume": kernels.BI_SELL,
        "n_trades": kernels.BI_TRADES,
        "n_events": kernels.BI_EVENTS,
        "n_tick_rule": kernels.BI_TICK_RULE,
        "n_bad_ts_recv": kernels.BI_BAD_TS_RECV,
        "n_maybe_bad_book": kernels.BI_MAYBE_BAD_BOOK,
        "n_implausible_px": kernels.BI_IMPLAUSIBLE,
    }
    prices = ("open", "high", "low", "close")
    first_price = kernels.BI_OPEN
    return {
        **{name: ints[:, j].copy() for name, j in columns.items()},
        **{name: ints[:, first_price + j] / FIXED_PRICE_SCALE for j, name in enumerate(prices)},
        "vwap": notional / ints[:, kernels.BI_VOLUME],  # every bar has a trade: volume > 0
        "dollar_volume": notional * multiplier,
        "imbalance": floats[:, kernels.BF_IMBALANCE].copy(),
        "is_partial": ints[:, kernels.BI_PARTIAL] != 0,
        "has_maybe_bad_book": ints[:, kernels.BI_MAYBE_BAD_BOOK] > 0,
    }


def _book_columns(bars: BarArrays) -> dict[str, pa.Array]:
    has_book = bars.ints[:, kernels.BI_HAS_BOOK] != 0
    snapshot = bars.books
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
        out[name] = pa.array(bars.floats[:, kernels.BF_OFI + level].copy())
    out["n_crossed"] = pa.array(bars.ints[:, kernels.BI_CROSSED].copy())
    return out


def _limit_columns(bars: BarArrays) -> dict[str, pa.Array]:
    limits = bars.floats[:, [kernels.BF_MIN_TRADES, kernels.BF_MAX_TRADES]]
    none = np.isinf(limits[:, 1])  # plain and time bars, the warm-up: no trade limits
    counts = np.where(none[:, None], 0.0, limits).astype(np.int64)
    return {
        "min_trades": pa.array(counts[:, 0], mask=none),
        "max_trades": pa.array(counts[:, 1], mask=none),
    }


def bar_table(bars: BarArrays, config: BarConfig, trading_day: dt.date, contract: str) -> pa.Table:
    """The table of a finished day's bars, schema :data:`BAR_SCHEMA`."""
    n_bars = bars.ints.shape[0]
    threshold = bars.floats[:, kernels.BF_THRESHOLD].copy()
    columns: dict[str, np.ndarray | pa.Array] = {
        "trading_day": pa.array(np.full(n_bars, np.datetime64(trading_day, "D")), pa.date32()),
        "instrument_id": np.full(n_bars, bars.instrument_id or 0, dtype=np.uint32),
        "contract": pa.array([contract] * n_bars, pa.string()),
        "threshold": pa.array(threshold, mask=np.isnan(threshold)),
        **_limit_columns(bars),
        "close_reason": pa.array(
            np.asarray(CLOSE_REASONS, dtype=object)[bars.ints[:, kernels.BI_REASON]], pa.string()
        ),
        **_trade_columns(bars, float(config.multiplier or 0.0)),  # set: checked at the start
        **_book_columns(bars),
    }
    arrays = [pa.array(columns[field.name], field.type) for field in BAR_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=BAR_SCHEMA)
