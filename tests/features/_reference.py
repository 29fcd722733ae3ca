"""A slow, obvious reference of every feature kind: one Python loop per bar, float64.

Written from the formulas in :mod:`fxstore.features.registry`, independently of the kernels,
to check them. Each function returns float64 (n,) with NaN where the value is not defined.
"""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.features.definitions import FeatureDef, Settings
from fxstore.market.calendar import session_bounds_ns

F64 = npt.NDArray[np.float64]


class Bars:
    """The columns of a bar table as plain Python-friendly numpy arrays (nulls as NaN)."""

    def __init__(self, table: pa.Table) -> None:
        self.n = table.num_rows

        def col(name: str) -> np.ndarray:
            return table.column(name).to_numpy(zero_copy_only=False)

        self.close = col("close").astype(float)
        self.ids = col("instrument_id")
        self.days = col("trading_day")  # datetime64[D]
        self.ts_open = col("ts_open")
        self.ts_close = col("ts_close")
        self.cols = {name: col(name) for name in table.column_names if name != "contract"}

    def returns(self) -> F64:
        r = np.zeros(self.n)
        for t in range(1, self.n):
            if self.ids[t] == self.ids[t - 1]:
                r[t] = math.log(self.close[t] / self.close[t - 1])
        return r

    def sigma(self, settings: Settings) -> F64:
        r, w = self.returns(), settings.vol_window
        out = np.full(self.n, np.nan)
        for t in range(w, self.n):
            out[t] = max(
                math.sqrt(sum(x * x for x in r[t - w + 1 : t + 1]) / w), settings.vol_floor
            )
        return out

    def f(self, name: str, t: int) -> float:
        return float(self.cols[name][t])


def _rolling_mean(values: list[float], t: int, window: int) -> float:
    return sum(values[t - window + 1 : t + 1]) / window if t >= window - 1 else math.nan


def _levels(bars: Bars, t: int, prefix: str, levels: int) -> float:
    return sum(bars.f(f"{prefix}_{lv:02d}", t) for lv in range(levels))


def _log_duration(bars: Bars, t: int) -> float:
    return math.log(max(int(bars.ts_close[t]) - int(bars.ts_open[t]), 1_000_000) / 1e9)


def _phase(bars: Bars, t: int) -> float:
    day = dt.date.fromisoformat(str(bars.days[t]))
    open_ns, close_ns = session_bounds_ns(day)
    return (int(bars.ts_close[t]) - open_ns) / (close_ns - open_ns)


def _returns(bars: Bars, d: FeatureDef, settings: Settings) -> F64:
    r, sigma, h = bars.returns(), bars.sigma(settings), int(d.params["horizon"])
    out = np.full(bars.n, np.nan)
    for t in range(bars.n):
        if d.kind == "log_return" and t >= h:
            out[t] = sum(r[t - h + 1 : t + 1]) / (sigma[t] * math.sqrt(h))
        if d.kind == "forward_return" and t + h < bars.n:
            out[t] = sum(r[t + 1 : t + h + 1]) / (sigma[t] * math.sqrt(h))
    return out


def _realised_vol(bars: Bars, d: FeatureDef, settings: Settings) -> F64:
    r, sigma, w = bars.returns(), bars.sigma(settings), int(d.params["window"])
    out = np.full(bars.n, np.nan)
    for t in range(w, bars.n):
        out[t] = math.sqrt(sum(x * x for x in r[t - w + 1 : t + 1]) / w) / sigma[t]
    return out


def _ofi(bars: Bars, d: FeatureDef, _settings: Settings) -> F64:
    if d.kind == "ofi_level":
        lv = int(d.params["level"])
        levels = range(lv, lv + 1)
    else:
        levels = range(int(d.params["levels"]))
    depth, ofi = [], []
    for t in range(bars.n):
        depth.append(
            sum(bars.f(f"bid_sz_{k:02d}", t) + bars.f(f"ask_sz_{k:02d}", t) for k in levels) / 2
        )
        ofi.append(sum(bars.f(f"ofi_{k:02d}", t) for k in levels))
    w = int(d.params["window"])
    return np.array([ofi[t] / max(_rolling_mean(depth, t, w), 1.0) for t in range(bars.n)])


def _book(bars: Bars, d: FeatureDef, settings: Settings) -> F64:
    out = np.full(bars.n, np.nan)
    tick = settings.tick_size
    for t in range(bars.n):
        bid, ask = bars.f("bid_px_00", t), bars.f("ask_px_00", t)
        if d.kind == "book_imbalance":
            b = _levels(bars, t, "bid_sz", int(d.params["levels"]))
            a = _levels(bars, t, "ask_sz", int(d.params["levels"]))
            out[t] = (b - a) / (b + a) if b + a else math.nan
        elif d.kind == "spread_ticks":
            out[t] = (ask - bid) / tick
        else:  # microprice_offset
            qb, qa = bars.f("bid_sz_00", t), bars.f("ask_sz_00", t)
            micro = (bid * qa + ask * qb) / (qa + qb) if qa + qb else math.nan
            out[t] = (micro - (bid + ask) / 2) / tick
    return out


def _demeaned_logs(bars: Bars, d: FeatureDef, _settings: Settings) -> F64:
    logs = []
    for t in range(bars.n):
        if d.kind == "depth":
            n = int(d.params["levels"])
            logs.append(math.log(1 + _levels(bars, t, "bid_sz", n) + _levels(bars, t, "ask_sz", n)))
        elif d.kind == "bar_duration":
            logs.append(_log_duration(bars, t))
        else:  # trade_intensity
            logs.append(math.log(bars.f("n_trades", t)) - _log_duration(bars, t))
    w = int(d.params["window"])
    return np.array([logs[t] - _rolling_mean(logs, t, w) for t in range(bars.n)])


def _trades_and_time(bars: Bars, d: FeatureDef, settings: Settings) -> F64:
    out = np.full(bars.n, np.nan)
    for t in range(bars.n):
        if d.kind == "trade_imbalance":
            out[t] = (bars.f("buy_volume", t) - bars.f("sell_volume", t)) / bars.f("volume", t)
        elif d.kind == "vwap_distance":
            out[t] = (bars.close[t] - bars.f("vwap", t)) / settings.tick_size
        elif d.kind == "time_of_day":
            angle = 2 * math.pi * _phase(bars, t)
            out[t] = math.cos(angle) if d.params["fn"] == "cos" else math.sin(angle)
        else:  # session_start
            out[t] = 1.0 if t == 0 or bars.days[t] != bars.days[t - 1] else 0.0
    return out


_REFERENCE = {
    "log_return": _returns,
    "forward_return": _returns,
    "realised_vol": _realised_vol,
    "ofi_level": _ofi,
    "ofi_multi": _ofi,
    "book_imbalance": _book,
    "spread_ticks": _book,
    "microprice_offset": _book,
    "depth": _demeaned_logs,
    "bar_duration": _demeaned_logs,
    "trade_intensity": _demeaned_logs,
    "trade_imbalance": _trades_and_time,
    "vwap_distance": _trades_and_time,
    "time_of_day": _trades_and_time,
    "session_start": _trades_and_time,
}


def reference_column(table: pa.Table, d: FeatureDef, settings: Settings) -> F64:
    """The value of feature/target `d` at every bar, computed the slow, obvious way."""
    return _REFERENCE[d.kind](Bars(table), d, settings)
