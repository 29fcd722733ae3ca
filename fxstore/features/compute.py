"""Compute a feature set over a bar table: one kernel call per feature, no Python per bar.

:func:`compute_features` turns bars (one continuous series, ``ts_close`` order) into a
:class:`FeatureFrame`: float32 features and targets, the flags and market columns, with the
warm-up bars at the start and the bars without a full target horizon at the end dropped
(and counted). The formulas are described in :mod:`fxstore.features.registry`.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import functools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.errors import InvalidInputError
from fxstore.features import book, kernels, returns
from fxstore.features.definitions import ExprDef, FeatureDef, FeatureSet, Settings
from fxstore.features.inputs import BarInputs
from fxstore.features.program import compile_program, run_expressions
from fxstore.features.registry import Params
from fxstore.fxcache import FLAG_COLUMNS, MARKET_COLUMNS
from fxstore.market.calendar import DEFAULT_CALENDAR

__all__ = [
    "FeatureFrame",
    "compute_column",
    "compute_columns",
    "compute_features",
]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
ComputeFn = Callable[[BarInputs, Params, Settings], F32]

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
        bars.float64("ask_px_00"), bars.float64("bid_px_00"), 1.0 / s.tick
    )


def _microprice(bars: BarInputs, _p: Params, s: Settings) -> F32:
    return kernels.microprice_offset(
        bars.float64("bid_px_00"),
        bars.float64("ask_px_00"),
        bars.size("bid", 0),
        bars.size("ask", 0),
        s.tick,
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
    return kernels.scaled_difference(bars.close, bars.float64("vwap"), 1.0 / s.tick)


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
    bars: BarInputs, definitions: Sequence[FeatureDef | ExprDef], settings: Settings
) -> dict[str, F32]:
    """float32 (n,) per definition name, over every bar; NaN where a value is not defined.

    One kernel call per built-in definition, one program for the expressions (which may
    read the other definitions); series several share (returns, sigma, level sums,
    durations, session phase) are computed once by `bars`.
    """
    builtin = {d.name: d for d in definitions if isinstance(d, FeatureDef)}
    out = {name: compute_column(bars, d, settings) for name, d in builtin.items()}
    if len(builtin) < len(definitions):
        block = np.empty((len(definitions), bars.n), dtype=np.float32)
        rows = _expression_columns(bars, definitions, settings, (0, bars.n), block)
        out.update((definitions[row].name, block[row]) for row in rows)
    return {d.name: out[d.name] for d in definitions}


def compute_column(bars: BarInputs, definition: FeatureDef | ExprDef, settings: Settings) -> F32:
    """float32 (n,): one feature or target over every bar; NaN where it is not defined.

    An expression may read bar columns only here (:func:`compute_columns` for one that
    reads other features).
    """
    if isinstance(definition, ExprDef):
        return compute_columns(bars, [definition], settings)[definition.name]
    return _COMPUTE[definition.kind](bars, definition.params, settings)


def _expression_columns(
    bars: BarInputs,
    defs: Sequence[FeatureDef | ExprDef],
    settings: Settings,
    rows: tuple[int, int],
    out: F32,
) -> dict[int, int]:
    """Rows of `out` (float32 (len(defs), hi - lo)) for the expressions of `defs`, by one
    program over bars ``0 .. hi - 1``; the first non-finite bar (or -1) per row written.

    The built-in features an expression reads are computed over every bar first.
    """
    lo, hi = rows
    program = compile_program(defs, settings.vol_window)
    builtin = {d.name: d for d in defs if isinstance(d, FeatureDef)}

    def load(name: str) -> np.ndarray:
        if name in builtin:
            return compute_column(bars, builtin[name], settings)
        return bars.columns[name]

    return run_expressions(program, load, bars.session_start, lo, hi, out)


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


#: Computes a column's kept rows into `out` (float64 `scratch` (n,) free to overwrite);
#: returns the first non-finite bar, or -1.
_IntoFn = Callable[[BarInputs, Params, Settings, int, int, F32, F64], int]


def _spread_into(
    bars: BarInputs, _p: Params, s: Settings, lo: int, hi: int, out: F32, _scratch: F64
) -> int:
    ask, bid = bars.float64("ask_px_00"), bars.float64("bid_px_00")
    return int(kernels.scaled_difference_into(ask, bid, 1.0 / s.tick, lo, hi, out))


def _microprice_into(
    bars: BarInputs, _p: Params, s: Settings, lo: int, hi: int, out: F32, _scratch: F64
) -> int:
    return int(
        kernels.microprice_offset_into(
            bars.float64("bid_px_00"),
            bars.float64("ask_px_00"),
            bars.size("bid", 0),
            bars.size("ask", 0),
            s.tick,
            lo,
            hi,
            out,
        )
    )


def _trade_imbalance_into(
    bars: BarInputs, _p: Params, _s: Settings, lo: int, hi: int, out: F32, _scratch: F64
) -> int:
    buy, sell, volume = (bars.int64(name) for name in ("buy_volume", "sell_volume", "volume"))
    return int(kernels.difference_over_into(buy, sell, volume, lo, hi, out))


def _vwap_distance_into(
    bars: BarInputs, _p: Params, s: Settings, lo: int, hi: int, out: F32, _scratch: F64
) -> int:
    vwap = bars.float64("vwap")
    return int(kernels.scaled_difference_into(bars.close, vwap, 1.0 / s.tick, lo, hi, out))


def _session_start_into(
    bars: BarInputs, _p: Params, _s: Settings, lo: int, hi: int, out: F32, _scratch: F64
) -> int:
    np.copyto(out, bars.session_start[lo:hi])  # 0 or 1: always finite
    return -1


def _trade_intensity_into(
    bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32, scratch: F64
) -> int:
    np.copyto(scratch, bars.int64("n_trades"))  # float64, in the buffer: no new array
    np.log(scratch, out=scratch)
    scratch -= bars.log_duration_s
    return int(kernels.demeaned_into(scratch, _p(p, "window"), lo, hi, out))


def _bar_duration_into(
    bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32, _scratch: F64
) -> int:
    return int(kernels.demeaned_into(bars.log_duration_s, _p(p, "window"), lo, hi, out))


def _time_of_day_into(
    bars: BarInputs, p: Params, _s: Settings, lo: int, hi: int, out: F32, _scratch: F64
) -> int:
    kernels.angle_into(bars.session_phase, lo, hi, out)
    (np.cos if p["fn"] == "cos" else np.sin)(out, out=out)  # in place: no temporaries
    return int(kernels.first_nonfinite_f32(out, lo))


_INTO: Final[Mapping[str, _IntoFn]] = {
    "spread_ticks": _spread_into,
    "microprice_offset": _microprice_into,
    "trade_imbalance": _trade_imbalance_into,
    "vwap_distance": _vwap_distance_into,
    "session_start": _session_start_into,
    "trade_intensity": _trade_intensity_into,
    "bar_duration": _bar_duration_into,
    "time_of_day": _time_of_day_into,
}


def _return_columns(
    bars: BarInputs, defs: Sequence[FeatureDef | ExprDef], lo: int, hi: int, out: F32
) -> dict[int, int]:
    """Rows of `out` for the return kinds of `defs` (two fused passes); first bad bar per row."""
    rolling = [(row, d) for row, d in enumerate(defs) if d.kind in ("log_return", "realised_vol")]
    forward = [(row, d) for row, d in enumerate(defs) if d.kind == "forward_return"]
    bad: dict[int, int] = {}
    if rolling:
        specs = np.array(
            [
                (_p(d.params, "horizon"), 0, row)
                if d.kind == "log_return"
                else (_p(d.params, "window"), 1, row)
                for row, d in rolling
            ],
            dtype=np.int64,
        )
        factors = np.array([1.0 / math.sqrt(w) if not rms else 1.0 for w, rms, _ in specs])
        first_bad = np.empty(len(rolling), dtype=np.int64)
        returns.rolling_returns_into(bars.r, bars.inv_sigma, specs, factors, lo, hi, out, first_bad)
        bad.update(zip(specs[:, 2].tolist(), first_bad.tolist(), strict=True))
    if forward:
        horizons = np.array([_p(d.params, "horizon") for _, d in forward], dtype=np.int64)
        rows = np.array([row for row, _ in forward], dtype=np.int64)
        first_bad = np.empty(len(forward), dtype=np.int64)
        returns.forward_returns_into(bars.r, bars.inv_sigma, horizons, rows, lo, hi, out, first_bad)
        bad.update(zip(rows.tolist(), first_bad.tolist(), strict=True))
    return bad


def _book_specs(
    defs: Sequence[FeatureDef | ExprDef],
) -> tuple[I64, I64, I64, list[tuple[int, int]]]:
    """The book kinds of `defs` as :func:`book.book_levels_into` specs.

    Returns ``(ofi_specs, balance_specs, depth_levels, depth_rows)``; `depth_rows` holds
    ``(row, window)`` per depth total, in `depth_levels` order.
    """
    ofi, balance, depth_levels, depth_rows = [], [], [], []
    for row, d in enumerate(defs):
        p = d.params
        if d.kind == "ofi_level":
            ofi.append((_p(p, "level"), 1, _p(p, "window"), row))
        elif d.kind == "ofi_multi":
            ofi.append((0, _p(p, "levels"), _p(p, "window"), row))
        elif d.kind == "book_imbalance":
            balance.append((_p(p, "levels"), row))
        elif d.kind == "depth":
            depth_levels.append(_p(p, "levels"))
            depth_rows.append((row, _p(p, "window")))
    ofi_specs = np.array(ofi, dtype=np.int64).reshape(-1, 4)
    balance_specs = np.array(balance, dtype=np.int64).reshape(-1, 2)
    return ofi_specs, balance_specs, np.array(depth_levels, dtype=np.int64), depth_rows


def _book_columns(
    bars: BarInputs, defs: Sequence[FeatureDef | ExprDef], lo: int, hi: int, out: F32, scratch: F64
) -> dict[int, int]:
    """Rows of `out` (float32 (len(defs), hi - lo)) for the book kinds of `defs`, in one pass.

    `scratch` is float64 (>= number of depth features, n), overwritten. Returns the first
    bar whose value is not finite (or -1) per row written.
    """
    ofi_specs, balance_specs, depth_levels, depth_rows = _book_specs(defs)
    if not (ofi_specs.size or balance_specs.size or depth_rows):
        return {}
    totals = scratch[: len(depth_rows), :hi]
    first_bad = np.full(len(defs), -1, dtype=np.int64)
    book.book_levels_into(
        bars.sizes("bid"),
        bars.sizes("ask"),
        bars.ofi_levels(),
        ofi_specs,
        balance_specs,
        depth_levels,
        _MIN_DEPTH,
        lo,
        hi,
        out,
        totals,
        first_bad,
    )
    for total, (row, window) in zip(totals, depth_rows, strict=True):
        np.log1p(total, out=total)  # numpy's log1p, as the full-length depth column uses
        first_bad[row] = kernels.demeaned_into(total, window, lo, hi, out[row])
    written = [*ofi_specs[:, 3].tolist(), *balance_specs[:, 1].tolist()]
    return {row: int(first_bad[row]) for row in (*written, *(row for row, _ in depth_rows))}


def _arrow_f32(rows: int, columns: int) -> F32:
    """An uninitialised float32 (rows, columns) array in memory from Arrow's pool: the
    columns become the table's without a copy, and the pool hands the pages of a freed
    table to the next one (no page faults to zero them again for every shard or set)."""
    buffer = pa.allocate_buffer(rows * columns * 4)
    _small_pages(buffer.address, buffer.size)
    return np.frombuffer(buffer, dtype=np.float32).reshape(rows, columns)


#: madvise's advice for 4 KiB pages only (Linux).
_MADV_NOHUGEPAGE: Final = 15


def _small_pages(address: int, size: int) -> None:
    """Ask Linux to back the whole pages of ``[address, address + size)`` with 4 KiB pages.

    A transparent huge page faulted in where memory is fragmented makes the kernel compact
    memory first: inside ``precompute``, after the bars were read, the kernel writing a
    100-feature set's 600 MB of columns took 1.0-2.2 s with huge pages and 0.63 s with
    small ones, 0.40 s in reused memory (``bench/diag_page_faults.py``). Nothing happens
    elsewhere, or where the call fails (the advice is only advice).
    """
    libc = _libc()
    if libc is None or size < _HUGE_PAGE:
        return
    start = -(-address // _PAGE) * _PAGE
    end = (address + size) // _PAGE * _PAGE
    if end > start:
        libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_NOHUGEPAGE)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library of this process on Linux (loaded once); None elsewhere."""
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_PAGE: Final = 4096
_HUGE_PAGE: Final = 2 << 20


def _kept_columns(
    bars: BarInputs, defs: Sequence[FeatureDef | ExprDef], settings: Settings, lo: int, hi: int
) -> tuple[F32, list[int]]:
    """Kept rows ``lo .. hi - 1`` of each definition's column and its first non-finite bar.

    Returns float32 (len(defs), hi - lo), row i definition i's values, and the first bar
    whose value is not finite per definition (-1: none). The kernels are computed over bars
    ``0 .. hi - 1`` and write the kept bars' values straight into one preallocated block
    (no full-length outputs, no float64 results converted afterwards); the book kinds are
    computed together in one pass over the levels, the rolling return kinds in one pass and
    the forward returns in another, each checking its values for non-finite ones per block
    while they are in cache (no separate pass).
    """
    n_depth = sum(d.kind == "depth" for d in defs)
    out = _arrow_f32(len(defs), hi - lo)
    scratch = np.empty((max(n_depth, 1), bars.n))  # reused by every kind that needs one
    done = _book_columns(bars, defs, lo, hi, out, scratch)
    done.update(_return_columns(bars, defs, lo, hi, out))
    if any(isinstance(d, ExprDef) for d in defs):
        done.update(_expression_columns(bars, defs, settings, (lo, hi), out))
    bad = []
    for i, (d, row) in enumerate(zip(defs, out, strict=True)):
        if i in done:  # a book, return or expression kind, written and checked in its pass
            bad.append(done[i])
        else:
            bad.append(_INTO[d.kind](bars, d.params, settings, lo, hi, row, scratch[0]))
    return out, bad


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
    block, first_bad = _kept_columns(bars, defs, featureset.settings, lo, hi)
    n_features = len(featureset.features)
    features: dict[str, F32] = {}
    targets: dict[str, F32] = {}
    for i, (d, values, bad) in enumerate(zip(defs, block, first_bad, strict=True)):
        label = "feature" if i < n_features else "target"
        if bad >= 0:
            _raise_nonfinite(float(values[bad - lo]), bad, f"{label} {d.name!r}", bars)
        if i < n_features:
            features["f_" + d.name] = values
        else:
            targets["target_" + d.name] = values
    return features, targets


def compute_features(
    table: pa.Table, featureset: FeatureSet, *, calendar: str = DEFAULT_CALENDAR
) -> FeatureFrame:
    """Compute `featureset` over a bar table.

    Parameters
    ----------
    table
        Bars of one continuous series (front month or one instrument), sorted by
        ``ts_close`` strictly increasing, with the bar store's columns.
    featureset
        The features, targets and settings.
    calendar
        The calendar of the bars' sessions (session phase; early closes are shorter).

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
    bars = BarInputs(table, settings, calendar=calendar)
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
