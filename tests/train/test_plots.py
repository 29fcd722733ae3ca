"""Equity plots: sessions side by side, one colour per policy, PnL and Sharpe in the legend,
a drawdown panel, and one plot over all folds."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.market.calendar import session_bounds_ns
from fxstore.train.evaluate.metrics import BacktestMetrics
from fxstore.train.evaluate.results import FoldResult, fold_result
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.runs.plots import (
    POLICY_COLOURS,
    equity_all_figure,
    equity_figure,
    plot_equity_all,
    policy_colour,
    session_axis,
)

pytestmark = pytest.mark.quick

#: Thu 2024-03-07, Fri 03-08, then a weekend, Mon 03-11, Tue 03-12 (the day after US DST).
DAYS = (dt.date(2024, 3, 7), dt.date(2024, 3, 8), dt.date(2024, 3, 11), dt.date(2024, 3, 12))
BARS_PER_DAY = 20


def _epoch_day(day: dt.date) -> int:
    return (day - dt.date(1970, 1, 1)).days


def session_bars(
    days: tuple[dt.date, ...] = DAYS,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Bar closes spread evenly over each day's session (the last at its close)."""
    stamps, trading_day = [], []
    for day in days:
        open_ns, close_ns = session_bounds_ns(day)
        step = (close_ns - open_ns) // BARS_PER_DAY
        stamps += [open_ns + step * (i + 1) for i in range(BARS_PER_DAY)]
        trading_day += [_epoch_day(day)] * BARS_PER_DAY
    return np.array(stamps, dtype=np.int64), np.array(trading_day, dtype=np.int32)


def _fold(index: int, lo: int, hi: int, day: npt.NDArray[np.int32]) -> Fold:
    span = (int(day[lo]), int(day[hi - 1]))
    return Fold(index, (0, 1), (1, 1), (lo, hi), span, None, span)


def results_of(
    policies: tuple[str, ...], *, with_ts: bool = True, n_folds: int = 1
) -> list[FoldResult]:
    """Every policy on `n_folds` folds that split the bars of DAYS evenly."""
    ts, day = session_bars()
    rng = np.random.default_rng(3)
    edges = np.linspace(0, day.size, n_folds + 1).astype(int)
    out = []
    for index, (lo, hi) in enumerate(itertools.pairwise(edges)):
        fold = _fold(index, int(lo), int(hi), day)
        for policy in policies:
            pnl = rng.normal(5.0, 50.0, hi - lo)
            out.append(
                fold_result(
                    fold,
                    policy,
                    pnl,
                    np.ones(hi - lo),
                    day[lo:hi],
                    bars_per_day=BARS_PER_DAY,
                    capital=100_000.0,
                    seed=0,
                    ts_close=ts[lo:hi] if with_ts else None,
                )
            )
    return out


def _by_policy(results: list[FoldResult]) -> dict[str, FoldResult]:
    return {r.policy: r for r in results}


# --- the session axis -----------------------------------------------------------------------


def test_session_axis_consecutive_trading_days_are_contiguous() -> None:
    ts, day = session_bars()

    axis = session_axis(ts, day)

    within = np.diff(axis.x[:BARS_PER_DAY]).max()
    for k in range(1, len(DAYS)):  # across a night, a weekend and a DST change alike
        last, first = axis.x[k * BARS_PER_DAY - 1], axis.x[k * BARS_PER_DAY]
        assert 0 < first - last <= within * 1.01
    assert np.all(np.diff(axis.x) > 0)
    assert axis.x[-1] == pytest.approx(len(DAYS))


def test_session_axis_ticks_are_session_opens_labelled_with_trading_days() -> None:
    ts, day = session_bars()

    axis = session_axis(ts, day)

    assert list(axis.tick_x) == [0.0, 1.0, 2.0, 3.0]
    assert list(axis.tick_day) == [_epoch_day(d) for d in DAYS]
    assert axis.is_time


def test_session_axis_without_timestamps_falls_back_to_bar_index() -> None:
    _, day = session_bars()

    axis = session_axis(None, day)

    assert not axis.is_time
    assert list(axis.x) == list(range(day.size))


def test_equity_figure_without_timestamps_says_so_on_the_axis() -> None:
    results = _by_policy(results_of(("agent", "flat"), with_ts=False))

    figure = equity_figure(next(iter(results.values())).fold, results)

    assert "bar index" in figure.axes[1].get_xlabel()
    assert "no bar timestamps" in figure.axes[1].get_xlabel()


def test_equity_figure_with_timestamps_labels_exchange_time_and_dates() -> None:
    results = _by_policy(results_of(("agent",)))

    figure = equity_figure(results["agent"].fold, results)
    figure.canvas.draw()

    bottom = figure.axes[1]
    assert "America/Chicago" in bottom.get_xlabel()
    labels = [t.get_text() for t in bottom.get_xticklabels()]
    assert "Fri\nMar 08" in labels and "Mon\nMar 11" in labels


# --- colours, legend, panels ----------------------------------------------------------------


def test_policy_colour_is_fixed_and_distinct_per_policy() -> None:
    named = [policy_colour(p) for p in POLICY_COLOURS]

    assert len(set(named)) == len(named)
    assert policy_colour("agent-s1") != policy_colour("agent")
    assert policy_colour("someday") == policy_colour("someday")


def test_equity_figures_give_each_policy_its_colour_whatever_the_order() -> None:
    forward = _by_policy(results_of(("agent", "flat", "long", "oracle")))
    backward = dict(reversed(forward.items()))

    for results in (forward, backward):
        figure = equity_figure(forward["agent"].fold, results)
        legend = [t.get_text().split(":")[0] for t in figure.axes[0].get_legend().get_texts()]
        assert legend == ["agent", "flat", "long", "oracle"]  # a fixed order, too
        for panel in figure.axes[:2]:
            colours = [line.get_color() for line in panel.get_lines()]
            assert colours == [POLICY_COLOURS[p] for p in legend]


def test_equity_figure_legend_holds_pnl_and_sharpe_of_each_policy() -> None:
    results = _by_policy(results_of(("agent", "linear")))

    figure = equity_figure(results["agent"].fold, results)

    texts = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    for text, (policy, result) in zip(texts, results.items(), strict=True):  # agent first
        assert text.startswith(f"{policy}: PnL ")
        assert f"{abs(result.metrics.total_pnl):,.0f}" in text
        assert f"Sharpe ann. {result.metrics.sharpe_daily:.2f}" in text


def test_equity_figure_has_a_drawdown_panel_under_the_equity_panel() -> None:
    results = _by_policy(results_of(("agent",)))

    figure = equity_figure(results["agent"].fold, results)

    top, bottom = figure.axes[:2]
    assert "equity" in top.get_ylabel() and "drawdown" in bottom.get_ylabel()
    assert bottom.get_position().y1 <= top.get_position().y0
    drawdown = bottom.get_lines()[0].get_ydata()
    assert np.max(drawdown) == 0.0 and np.min(drawdown) < 0


def test_equity_figure_dollar_ticks_have_thousands_separators() -> None:
    results = _by_policy(results_of(("agent",)))

    figure = equity_figure(results["agent"].fold, results)
    figure.canvas.draw()

    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert any("$100," in label for label in labels)


# --- all folds ------------------------------------------------------------------------------


def _totals(results: list[FoldResult]) -> dict[str, BacktestMetrics]:
    return {r.policy: r.metrics for r in results}  # any metrics: the legend shows them


def test_equity_all_figure_chains_folds_and_marks_each_fold() -> None:
    results = results_of(("agent", "flat"), n_folds=2)

    figure = equity_all_figure(results, _totals(results))

    agent = figure.axes[0].get_lines()[0]
    pnl = np.concatenate([r.pnl for r in results if r.policy == "agent"])
    np.testing.assert_allclose(agent.get_ydata(), 100_000.0 + np.cumsum(pnl))
    assert np.all(np.diff(agent.get_xdata()) > 0)
    marks = [t.get_text() for t in figure.axes[0].texts]
    assert marks == ["fold 1", "fold 2"]


def test_plot_equity_all_writes_a_png(tmp_path: Path) -> None:
    results = results_of(("agent", "flat"), n_folds=2)

    plot_equity_all(tmp_path / "equity_all.png", results, _totals(results))

    assert (tmp_path / "equity_all.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob("*.tmp"))
