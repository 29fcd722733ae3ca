"""Compute a feature set over a bar table: one kernel call per feature, no Python per bar.

:func:`compute_features` turns bars (one continuous series, ``ts_close`` order) into a
:class:`FeatureFrame`: float32 features and targets, the flags and market columns, with the
warm-up bars at the start and the bars without a full target horizon at the end dropped
(and counted). The formulas are described in :mod:`fxstore.features.registry`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.errors import InvalidInputError
from fxstore.features import kernels
from fxstore.features.definitions import FeatureDef, FeatureSet, Settings
from fxstore.features.inputs import BarInputs
from fxstore.features.registry import Params

__all__ = ["FLAG_COLUMNS", "FeatureFrame", "compute_column", "compute_features"]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
ComputeFn = Callable[[BarInputs, Params, Settings], F32]

#: Flag columns, uint8 (0/1): the first bar of a new contract; the first bar of a trading day.
FLAG_COLUMNS: Final = ("is_roll", "session_start")
#: Depth below which a level's average depth is not trusted as a denominator (contracts).
_MIN_DEPTH: Final = 1.0


def _p(params: Params, name: str) -> int:
    return int(params[name])


def _log_return(bars: BarInputs, p: Params, _s: Settings) -> F32:
    h = _p(p, "horizon")
    return kernels.rolling_sum_over(bars.r, h, h, bars.sigma, math.sqrt(h))


def _realised_vol(bars: BarInputs, p: Params, _s: Settings) -> F32:
    n = _p(p, "window")
    return kernels.rolling_rms_over(bars.r, n, n, bars.sigma)


def _ofi_level(bars: BarInputs, p: Params, _s: Settings) -> F32:
    lv = f"{_p(p, 'level'):02d}"
    return kernels.over_rolling_depth(
        bars.float64(f"ofi_{lv}"),
        bars.columns[f"bid_sz_{lv}"],
        bars.columns[f"ask_sz_{lv}"],
        _p(p, "window"),
        _MIN_DEPTH,
    )


def _ofi_multi(bars: BarInputs, p: Params, _s: Settings) -> F32:
    levels = _p(p, "levels")
    return kernels.over_rolling_depth(
        bars.level_sum("ofi", levels),
        bars.level_sum("bid", levels),
        bars.level_sum("ask", levels),
        _p(p, "window"),
        _MIN_DEPTH,
    )


def _book_imbalance(bars: BarInputs, p: Params, _s: Settings) -> F32:
    levels = _p(p, "levels")
    return kernels.balance(bars.level_sum("bid", levels), bars.level_sum("ask", levels))


def _spread(bars: BarInputs, _p: Params, s: Settings) -> F32:
    return kernels.scaled_difference(
        bars.float64("ask_px_00"), bars.float64("bid_px_00"), 1.0 / s.tick_size
    )


def _microprice(bars: BarInputs, _p: Params, s: Settings) -> F32:
    return kernels.microprice_offset(
        bars.float64("bid_px_00"),
        bars.float64("ask_px_00"),
        bars.columns["bid_sz_00"],
        bars.columns["ask_sz_00"],
        s.tick_size,
    )


def _depth(bars: BarInputs, p: Params, _s: Settings) -> F32:
    levels = _p(p, "levels")
    total = bars.level_sum("bid", levels) + bars.level_sum("ask", levels)
    return kernels.demeaned(np.log1p(total), _p(p, "window"))


def _trade_imbalance(bars: BarInputs, _p: Params, _s: Settings) -> F32:
    return kernels.difference_over(
        bars.int64("buy_volume"), bars.int64("sell_volume"), bars.int64("volume")
    )


def _trade_intensity(bars: BarInputs, p: Params, _s: Settings) -> F32:
    log_rate = np.log(bars.int64("n_trades").astype(np.float64)) - bars.log_duration_s
    return kernels.demeaned(log_rate, _p(p, "window"))


def _bar_duration(bars: BarInputs, p: Params, _s: Settings) -> F32:
    return kernels.demeaned(bars.log_duration_s, _p(p, "window"))


def _vwap_distance(bars: BarInputs, _p: Params, s: Settings) -> F32:
    return kernels.scaled_difference(bars.close, bars.float64("vwap"), 1.0 / s.tick_size)


def _time_of_day(bars: BarInputs, p: Params, _s: Settings) -> F32:
    return kernels.cyclical(bars.session_phase, p["fn"] == "cos")


def _session_start(bars: BarInputs, _p: Params, _s: Settings) -> F32:
    return bars.session_start.astype(np.float32)


def _forward_return(bars: BarInputs, p: Params, _s: Settings) -> F32:
    h = _p(p, "horizon")
    return kernels.forward_sum(bars.r, h, bars.sigma, math.sqrt(h))


_COMPUTE: Final[Mapping[str, ComputeFn]] = {
    "log_return": _log_return,
    "realised_vol": _realised_vol,
    "ofi_level": _ofi_level,
    "ofi_multi": _ofi_multi,
    "book_imbalance": _book_imbalance,
    "spread_ticks": _spread,
    "microprice_offset": _microprice,
    "depth": _depth,
    "trade_imbalance": _trade_imbalance,
    "trade_intensity": _trade_intensity,
    "bar_duration": _bar_duration,
    "vwap_distance": _vwap_distance,
    "time_of_day": _time_of_day,
    "session_start": _session_start,
    "forward_return": _forward_return,
}


def compute_column(bars: BarInputs, definition: FeatureDef, settings: Settings) -> F32:
    """float32 (n,): one feature or target over every bar; NaN where it is not defined."""
    return _COMPUTE[definition.kind](bars, definition.params, settings)


def _back_adjusted(bars: BarInputs) -> F64:
    """Close plus the sum of the gaps of every later roll: no jump at a roll bar."""
    gap = np.where(bars.is_roll == 1, bars.close - np.roll(bars.close, 1), 0.0)
    later = np.cumsum(gap[::-1])[::-1] - gap
    return bars.close + later


def _check_finite(values: np.ndarray, lo: int, hi: int, what: str, bars: BarInputs) -> None:
    """Raise InvalidInputError naming `what` and the bar if a kept value is not finite."""
    t = int(kernels.first_nonfinite(values, lo, hi))
    if t < 0:
        return
    ts = dt.datetime.fromtimestamp(int(bars.ts_close[t]) / 1e9, tz=dt.UTC)
    raise InvalidInputError(
        f"{what} is not finite ({values[t]}) at bar {t} (ts_close {int(bars.ts_close[t])}, "
        f"{ts:%Y-%m-%d %H:%M:%S} UTC, instrument {int(bars.instrument_id[t])}): check that "
        "bar in the bar store, or leave the feature out."
    )


@dataclass(frozen=True, slots=True)
class FeatureFrame:
    """Kept bars' columns, all shape (n_rows,), in fxcache column order.

    Rows are bars ``warmup_rows_dropped .. n_bars - tail_rows_dropped - 1`` of the input.
    """

    ts_close: npt.NDArray[np.int64]
    trading_day: npt.NDArray[np.int32]
    flags: Mapping[str, npt.NDArray[np.uint8]]
    #: float64 market columns: ``mkt_close``, ``mkt_half_spread`` (+ ``mkt_close_adj``).
    market: Mapping[str, F64]
    #: float32 ``f_<name>`` columns, in feature-set order.
    features: Mapping[str, F32]
    #: float32 ``target_<name>`` columns, in feature-set order.
    targets: Mapping[str, F32]
    #: float64 volatility normaliser sigma_t of the kept bars.
    sigma: F64
    n_bars: int
    warmup_rows_dropped: int
    tail_rows_dropped: int

    @property
    def n_rows(self) -> int:
        """Rows kept."""
        return int(self.ts_close.shape[0])

    def columns(self) -> dict[str, np.ndarray]:
        """Every column by name, in fxcache order."""
        return {
            "ts_close": self.ts_close,
            "trading_day": self.trading_day,
            **self.flags,
            **self.market,
            **self.features,
            **self.targets,
        }

    def to_table(self) -> pa.Table:
        """The columns as one Arrow record batch's table, without copies and without nulls."""
        columns = self.columns()
        schema = pa.schema(
            [pa.field(name, pa.from_numpy_dtype(a.dtype), nullable=False) for name, a in columns.items()]
        )
        arrays = [pa.array(a) for a in columns.values()]
        return pa.Table.from_batches([pa.RecordBatch.from_arrays(arrays, schema=schema)])


def compute_features(table: pa.Table, featureset: FeatureSet) -> FeatureFrame:
    """Compute `featureset` over a bar table.

    Parameters
    ----------
    table
        Bars of one continuous series (front month or one instrument), sorted by
        ``ts_close`` strictly increasing, with the bar store's columns.
    featureset
        The features, targets and settings.

    Returns
    -------
    FeatureFrame
        The bars from the first where every feature and target is defined to the last with
        a full target horizon.

    Raises
    ------
    SchemaError
        The table is not a valid continuous bar series (:class:`BarInputs`).
    InvalidInputError
        Too few bars for the warm-up and the target horizon, or a kept value (feature,
        target or market column) is not finite; the message names it and the bar.
    """
    settings = featureset.settings
    bars = BarInputs(table, settings)
    lo, tail = featureset.warmup_rows, featureset.max_target_horizon
    hi = bars.n - tail
    if hi <= lo:
        raise InvalidInputError(
            f"only {bars.n} bars: the feature set needs {lo} warm-up bars plus {tail} for the "
            "targets' horizon, and at least one more; ingest more days or shorten the windows."
        )
    market = {
        "mkt_close": bars.close,
        "mkt_half_spread": 0.5 * (bars.float64("ask_px_00") - bars.float64("bid_px_00")),
    }
    if settings.adjust == "difference":
        market["mkt_close_adj"] = _back_adjusted(bars)
    for name, values in market.items():
        _check_finite(values, lo, hi, f"market column {name!r}", bars)
    out: dict[str, dict[str, F32]] = {"f_": {}, "target_": {}}
    for prefix, defs in (("f_", featureset.features), ("target_", featureset.targets)):
        for definition in defs:
            values = compute_column(bars, definition, settings)
            label = "feature" if prefix == "f_" else "target"
            _check_finite(values, lo, hi, f"{label} {definition.name!r}", bars)
            out[prefix][prefix + definition.name] = values[lo:hi]
    return FeatureFrame(
        ts_close=bars.ts_close[lo:hi],
        trading_day=bars.trading_day[lo:hi],
        flags={"is_roll": bars.is_roll[lo:hi], "session_start": bars.session_start[lo:hi]},
        market={name: values[lo:hi] for name, values in market.items()},
        features=out["f_"],
        targets=out["target_"],
        sigma=bars.sigma[lo:hi],
        n_bars=bars.n,
        warmup_rows_dropped=lo,
        tail_rows_dropped=tail,
    )
