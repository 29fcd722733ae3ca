"""Walk-forward folds over one symbol's rows: train, purge, validation, embargo, test.

A fold is laid out on trading-day boundaries as::

    [training part][purge][validation][embargo][test]

Test windows are `test_days` long and follow each other without a gap, so every day after the
first test start is tested exactly once. The training window ends where the embargo begins;
it rolls (`train_days` long) or is anchored at the first day (expanding). Gaps are whole days
holding at least `max_target_horizon_bars` rows: a target at row t looks at rows up to
t + horizon, so with at least `horizon` rows between the last fitted row and the first
row of the next slice no label reaches into it (López de Prado, AFML 7.4: purging and
embargo). Pure functions of the ``trading_day`` column; no I/O.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fxstore.config import WalkForwardConfig
from fxstore.errors import InvalidInputError, SchemaError

__all__ = ["Fold", "make_folds"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Fold:
    """One walk-forward fold: half-open row ranges and the trading days they cover.

    Rows index the symbol's rows in time order (the ``trading_day`` array given to
    :func:`make_folds`). ``train[1] <= validation[0] <= validation[1] <= test[0]``.
    """

    index: int
    """Fold number, from 0, in time order."""
    train: tuple[int, int]
    """Rows ``[start, stop)`` to fit on."""
    validation: tuple[int, int]
    """Rows ``[start, stop)`` for early stopping; empty (``start == stop``) without one."""
    test: tuple[int, int]
    """Rows ``[start, stop)`` to evaluate on, never used for fitting or stopping."""
    train_span: tuple[int, int]
    """First and last trading day of `train` (inclusive, days since 1970-01-01)."""
    validation_span: tuple[int, int] | None
    """First and last trading day of `validation`, or None when it is empty."""
    test_span: tuple[int, int]
    """First and last trading day of `test` (inclusive, days since 1970-01-01)."""

    @property
    def number(self) -> int:
        """The fold as people count it, from 1: in tables, progress and messages."""
        return self.index + 1

    @property
    def embargo_rows(self) -> int:
        """Rows between the last training or validation row and the first test row."""
        return self.test[0] - max(self.train[1], self.validation[1])

    @property
    def purge_rows(self) -> int:
        """Rows between the training part and the validation slice (0 without one)."""
        return self.validation[0] - self.train[1] if self.validation[1] > self.validation[0] else 0

    def to_json(self) -> dict[str, object]:
        """The fold as JSON data (row ranges and trading-day spans as 2-item lists)."""
        return {
            "index": self.index,
            "train": list(self.train),
            "validation": list(self.validation),
            "test": list(self.test),
            "train_span": list(self.train_span),
            "validation_span": None if self.validation_span is None else list(self.validation_span),
            "test_span": list(self.test_span),
        }


@dataclass(frozen=True, slots=True)
class _Days:
    """The distinct trading days of the rows and where each starts."""

    days: npt.NDArray[np.int32]  # (n_days,) distinct trading days, increasing
    start: npt.NDArray[np.int64]  # (n_days + 1,) first row of each day, then n_rows

    @property
    def n(self) -> int:
        return len(self.days)

    def rows(self, lo: int, hi: int) -> tuple[int, int]:
        return int(self.start[lo]), int(self.start[hi])

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        return int(self.days[lo]), int(self.days[hi - 1])


def _index_days(trading_day: npt.NDArray[np.int32]) -> _Days:
    """Check `trading_day` (1-D, integer, non-decreasing) and index its days."""
    if trading_day.ndim != 1 or not np.issubdtype(trading_day.dtype, np.integer):
        raise SchemaError(
            f"`trading_day` must be a 1-D integer array, was {trading_day.dtype} "
            f"with shape {trading_day.shape}."
        )
    if len(trading_day) == 0:
        raise InvalidInputError("`trading_day` is empty: there are no rows to cut into folds.")
    steps = np.diff(trading_day)
    if (steps < 0).any():
        row = int(np.flatnonzero(steps < 0)[0]) + 1
        raise SchemaError(
            f"`trading_day` must be non-decreasing (rows in time order); row {row} has "
            f"{int(trading_day[row])} after {int(trading_day[row - 1])}."
        )
    cuts = np.flatnonzero(steps) + 1
    start = np.concatenate(([0], cuts, [len(trading_day)])).astype(np.int64)
    return _Days(days=trading_day[start[:-1]].astype(np.int32), start=start)


def _gap_days(days: _Days, stop: int, horizon: int, least_days: int) -> int | None:
    """Fewest whole days (>= `least_days`) ending before day `stop` holding >= `horizon` rows.

    None when the days before `stop` hold fewer rows or days than that.
    """
    need = int(days.start[stop]) - horizon
    if need < 0:
        return None
    # last day index i whose start row leaves >= horizon rows in days [i, stop)
    first = int(np.searchsorted(days.start, need, side="right")) - 1
    gap = max(stop - first, least_days)
    return gap if gap <= stop else None


def _layout(
    days: _Days, test_lo: int, index: int, config: WalkForwardConfig, horizon: int
) -> Fold | str:
    """The fold whose test window starts on day `test_lo`, or why it does not fit."""
    least = config.embargo_days or 0
    test_hi = min(test_lo + config.test_days, days.n)
    embargo = _gap_days(days, test_lo, horizon, least)
    if embargo is None:
        return f"the {test_lo} days before it hold fewer than the {horizon}-bar embargo"
    window_hi = test_lo - embargo
    window_lo = 0 if config.anchored else window_hi - config.train_days
    if window_hi - window_lo < config.train_days or window_lo < 0:
        return (
            f"its training window would have {window_hi} days (before a {embargo}-day "
            f"embargo), fewer than train_days={config.train_days}"
        )
    width = window_hi - window_lo
    n_val = max(1, round(config.validation_fraction * width)) if config.validation_fraction else 0
    val_lo, train_hi = window_hi - n_val, window_hi
    if n_val:
        purge = _gap_days(days, val_lo, horizon, least)
        train_hi = window_lo if purge is None else max(val_lo - purge, window_lo)
    if train_hi - window_lo < config.min_train_days:
        return (
            f"its {width}-day training window leaves {train_hi - window_lo} days for training "
            f"after a {n_val}-day validation slice and its purge, fewer than "
            f"min_train_days={config.min_train_days}"
        )
    return Fold(
        index=index,
        train=days.rows(window_lo, train_hi),
        validation=days.rows(val_lo, window_hi) if n_val else days.rows(train_hi, train_hi),
        test=days.rows(test_lo, test_hi),
        train_span=days.span(window_lo, train_hi),
        validation_span=days.span(val_lo, window_hi) if n_val else None,
        test_span=days.span(test_lo, test_hi),
    )


def _too_few_days(days: _Days, config: WalkForwardConfig, horizon: int, why: str) -> str:
    """Why not one fold fits: the days a fold needs, or (with enough) the last window's flaw."""
    rows = int(days.start[-1])
    # whole days that hold the horizon, measured on the data's last days (1 unless a day
    # holds fewer bars than the horizon)
    gap = _gap_days(days, days.n, horizon, 0) if horizon else 0
    needed = config.days_needed(1 if gap is None else gap)
    if days.n >= needed:
        return (
            f"no walk-forward fold fits in {days.n} trading days ({rows:,} rows): the last "
            f"possible test window fails: {why}; lower embargo_days, validation_fraction or "
            "min_train_days, or use more days."
        )
    embargo = needed - config.train_days - config.test_days
    n_val = config.validation_days
    validation = f": training part, purge and a {n_val}-day validation slice" if n_val else ""
    return (
        f"only {days.n} trading days ({rows:,} rows), but one walk-forward fold needs at "
        f"least {needed} (train {config.train_days}{validation}; + "
        f"embargo {embargo}, holding the {horizon}-bar target horizon; + test "
        f"{config.test_days}); "
        f"use {needed - days.n} more trading days (a longer ingest, or `fxstore demo` with its "
        "default --start/--end) or lower train_days and test_days (--train-days, --test-days)."
    )


def make_folds(
    trading_day: npt.NDArray[np.int32],
    config: WalkForwardConfig,
    *,
    max_target_horizon_bars: int,
) -> list[Fold]:
    """Cut a symbol's rows into time-ordered walk-forward folds.

    Parameters
    ----------
    trading_day : (n_rows,) int32
        Trading day of each row (days since 1970-01-01), non-decreasing: the fxcache's
        ``trading_day`` column over the rows to split.
    config
        Window lengths in trading days, anchored or rolling, embargo and validation.
    max_target_horizon_bars
        Longest target horizon in bars (the fxcache manifest's ``max_target_horizon_bars``);
        every gap holds at least this many rows.

    Returns
    -------
    list[Fold]
        At least one fold; test windows in order, disjoint and contiguous, each a full
        `test_days` long (trailing days that do not fill one are left out).

    Raises
    ------
    InvalidInputError
        `max_target_horizon_bars` is negative, or the rows are too few for one fold (the
        message gives the day counts and what to change), or a later fold's layout does not
        fit (rolling windows whose gaps eat the training part).
    SchemaError
        `trading_day` is not a 1-D integer array in non-decreasing order.

    Examples
    --------
    >>> day = np.repeat(np.arange(19_700, 19_730, dtype=np.int32), 10)
    >>> cfg = WalkForwardConfig(train_days=10, test_days=5)
    >>> [f.test for f in make_folds(day, cfg, max_target_horizon_bars=4)][:2]
    [(110, 160), (160, 210)]
    """
    horizon = max_target_horizon_bars
    if isinstance(horizon, bool) or not isinstance(horizon, int | np.integer) or horizon < 0:
        raise InvalidInputError(f"`max_target_horizon_bars` must be an int >= 0, was {horizon!r}.")
    days = _index_days(np.asarray(trading_day))
    horizon = int(horizon)
    first = None
    why = f"no day is left for a training window before a {config.test_days}-day test window"
    for test_lo in range(1, days.n - config.test_days + 1):
        fold = _layout(days, test_lo, 0, config, horizon)
        if isinstance(fold, Fold):
            first = test_lo
            break
        why = fold
    if first is None:
        raise InvalidInputError(_too_few_days(days, config, horizon, why))
    folds = []
    for index, test_lo in enumerate(range(first, days.n - config.test_days + 1, config.test_days)):
        fold = _layout(days, test_lo, index, config, horizon)
        if not isinstance(fold, Fold):
            raise InvalidInputError(
                f"fold {index + 1} (test from day {test_lo} of {days.n}) does not fit: {fold}; "
                "lower embargo_days or validation_fraction, or raise train_days."
            )
        folds.append(fold)
    logger.debug("%d walk-forward folds over %d trading days", len(folds), days.n)
    return folds
