"""Equity-curve PNGs of backtests and training runs (matplotlib, Agg, imported lazily).

Figures are drawn on matplotlib's object API with the Agg canvas: no pyplot, no global
backend switch, safe in threads and on machines without a display.

The x axis is exchange time with the CME sessions placed side by side: each trading day
is one unit of the axis, from its session's open (17:00 America/Chicago the evening
before) to its close, so nights, weekends and holidays take no room and the curve has no
flat stretches where nothing could trade. A bar sits at its close's share of its
session; ticks at the session opens are labelled with the trading dates. Results without
bar timestamps (run folders written before they were recorded) fall back to the bar
index, and the axis label says so.

Every policy has one colour in every plot (:func:`policy_colour`); the legend gives each
policy's PnL and daily Sharpe; a drawdown panel sits under the equity panel.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from fxstore.market.calendar import DEFAULT_CALENDAR, sessions
from fxstore.store import atomic_path

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from fxstore.train.evaluate.metrics import BacktestMetrics
    from fxstore.train.evaluate.results import FoldResult
    from fxstore.train.evaluate.walkforward import Fold

__all__ = [
    "POLICY_COLOURS",
    "SessionAxis",
    "equity_all_figure",
    "equity_figure",
    "plot_equity",
    "plot_equity_all",
    "policy_colour",
    "session_axis",
]

logger = logging.getLogger(__name__)

#: The colour of each policy in every plot (matplotlib's tab10, the agent in blue).
POLICY_COLOURS: Final[Mapping[str, str]] = {
    "agent": "#1f77b4",
    "ensemble": "#17becf",
    "flat": "#7f7f7f",
    "long": "#2ca02c",
    "random": "#bcbd22",
    "ofi-sign": "#ff7f0e",
    "linear": "#9467bd",
    "ceiling": "#e377c2",
    "oracle": "#d62728",
}
#: Extra agents of a multi-seed run (``agent-s1``, ...): lighter and darker blues.
_SEED_COLOURS: Final = ("#6baed6", "#08519c", "#9ecae1", "#3182bd", "#c6dbef", "#084594")
#: Any other policy: one of these, chosen by a checksum of its name (stable across runs).
_OTHER_COLOURS: Final = ("#aec7e8", "#8c564b", "#393b79", "#637939", "#8c6d31", "#843c39")
_TIME_LABEL: Final = (
    "exchange time (America/Chicago): CME sessions side by side, nights and weekends left "
    "out; ticks at each session's open, labelled with its trading date"
)
_INDEX_LABEL: Final = "bar index (this run's results hold no bar timestamps)"
_MAX_TICK_LABELS: Final = 12


def policy_colour(policy: str) -> str:
    """The colour `policy` has in every plot (a hex RGB string)."""
    if policy in POLICY_COLOURS:
        return POLICY_COLOURS[policy]
    if policy.startswith("agent-s") and policy[7:].isdigit():
        return _SEED_COLOURS[(int(policy[7:]) - 1) % len(_SEED_COLOURS)]
    return _OTHER_COLOURS[zlib.crc32(policy.encode()) % len(_OTHER_COLOURS)]


@dataclass(frozen=True, slots=True)
class SessionAxis:
    """Where bars go on a compressed time axis, and its ticks."""

    x: npt.NDArray[np.float64]
    """float64 ``(n_bars,)``: the k-th trading day of the bars spans ``[k, k + 1]``."""
    tick_x: npt.NDArray[np.float64]
    """Every session's open (``k``), one per trading day of the bars."""
    tick_day: npt.NDArray[np.int32]
    """The trading day (days since 1970-01-01) of each tick."""
    is_time: bool
    """False when the bars had no timestamps: `x` is then the bar index."""


def session_axis(
    ts_close: npt.NDArray[np.int64] | None,
    trading_day: npt.NDArray[np.int32],
    calendar: str = DEFAULT_CALENDAR,
) -> SessionAxis:
    """Place bars on an axis of trading sessions side by side (see the module docstring).

    Parameters
    ----------
    ts_close
        int64 ``(n_bars,)`` each bar's close, ns UTC, increasing; None without timestamps.
    trading_day
        int32 ``(n_bars,)`` each bar's trading day, days since 1970-01-01. A run of equal
        days is one session; a day missing from `calendar` spans its own first to last bar.
    calendar
        The session table the opens and closes come from.
    """
    day = np.asarray(trading_day, dtype=np.int64)
    starts = np.flatnonzero(np.diff(day, prepend=day[:1] - 1)) if day.size else np.zeros(0, int)
    tick_day = day[starts].astype(np.int32)
    if ts_close is None or len(ts_close) != day.size:
        x = np.arange(day.size, dtype=np.float64)
        return SessionAxis(x, starts.astype(np.float64), tick_day, is_time=False)
    ts = np.asarray(ts_close, dtype=np.int64)
    table = sessions(calendar)
    x = np.empty(day.size, dtype=np.float64)
    ends = np.append(starts[1:], day.size)
    for k, (lo, hi) in enumerate(zip(starts, ends, strict=True)):
        date = dt.date(1970, 1, 1) + dt.timedelta(days=int(day[lo]))
        open_ns, close_ns = table.bounds(date) if table.is_trading_day(date) else (ts[lo], ts[lo])
        first, last = min(open_ns, int(ts[lo])), max(close_ns, int(ts[hi - 1]))
        x[lo:hi] = k + (ts[lo:hi] - first) / max(last - first, 1)
    return SessionAxis(x, np.arange(starts.size, dtype=np.float64), tick_day, is_time=True)


def _rank(policy: str) -> tuple[int, str]:
    """Legend order: the agents, then the baselines in the order of POLICY_COLOURS."""
    names = list(POLICY_COLOURS)
    if policy.startswith("agent"):
        return 0, policy
    return 1 + (names.index(policy) if policy in names else len(names)), policy


def _dollars(value: float, _pos: object = None) -> str:
    # "\$": a bare "$" pair would start matplotlib's mathtext.
    return f"{'-' if value < 0 else ''}\\${abs(value):,.0f}"


def _legend_label(policy: str, metrics: BacktestMetrics) -> str:
    sharpe = "n/a" if not math.isfinite(metrics.sharpe_daily) else f"{metrics.sharpe_daily:.2f}"
    return f"{policy}: PnL {_dollars(metrics.total_pnl)}, Sharpe ann. {sharpe}"


def _iso(day: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=int(day))).isoformat()


def _label_ticks(axes: Axes, axis: SessionAxis) -> None:
    from matplotlib.ticker import FixedLocator, NullFormatter

    step = max(1, math.ceil(axis.tick_x.size / _MAX_TICK_LABELS))
    chosen = np.arange(0, axis.tick_x.size, step)
    if axis.is_time:
        dates = [dt.date(1970, 1, 1) + dt.timedelta(days=int(d)) for d in axis.tick_day[chosen]]
        labels = [  # the year under the first date and under each new year's
            d.strftime("%a\n%b %d" if i and d.year == dates[i - 1].year else "%a\n%b %d\n%Y")
            for i, d in enumerate(dates)
        ]
        axes.set_xticks(axis.tick_x[chosen], labels)
        axes.xaxis.set_minor_locator(FixedLocator(list(axis.tick_x)))
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.grid(True, which="minor", axis="x", alpha=0.15)
        axes.set_xlim(0.0, float(axis.tick_x.size))
    axes.set_xlabel(_TIME_LABEL if axis.is_time else _INDEX_LABEL)


def _draw(
    title: str,
    curves: Mapping[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], str]],
    axis: SessionAxis | None,
    boundaries: Sequence[tuple[float, str]] = (),
) -> Figure:
    """Equity panel over a drawdown panel; `curves`: policy -> (x, equity, legend label)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    figure = Figure(figsize=(13, 7), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1))
    for policy in sorted(curves, key=_rank):
        x, equity, label = curves[policy]
        colour = policy_colour(policy)
        is_agent = policy == "agent"  # drawn thicker and on top, also when it lies on 'flat'
        width, order = (2.0, 3.0) if is_agent else (1.1, 2.0)
        top.plot(x, equity, color=colour, linewidth=width, label=label, zorder=order)
        drawdown = equity - np.maximum.accumulate(equity) if equity.size else equity
        bottom.plot(x, drawdown, color=colour, linewidth=width * 0.8, zorder=order)
    for x_fold, name in boundaries:
        for panel in (top, bottom):
            panel.axvline(x_fold, color="#444444", linestyle="--", linewidth=0.8, alpha=0.6)
        top.annotate(
            name, (x_fold, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
            textcoords="offset points", fontsize=8, color="#444444",
        )  # fmt: skip
    top.set_title(title)
    top.margins(x=0)
    top.set_ylabel("equity (\\$)")
    bottom.set_ylabel("drawdown (\\$)")
    for panel in (top, bottom):
        panel.yaxis.set_major_formatter(FuncFormatter(_dollars))
        panel.grid(True, which="major", alpha=0.3)
    if axis is not None:
        _label_ticks(bottom, axis)
    if curves:
        top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return figure


def _save(figure: Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png")
    logger.debug("wrote %s", path)


def _equity(result: FoldResult, start: float = 0.0) -> npt.NDArray[np.float64]:
    return result.metrics.capital + start + np.cumsum(result.pnl)


def plot_equity(path: Path, fold: Fold, results: Mapping[str, FoldResult]) -> None:
    """Write :func:`equity_figure` of `fold` and `results` to the PNG `path` (atomic; its
    folder is created)."""
    _save(equity_figure(fold, results), path)


def equity_figure(fold: Fold, results: Mapping[str, FoldResult]) -> Figure:
    """Every policy's equity (top panel) and drawdown (bottom) over the fold's test window.

    Parameters
    ----------
    fold
        The fold whose test window the results booked (title and span).
    results
        Policy name -> its result on that window; equity = capital + cumulative PnL.
    """
    curves = {}
    axis = None
    for policy, result in results.items():
        axis = session_axis(result.ts_close, result.trading_day)
        curves[policy] = (axis.x, _equity(result), _legend_label(policy, result.metrics))
    first, last = fold.test_span
    return _draw(f"fold {fold.number}: test {_iso(first)} .. {_iso(last)}", curves, axis)


def plot_equity_all(
    path: Path, results: Sequence[FoldResult], totals: Mapping[str, BacktestMetrics]
) -> None:
    """Write :func:`equity_all_figure` of `results` and `totals` to the PNG `path`
    (``runs/<id>/equity_all.png``; atomic, its folder is created)."""
    _save(equity_all_figure(results, totals), path)


def equity_all_figure(
    results: Sequence[FoldResult], totals: Mapping[str, BacktestMetrics]
) -> Figure:
    """Every policy's equity and drawdown over all test windows, one after another.

    Each policy's equity carries on from fold to fold (capital + PnL of every window so
    far); dashed lines mark where each fold's test window starts.

    Parameters
    ----------
    results
        Every (fold, policy) result, in fold order.
    totals
        Policy -> metrics over every test window (the legend's PnL and Sharpe).
    """
    folds = sorted({r.fold.index: r.fold for r in results}.items())
    curves = {}
    axis = None
    boundaries: list[tuple[float, str]] = []
    for policy in dict.fromkeys(r.policy for r in results):
        mine = sorted((r for r in results if r.policy == policy), key=lambda r: r.fold.index)
        stamps = [r.ts_close for r in mine if r.ts_close is not None]
        ts = np.concatenate(stamps) if len(stamps) == len(mine) else None
        axis = session_axis(ts, np.concatenate([r.trading_day for r in mine]))
        offsets = np.cumsum([0.0, *(float(r.pnl.sum()) for r in mine[:-1])])
        equity = np.concatenate([_equity(r, o) for r, o in zip(mine, offsets, strict=True)])
        label = _legend_label(policy, totals[policy]) if policy in totals else policy
        curves[policy] = (axis.x, equity, label)
        if not boundaries:
            rows = np.cumsum([0, *(r.pnl.size for r in mine[:-1])])
            at = np.floor(axis.x[rows]) if axis.is_time else axis.x[rows]  # the session's open
            boundaries = [
                (float(x), f"fold {r.fold.number}") for x, r in zip(at, mine, strict=True)
            ]
    title = "all folds"
    if folds:
        first, last = folds[0][1].test_span[0], folds[-1][1].test_span[1]
        title = f"all {len(folds)} folds: test {_iso(first)} .. {_iso(last)}"
    return _draw(title, curves, axis, boundaries)
