"""Random but realistic bar tables in code, for tests and benchmarks of the feature stage.

:func:`synthetic_bars` returns a table with exactly the bar store's columns
(:data:`fxstore.ingest.bars.builder.BAR_SCHEMA`), as ``fxstore ingest`` writes them for the front
month: bars inside CME sessions, ``ts_close`` strictly increasing, prices on the tick grid, a
random-walk close, a consistent book at close (bid < ask, ten levels), signed volumes, OFI and,
on the chosen days, a roll to a new contract that trades ``roll_gap`` points higher. It is
vectorised: a year of 1.5 M bars takes about a second. Making DBN files and ingesting them is
what :mod:`fxstore.synth` is for; this skips that when only bars are needed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.errors import InvalidInputError
from fxstore.ingest import BAR_SCHEMA
from fxstore.market.calendar import MONTH_CODES, session_bounds_ns, trading_days_between

__all__ = ["synthetic_bars"]

_N_LEVELS = 10


def _times(
    days: Sequence[dt.date], per_day: npt.NDArray[np.int64], rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(day index, ts_open, ts_close)`` per bar: evenly spread over each session, jittered."""
    bounds = np.array([session_bounds_ns(d) for d in days], dtype=np.int64)
    day = np.repeat(np.arange(len(days)), per_day)
    first = np.repeat(np.cumsum(per_day) - per_day, per_day)
    slot = np.arange(day.size) - first  # bar's index within its day
    step = (bounds[day, 1] - bounds[day, 0]) // per_day[day]
    ts_close = (
        bounds[day, 0] + slot * step + (step * rng.uniform(0.2, 0.95, day.size)).astype(np.int64)
    )
    length = (step * rng.uniform(0.0, 0.15, day.size)).astype(np.int64)
    length[rng.random(day.size) < 0.02] = 0  # one-packet bars: ts_open == ts_close
    return day, ts_close - length, ts_close


def _contracts(
    day: npt.NDArray[np.int64], days: Sequence[dt.date], roll_days: Sequence[int]
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Contract ordinal per bar (0, then +1 from each roll day) and each contract's symbol."""
    ordinal = np.searchsorted(np.sort(np.asarray(roll_days, dtype=np.int64)), day, side="right")
    year = days[0].year
    quarter = (days[0].month - 1) // 3
    names = []
    for k in range(len(roll_days) + 1):
        q = quarter + k
        month = 3 * (q % 4) + 3
        names.append(f"ES{MONTH_CODES[month - 1]}{(year + q // 4) % 10}")
    return ordinal.astype(np.int64), names


def _trade_columns(
    close: npt.NDArray[np.float64], tick_size: float, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    n = close.shape[0]
    volume = rng.integers(1, 400, n)
    buy = rng.binomial(volume, 0.5)
    sell = rng.binomial(volume - buy, 0.97)  # a few contracts unsigned
    return {
        "volume": volume,
        "buy_volume": buy,
        "sell_volume": sell,
        "n_trades": np.maximum(1, volume // rng.integers(1, 6, n)),
        "n_events": volume * 8,
        "vwap": close + tick_size * rng.uniform(-2.0, 2.0, n),
        "dollar_volume": close * volume * 50.0,
        "imbalance": (buy - sell) * close * 50.0,
    }


def _book_columns(
    close: npt.NDArray[np.float64], tick_size: float, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Ten levels a side on the tick grid around the close (a wider spread 3% of the time)."""
    n = close.shape[0]
    bid = close - tick_size * rng.integers(0, 2, n)
    ask = bid + tick_size * np.where(rng.random(n) < 0.03, 2, 1)
    cols: dict[str, np.ndarray] = {}
    for side, top, sign in (("bid", bid, -1.0), ("ask", ask, 1.0)):
        for lv in range(_N_LEVELS):
            cols[f"{side}_px_{lv:02d}"] = top + sign * tick_size * lv
    for kind in ("sz", "ct"):
        for side in ("bid", "ask"):
            for lv in range(_N_LEVELS):
                high = 60 + 15 * lv if kind == "sz" else 20
                cols[f"{side}_{kind}_{lv:02d}"] = np.asarray(rng.integers(1, high, n), np.uint32)
    for lv in range(_N_LEVELS):
        cols[f"ofi_{lv:02d}"] = np.round(rng.normal(0.0, 40.0 + 10 * lv, n))
    return cols


def synthetic_bars(
    n_bars: int,
    *,
    n_days: int,
    start: dt.date = dt.date(2024, 1, 2),
    roll_days: Sequence[int] = (),
    roll_gap: float = 20.0,
    seed: int = 0,
    tick_size: float = 0.25,
) -> pa.Table:
    """Make `n_bars` front-month bars over the first `n_days` trading days from `start`.

    Parameters
    ----------
    n_bars
        Bars in all (spread evenly over the days; at least one per day).
    n_days
        Trading days (CME calendar) the bars cover.
    start
        First calendar day considered.
    roll_days
        Day indices (0-based) on whose first bar a new contract starts.
    roll_gap
        Points by which each new contract trades above the previous one (the roll jump).
    seed
        Seed of every random choice: the same arguments give the same table.
    tick_size
        Price grid in index points.

    Returns
    -------
    pyarrow.Table
        Schema ``BAR_SCHEMA``, one chunk per column, sorted by ``ts_close``.
    """
    days = trading_days_between(start, start + dt.timedelta(days=2 * n_days + 14))[:n_days]
    if n_days < 1 or len(days) < n_days or n_bars < n_days:
        raise InvalidInputError(f"need 1 <= n_days <= n_bars, was {n_days} days, {n_bars} bars.")
    rng = np.random.default_rng(seed)
    per_day = np.full(n_days, n_bars // n_days, dtype=np.int64)
    per_day[: n_bars % n_days] += 1
    day, ts_open, ts_close = _times(days, per_day, rng)
    contract, names = _contracts(day, days, roll_days)
    ticks = np.cumsum(rng.choice([-2, -1, 0, 0, 1, 2], size=n_bars))
    close = 4700.0 + roll_gap * contract + tick_size * ticks
    open_ = close - tick_size * rng.integers(-3, 4, n_bars)
    cols: dict[str, object] = {
        "ts_open": ts_open,
        "ts_close": ts_close,
        "trading_day": np.array(days, dtype="datetime64[D]")[day],
        "instrument_id": (432403 + 3 * contract).astype(np.uint32),
        "contract": np.array(names, dtype=object)[contract],
        "open": open_,
        "high": np.maximum(open_, close) + tick_size * rng.integers(0, 3, n_bars),
        "low": np.minimum(open_, close) - tick_size * rng.integers(0, 3, n_bars),
        "close": close,
        **_trade_columns(close, tick_size, rng),
        **_book_columns(close, tick_size, rng),
        "threshold": np.full(n_bars, 1e6),
        "min_trades": np.full(n_bars, 10, dtype=np.int64),
        "max_trades": np.full(n_bars, 1000, dtype=np.int64),
        "close_reason": np.full(n_bars, "threshold", dtype=object),
        "is_partial": np.zeros(n_bars, dtype=bool),
        "has_maybe_bad_book": np.zeros(n_bars, dtype=bool),
    }
    quality = ("n_tick_rule", "n_crossed", "n_bad_ts_recv", "n_maybe_bad_book", "n_implausible_px")
    for name in quality:
        cols[name] = np.zeros(n_bars, dtype=np.int64)
    return pa.table(
        {f.name: pa.array(cols[f.name], type=f.type) for f in BAR_SCHEMA}, schema=BAR_SCHEMA
    )
