"""Compute a feature set over a bar table: one kernel call per feature, no Python per bar.

:func:`compute_features` turns bars (one continuous series, ``ts_close`` order) into a
:class:`FeatureFrame`: float32 features and targets, the flags and market columns, with the
warm-up bars at the start and the bars without a full target horizon at the end dropped
(and counted). The formulas are described in :mod:`fxstore.features.registry`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
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
from fxstore.fxcache import FLAG_COLUMNS, MARKET_COLUMNS

__all__ = [
    "FeatureFrame",
    "compute_column",
    "compute_columns",
    "compute_features",
]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
ComputeFn = Callable[[BarInputs, Params, Settings], F32]

#: Kinds that sum book levels (their `levels` parameter), and the columns they sum.
_LEVEL_SUMS: Final[Mapping[str, tuple[str, ...]]] = {
    "ofi_multi": ("ofi", "bid", "ask"),
    "book_imbalance": ("bid", "ask"),
    "depth": ("bid", "ask"),
}
#: Depth below which a level's average depth is not trusted as a denominator (contracts).
_MIN_DEPTH: Final = 1.0


def _p(params: Params, name: str) -> int:
    return int(params[name])


def _log_return(bars: BarInputs, p: Params, _s: Settings) -> F32:
    h = _p(p, "horizon")
    return kernels.rolling_sum_over(bars.r, h, h, bars.inv_sigma, 1.0 / math.sqrt(h))


def _realised_vol(bars: BarInputs, p: Params, _s: Settings) -> F32:
    n = _p(p, "window")
    return kernels.rolling_rms_over(bars.r, n, n, bars.inv_sigma)


def _ofi_level(bars: BarInputs, p: Params, _s: Settings) -> F32:
    level = _p(p, "level")
    return kernels.over_rolling_depth(
        bars.float64(f"ofi_{level:02d}"),
        bars.size("bid", level),
        bars.size("ask", level),
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
        bars.size("bid", 0),
        bars.size("ask", 0),
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
    return kernels.forward_sum(bars.r, h, bars.inv_sigma, 1.0 / math.sqrt(h))


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


def compute_columns(
    bars: BarInputs, definitions: Sequence[FeatureDef], settings: Settings
) -> dict[str, F32]:
    """float32 (n,) per definition name, over every bar; NaN where a value is not defined.

    One kernel call per definition; series several share (returns, sigma, level sums,
    durations, session phase) are computed once by `bars`.
    """
    return {d.name: compute_column(bars, d, settings) for d in definitions}


def compute_column(bars: BarInputs, definition: FeatureDef, settings: Settings) -> F32:
    """float32 (n,): one feature or target over every bar; NaN where it is not defined."""
    return _COMPUTE[definition.kind](bars, definition.params, settings)


def _check_finite(values: np.ndarray, lo: int, hi: int, what: str, bars: BarInputs) -> None:
    """Raise InvalidInputError naming `what` and the bar if a kept value is not finite."""
    t = int(kernels.first_nonfinite(values, lo, hi))
    if t >= 0:
        _raise_nonfinite(float(values[t]), t, what, bars)


def _raise_nonfinite(value: float, t: int, what: str, bars: BarInputs) -> None:
    """Raise InvalidInputError: `what` is `value` (not finite) at bar `t`."""
    ts = dt.datetime.fromtimestamp(int(bars.ts_close[t]) / 1e9, tz=dt.UTC)
    raise InvalidInputError(
        f"{what} is not finite ({value}) at bar {t} (ts_close {int(bars.ts_close[t])}, "
        f"{ts:%Y-%m-%d %H:%M:%S} UTC, instrument {int(bars.instrument_id[t])}): check that "
        "bar in the bar store, or leave the feature out."
    )


#: Kept rows of one column and its first non-finite bar (-1: none).
_Kept = tuple[F32, int]

#: Computes a column's kept rows into `out`; returns the first non-finite bar, or -1.
_IntoFn = Callable[[BarInputs, Params, Settings, int, int, F32], int]


def _log_return_into(bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32) -> int:
    h = _p(p, "horizon")
    factor = 1.0 / math.sqrt(h)
    return int(kernels.rolling_sum_into(bars.r, h, bars.inv_sigma, factor, False, lo, hi, out))


def _realised_vol_into(bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32) -> int:
    n = _p(p, "window")
    return int(kernels.rolling_sum_into(bars.r, n, bars.inv_sigma, 1.0, True, lo, hi, out))


def _forward_return_into(
    bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32
) -> int:
    h = _p(p, "horizon")
    factor = 1.0 / math.sqrt(h)
    return int(kernels.forward_sum_into(bars.r, h, bars.inv_sigma, factor, lo, hi, out))


def _ofi_level_into(bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32) -> int:
    level = _p(p, "level")
    return int(
        kernels.over_rolling_depth_into(
            bars.float64(f"ofi_{level:02d}"),
            bars.size("bid", level),
            bars.size("ask", level),
            _p(p, "window"),
            _MIN_DEPTH,
            lo,
            hi,
            out,
        )
    )


def _ofi_multi_into(bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32) -> int:
    levels = _p(p, "levels")
    return int(
        kernels.over_rolling_depth_into(
            bars.level_sum("ofi", levels),
            bars.level_sum("bid", levels),
            bars.level_sum("ask", levels),
            _p(p, "window"),
            _MIN_DEPTH,
            lo,
            hi,
            out,
        )
    )


def _book_imbalance_into(
    bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32
) -> int:
    levels = _p(p, "levels")
    if levels == 1:  # the level-0 sizes themselves (their float64 "sums" equal them)
        return int(kernels.balance_into(bars.size("bid", 0), bars.size("ask", 0), lo, hi, out))
    bid, ask = bars.level_sum("bid", levels), bars.level_sum("ask", levels)
    return int(kernels.balance_into(bid, ask, lo, hi, out))


def _depth_into(bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32) -> int:
    levels = _p(p, "levels")
    total = bars.level_sum("bid", levels) + bars.level_sum("ask", levels)
    np.log1p(total, out=total)
    return int(kernels.demeaned_into(total, _p(p, "window"), lo, hi, out))


def _trade_intensity_into(
    bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32
) -> int:
    log_rate = bars.int64("n_trades").astype(np.float64)
    np.log(log_rate, out=log_rate)
    log_rate -= bars.log_duration_s
    return int(kernels.demeaned_into(log_rate, _p(p, "window"), lo, hi, out))


def _bar_duration_into(bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32) -> int:
    return int(kernels.demeaned_into(bars.log_duration_s, _p(p, "window"), lo, hi, out))


def _time_of_day_into(bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32) -> int:
    kernels.angle_into(bars.session_phase, lo, hi, out)
    (np.cos if p["fn"] == "cos" else np.sin)(out, out=out)  # in place: no temporaries
    bad = int(kernels.first_nonfinite(out, 0, hi - lo))
    return bad + lo if bad >= 0 else -1


_INTO: Final[Mapping[str, _IntoFn]] = {
    "log_return": _log_return_into,
    "realised_vol": _realised_vol_into,
    "forward_return": _forward_return_into,
    "ofi_level": _ofi_level_into,
    "ofi_multi": _ofi_multi_into,
    "book_imbalance": _book_imbalance_into,
    "depth": _depth_into,
    "trade_intensity": _trade_intensity_into,
    "bar_duration": _bar_duration_into,
    "time_of_day": _time_of_day_into,
}


def _kept_columns(
    bars: BarInputs, defs: Sequence[FeatureDef], settings: Settings, lo: int, hi: int
) -> list[_Kept]:
    """Kept rows ``lo .. hi - 1`` of each definition's column and its first non-finite bar.

    Rolling kinds are computed over bars ``0 .. hi - 1`` and write the kept bars' float32
    values straight into their column (no full-length output, no separate finiteness
    pass); the elementwise kinds are views of their full-length column.
    """
    kept: list[_Kept] = []
    for d in defs:
        into = _INTO.get(d.kind)
        if into is None:
            values = compute_column(bars, d, settings)
            kept.append((values[lo:hi], int(kernels.first_nonfinite(values, lo, hi))))
        else:
            out = kernels.empty_f32(hi - lo)
            kept.append((out, into(bars, d.params, settings, lo, hi, out)))
    return kept


@dataclass(frozen=True, slots=True)
class FeatureFrame:
    """Kept bars' columns, all shape (n_rows,), in fxcache column order.

    Rows are bars ``warmup_rows_dropped .. n_bars - tail_rows_dropped - 1`` of the input.
    """

    ts_close: npt.NDArray[np.int64]
    trading_day: npt.NDArray[np.int32]
    flags: Mapping[str, npt.NDArray[np.uint8]]
    #: float64 market columns: ``mkt_close``, ``mkt_half_spread``.
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
        # Nullable in the schema (Arrow's default, what readers expect), never null in fact.
        schema = pa.schema([(name, pa.from_numpy_dtype(a.dtype)) for name, a in columns.items()])
        arrays = [pa.array(a) for a in columns.values()]
        return pa.Table.from_batches([pa.RecordBatch.from_arrays(arrays, schema=schema)])


def _compute_groups(
    bars: BarInputs, featureset: FeatureSet, rows: tuple[int, int]
) -> tuple[dict[str, F32], dict[str, F32]]:
    """Features and targets over `rows` (checked finite), named ``f_*`` and ``target_*``."""
    lo, hi = rows
    defs = (*featureset.features, *featureset.targets)
    kept = _kept_columns(bars, defs, featureset.settings, lo, hi)
    n_features = len(featureset.features)
    features: dict[str, F32] = {}
    targets: dict[str, F32] = {}
    for i, (d, (values, bad)) in enumerate(zip(defs, kept, strict=True)):
        label = "feature" if i < n_features else "target"
        if bad >= 0:
            _raise_nonfinite(float(values[bad - lo]), bad, f"{label} {d.name!r}", bars)
        if i < n_features:
            features["f_" + d.name] = values
        else:
            targets["target_" + d.name] = values
    return features, targets


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
    half_spread = bars.float64("ask_px_00") - bars.float64("bid_px_00")
    half_spread *= 0.5
    # close of the bar's own contract; half the spread at close (for trading costs)
    market = {MARKET_COLUMNS[0]: bars.close, MARKET_COLUMNS[1]: half_spread}
    bars.prepare_level_sums(
        {
            (kind, int(d.params["levels"]))
            for d in featureset.features
            for kind in _LEVEL_SUMS.get(d.kind, ())
            if d.kind != "book_imbalance" or int(d.params["levels"]) > 1
        }
    )
    features, targets = _compute_groups(bars, featureset, (lo, hi))
    for name, prices in market.items():
        _check_finite(prices, lo, hi, f"market column {name!r}", bars)
    return FeatureFrame(
        ts_close=bars.ts_close[lo:hi],
        trading_day=bars.trading_day[lo:hi],
        flags=dict(
            zip(FLAG_COLUMNS, (bars.is_roll[lo:hi], bars.session_start[lo:hi]), strict=True)
        ),
        market={name: values[lo:hi] for name, values in market.items()},
        features=features,
        targets=targets,
        sigma=bars.sigma[lo:hi],
        n_bars=bars.n,
        warmup_rows_dropped=lo,
        tail_rows_dropped=tail,
    )
