"""Configuration of walk-forward folds (:func:`fxstore.train.evaluate.walkforward.make_folds`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fxstore.config._validate import (
    validate_at_least,
    validate_bool,
    validate_in_range,
    validate_number,
)
from fxstore.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class WalkForwardConfig:
    """How :func:`fxstore.train.evaluate.walkforward.make_folds` cuts a symbol's rows into folds.

    Each fold is ``[training part][purge][validation][embargo][test]``, every edge on a
    trading-day boundary; counts are trading days present in the data, not calendar days.
    Every gap holds at least the longest target horizon in bars, so no label of a row used
    for fitting or early stopping looks into a later slice.
    """

    train_days: int = 60
    """Trading days in a training window (training part + purge + validation). Rolling: every
    window has exactly this many; anchored: the first window has at least this many."""

    test_days: int = 20
    """Trading days in each test window; test windows follow each other without a gap."""

    embargo_days: int | None = None
    """Least number of whole trading days in each gap (before the test window and before the
    validation slice). None: as few as hold `max_target_horizon_bars` bars. A gap is widened,
    never narrowed, until it holds that many bars."""

    anchored: bool = False
    """True: every training window starts at the first day and grows (expanding window);
    False: it rolls forward, `train_days` long."""

    min_train_days: int = 1
    """Least number of trading days left in the training part once the validation slice and
    its purge are cut from the end of the window."""

    validation_fraction: float = 0.0
    """Share of the training window's days (rounded, at least one day when > 0) kept at its
    end as a validation slice for early stopping; 0 for none. In [0, 1)."""

    def __post_init__(self) -> None:
        for name in ("train_days", "test_days", "min_train_days"):
            validate_number(name, getattr(self, name), above=0, integral=True)
        if self.embargo_days is not None:
            validate_at_least("embargo_days", self.embargo_days, 0, integral=True)
        validate_bool("anchored", self.anchored)
        if self.min_train_days > self.train_days:
            raise InvalidInputError(
                f"`min_train_days` ({self.min_train_days}) must be <= `train_days` "
                f"({self.train_days}); lower it or raise `train_days`."
            )
        validate_in_range("validation_fraction", self.validation_fraction, 0.0, 1.0, open_high=True)

    @property
    def validation_days(self) -> int:
        """Trading days of the validation slice at the end of a `train_days` window (0: none)."""
        if not self.validation_fraction:
            return 0
        return max(1, round(self.validation_fraction * self.train_days))

    def days_needed(self, gap_days: int = 1) -> int:
        """Fewest trading days the data must hold for one fold.

        A fold is a `train_days` window (training part, purge, validation slice), an
        embargo and a `test_days` test window. `gap_days` is the number of whole days that
        hold the longest target horizon: 1 when a day has at least that many bars (any
        horizon below a day's bars), 0 without targets. The embargo is that, or
        `embargo_days` when it asks for more.
        """
        validate_at_least("gap_days", gap_days, 0, integral=True)
        embargo = max(gap_days, self.embargo_days or 0)
        return self.train_days + embargo + self.test_days

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (for a run's ``config.json``)."""
        return asdict(self)
