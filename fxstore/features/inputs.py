"""The bar columns features read, as numpy arrays, and the series every feature shares.

:class:`BarInputs` checks a bar table (``fxstore.ingest.bars.builder.BAR_SCHEMA`` columns, one
continuous series: front month or one instrument, sorted by ``ts_close``) and exposes its
columns without copying where Arrow allows, plus the within-contract returns ``r``, the
roll flags, the volatility normaliser ``sigma`` (and ``1 / sigma``) and the first bar of
each trading day, in numpy-allocated arrays.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.errors import SchemaError
from fxstore.features import kernels, returns
from fxstore.features.definitions import Settings
from fxstore.features.registry import N_LEVELS
from fxstore.market.calendar import DEFAULT_CALENDAR, sessions

__all__ = ["MIN_DURATION_NS", "REQUIRED_COLUMNS", "BarInputs"]

_LV: Final = tuple(f"{level:02d}" for level in range(N_LEVELS))
#: The bar columns precompute reads, with the numpy dtype it reads them as.
REQUIRED_COLUMNS: Final[dict[str, type[np.generic]]] = {
    "ts_open": np.int64,
    "ts_close": np.int64,
    "trading_day": np.int32,
    "instrument_id": np.uint32,
    "close": np.float64,
    "vwap": np.float64,
    "volume": np.int64,
    "buy_volume": np.int64,
    "sell_volume": np.int64,
    "n_trades": np.int64,
    "bid_px_00": np.float64,
    "ask_px_00": np.float64,
    **{f"{side}_sz_{lv}": np.uint32 for side in ("bid", "ask") for lv in _LV},
    **{f"ofi_{lv}": np.float64 for lv in _LV},
}
#: Floor of a bar's duration: a bar of one packet has ts_open == ts_close.
MIN_DURATION_NS: Final = 1_000_000
_EPOCH: Final = dt.date(1970, 1, 1)


def _column(table: pa.Table, name: str, dtype: type[np.generic]) -> npt.NDArray[np.generic]:
    """Column `name` as a numpy array of `dtype`: nulls become NaN (floats only)."""
    chunked = table.column(name)
    array = chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()
    if pa.types.is_date32(array.type):
        array = array.view(pa.int32())
    values = array.to_numpy(zero_copy_only=False)
    if array.null_count and not np.issubdtype(dtype, np.floating):
        raise SchemaError(f"bars: column {name!r} has {array.null_count} nulls.")
    return np.ascontiguousarray(values, dtype=dtype)


def _check_series(ts: npt.NDArray[np.int64], day: npt.NDArray[np.int32], ids: np.ndarray) -> None:
    back = np.flatnonzero(ts[1:] <= ts[:-1])
    if back.size:
        raise SchemaError(
            f"bars: ts_close must increase strictly; bar {back[0] + 1} does not "
            f"({ts[back[0]]} then {ts[back[0] + 1]}). Precompute needs one continuous series "
            "(front-month or one instrument), not several instruments interleaved."
        )
    if (day[1:] < day[:-1]).any():
        raise SchemaError("bars: trading_day goes back in time.")
    starts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    segment_ids = ids[np.concatenate(([0], starts))] if ids.size else ids
    if np.unique(segment_ids).size != segment_ids.size:
        raise SchemaError(
            "bars: the series returns to a contract it had left; precompute needs one "
            "continuous series (front-month or one instrument)."
        )


class BarInputs:
    """Bar columns (shape (n,) arrays, bars in ``ts_close`` order) and shared series.

    Parameters
    ----------
    table
        Bars with at least the :data:`REQUIRED_COLUMNS`.
    settings
        The feature set's settings (volatility window and floor).

    Raises
    ------
    SchemaError
        A column is missing or null where it may not be; ``ts_close`` does not increase
        strictly; the series is not continuous; a close is not a positive finite price.
    """

    def __init__(
        self, table: pa.Table, settings: Settings, *, calendar: str = DEFAULT_CALENDAR
    ) -> None:
        self.calendar = calendar
        missing = [name for name in REQUIRED_COLUMNS if name not in table.column_names]
        if missing:
            raise SchemaError(
                f"bars: missing column(s) {', '.join(missing)}; expected the bar store's "
                "columns (fxstore ingest)."
            )
        if table.num_rows == 0:
            raise SchemaError("bars: the table has no rows.")
        cols = {name: _column(table, name, dtype) for name, dtype in REQUIRED_COLUMNS.items()}
        self.n: int = table.num_rows
        self.ts_open: npt.NDArray[np.int64] = cols["ts_open"]  # type: ignore[assignment]
        self.ts_close: npt.NDArray[np.int64] = cols["ts_close"]  # type: ignore[assignment]
        self.trading_day: npt.NDArray[np.int32] = cols["trading_day"]  # type: ignore[assignment]
        self.instrument_id: npt.NDArray[np.uint32] = cols["instrument_id"]  # type: ignore[assignment]
        self.columns = cols
        _check_series(self.ts_close, self.trading_day, self.instrument_id)
        self.close = self.float64("close")
        bad = np.flatnonzero(~(np.isfinite(self.close) & (self.close > 0)))
        if bad.size:
            raise SchemaError(
                f"bars: close must be a positive price; bar {bad[0]} has it {self.close[bad[0]]}."
            )
        # Buffers come from numpy, not from inside the kernels: large numpy allocations get
        # transparent huge pages (a few faults instead of one per 4 KiB page on first touch).
        log_close = np.log(self.close)
        self.r = np.empty(self.n)
        self.is_roll = np.empty(self.n, dtype=np.uint8)
        self.sigma = np.empty(self.n)
        # normalising multiplies: cheaper than dividing; the log closes' buffer is reused
        self.inv_sigma = log_close
        returns.contract_series_into(
            log_close,
            self.instrument_id,
            settings.vol_window,
            settings.vol_floor,
            self.r,
            self.is_roll,
            self.sigma,
            self.inv_sigma,
        )
        self.session_start = np.empty(self.n, dtype=np.uint8)
        self.session_start[0] = 1
        day = self.trading_day
        np.not_equal(day[1:], day[:-1], out=self.session_start[1:].view(np.bool_))
        self._cache: dict[tuple[str, object], npt.NDArray[np.float64]] = {}

    def float64(self, name: str) -> npt.NDArray[np.float64]:
        """A float64 column (prices, OFI)."""
        return self.columns[name]  # type: ignore[return-value]

    def int64(self, name: str) -> npt.NDArray[np.int64]:
        """An int64 column (volumes, counts)."""
        return self.columns[name]  # type: ignore[return-value]

    def size(self, side: str, level: int) -> npt.NDArray[np.uint32]:
        """uint32 size of `side` ('bid' or 'ask') at `level` at close."""
        return self.columns[f"{side}_sz_{level:02d}"]  # type: ignore[return-value]

    def sizes(self, side: str) -> tuple[npt.NDArray[np.uint32], ...]:
        """uint32 sizes of `side` ('bid' or 'ask') at close, one array per level 0..9."""
        return tuple(self.columns[f"{side}_sz_{lv}"] for lv in _LV)  # type: ignore[misc]

    def ofi_levels(self) -> tuple[npt.NDArray[np.float64], ...]:
        """float64 order-flow imbalance per level 0..9, one array each."""
        return tuple(self.float64(f"ofi_{lv}") for lv in _LV)

    def level_sum(self, kind: str, levels: int) -> npt.NDArray[np.float64]:
        """Sum over the first `levels` levels of 'bid' or 'ask' sizes, or of 'ofi' (memoised).

        Built on the largest sum of fewer levels already made (see :meth:`prepare_level_sums`).
        """
        key = (kind, levels)
        if key not in self._cache:
            done = [n for k, n in self._cache if k == kind and isinstance(n, int) and n < levels]
            start = max(done, default=0)
            base = self._cache[(kind, start)] if start else np.empty(0)
            columns = self.ofi_levels() if kind == "ofi" else self.sizes(kind)
            self._cache[key] = kernels.level_sum(columns, start, levels, base)
        return self._cache[key]

    def prepare_level_sums(self, wanted: set[tuple[str, int]]) -> None:
        """Make the level sums `wanted` in increasing order of levels, each on the one before."""
        for kind, levels in sorted(wanted, key=lambda item: (item[0], item[1])):
            self.level_sum(kind, levels)

    @property
    def log_duration_s(self) -> npt.NDArray[np.float64]:
        """``log(max(ts_close - ts_open, 1 ms) / 1 s)`` per bar (memoised)."""
        if ("log_duration", 0) not in self._cache:
            seconds = np.empty(self.n)
            kernels.duration_s_into(self.ts_open, self.ts_close, MIN_DURATION_NS, seconds)
            self._cache[("log_duration", 0)] = np.log(seconds, out=seconds)
        return self._cache[("log_duration", 0)]

    @property
    def session_phase(self) -> npt.NDArray[np.float64]:
        """Fraction of the CME session (17:00 CT on D-1 to 16:00 CT on D, or the early close)
        elapsed at close."""
        if ("phase", 0) not in self._cache:
            first_bars = np.flatnonzero(self.session_start)
            days = self.trading_day[first_bars].astype(np.int64)
            table = sessions(self.calendar)
            bounds = [table.bounds(_EPOCH + dt.timedelta(days=int(d))) for d in days]
            open_ns = np.array([b[0] for b in bounds], dtype=np.int64)
            close_ns = np.array([b[1] for b in bounds], dtype=np.int64)
            phase = np.empty(self.n)
            kernels.session_phase_into(self.ts_close, self.session_start, open_ns, close_ns, phase)
            self._cache[("phase", 0)] = phase
        return self._cache[("phase", 0)]
