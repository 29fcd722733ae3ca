"""Equity-curve PNGs of backtests and training runs (matplotlib, Agg, imported lazily).

Figures are drawn on matplotlib's object API with the Agg canvas: no pyplot, no global
backend switch, safe in threads and on machines without a display.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fxstore.store import atomic_path

if TYPE_CHECKING:
    from fxstore.train.backtest import FoldResult
    from fxstore.train.walkforward import Fold

__all__ = ["bar_times", "plot_equity"]

logger = logging.getLogger(__name__)


def bar_times(trading_day: npt.NDArray[np.int32]) -> npt.NDArray[np.datetime64]:
    """A date for each bar: its trading day plus its share of that day's bars.

    Bars are not evenly spaced in time, so a bar's x position spreads the day's bars evenly
    over the day (``day + i / n_bars_that_day``): the axis is dated and monotonic.
    """
    day = np.asarray(trading_day, dtype=np.int64)
    if day.size == 0:
        return np.empty(0, dtype="datetime64[m]")
    starts = np.flatnonzero(np.diff(day, prepend=day[0] - 1))
    counts = np.diff(np.append(starts, day.size))
    index_in_day = np.arange(day.size) - np.repeat(starts, counts)
    minutes = np.round(index_in_day / np.repeat(counts, counts) * 1440).astype(np.int64)
    times: npt.NDArray[np.datetime64] = (day * 1440 + minutes).astype("datetime64[m]")
    return times


def _iso(day: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=int(day))).isoformat()


def plot_equity(path: Path, fold: Fold, results: Mapping[str, FoldResult]) -> None:
    """Write a PNG of every policy's equity curve over the fold's test window (atomic).

    Parameters
    ----------
    path
        The PNG to write; its folder is created.
    fold
        The fold whose test window the results booked (title and span).
    results
        Policy name -> its result on that window; equity = capital + cumulative PnL.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for policy, result in results.items():
        equity = result.metrics.capital + np.cumsum(result.pnl)
        axes.plot(bar_times(result.trading_day), equity, label=policy, linewidth=1.2)
    locator = AutoDateLocator()  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    first, last = fold.test_span
    axes.set_title(f"fold {fold.index}: test {_iso(first)} .. {_iso(last)}")
    axes.set_ylabel("equity, $")
    axes.grid(True, alpha=0.3)
    if results:
        axes.legend(loc="best")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png")
    logger.debug("wrote %s", path)
