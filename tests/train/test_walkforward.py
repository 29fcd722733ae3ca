"""train.evaluate.walkforward: fold layout by hand, embargo, validation, errors, properties."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fxstore.config import WalkForwardConfig
from fxstore.errors import InvalidInputError, SchemaError
from fxstore.train.evaluate.walkforward import Fold, make_folds

pytestmark = pytest.mark.quick

DAY0 = 19_700  # days since 1970-01-01 of the first trading day


def days_of(rows_per_day: list[int]) -> npt.NDArray[np.int32]:
    """`trading_day` of rows: day DAY0 + i repeated rows_per_day[i] times."""
    return np.repeat(np.arange(DAY0, DAY0 + len(rows_per_day), dtype=np.int32), rows_per_day)


def test_make_folds_rolling_even_days_matches_hand_layout() -> None:
    # 30 days x 10 rows; horizon 4 bars -> the 1-day gap (10 rows) is the least that holds it.
    # Fold 0: window days [0, 10) = rows [0, 100), gap day 10, test days [11, 16) = rows
    # [110, 160); then the test moves 5 days and the 10-day window with it; day 26 + 5 > 30.
    cfg = WalkForwardConfig(train_days=10, test_days=5)

    folds = make_folds(days_of([10] * 30), cfg, max_target_horizon_bars=4)

    assert [f.train for f in folds] == [(0, 100), (50, 150), (100, 200)]
    assert [f.test for f in folds] == [(110, 160), (160, 210), (210, 260)]
    assert [f.validation for f in folds] == [(100, 100), (150, 150), (200, 200)]
    assert folds[0].train_span == (DAY0, DAY0 + 9)
    assert folds[0].test_span == (DAY0 + 11, DAY0 + 15)
    assert folds[0].validation_span is None
    assert [f.embargo_rows for f in folds] == [10, 10, 10]


def test_make_folds_anchored_windows_start_at_first_row_and_grow() -> None:
    cfg = WalkForwardConfig(train_days=10, test_days=5, anchored=True)

    folds = make_folds(days_of([10] * 30), cfg, max_target_horizon_bars=4)

    # same test windows as rolling; training always from row 0 to the gap
    assert [f.train for f in folds] == [(0, 100), (0, 150), (0, 200)]
    assert [f.test for f in folds] == [(110, 160), (160, 210), (210, 260)]


def test_make_folds_horizon_longer_than_a_day_widens_gap_to_two_days() -> None:
    # 15 bars do not fit in one 10-row day: the gap is 2 days (20 rows)
    cfg = WalkForwardConfig(train_days=10, test_days=5)

    folds = make_folds(days_of([10] * 30), cfg, max_target_horizon_bars=15)

    assert folds[0].train == (0, 100)
    assert folds[0].test == (120, 170)
    assert all(f.embargo_rows == 20 for f in folds)


def test_make_folds_explicit_embargo_days_keeps_at_least_that_many_days() -> None:
    cfg = WalkForwardConfig(train_days=10, test_days=5, embargo_days=3)

    folds = make_folds(days_of([10] * 30), cfg, max_target_horizon_bars=1)

    assert folds[0].train == (0, 100)
    assert folds[0].test == (130, 180)


def test_make_folds_uneven_days_gap_covers_horizon_in_rows() -> None:
    # rows per day: 5 x 4 rows, then 1, 1, 1, 4, 4 ...; horizon 3 before day 8 (first test
    # start after a 5-day window): days 7, 6, 5 hold 1 + 1 + 1 = 3 rows -> gap 3 days
    rows = [4, 4, 4, 4, 4, 1, 1, 1, 4, 4, 4]
    cfg = WalkForwardConfig(train_days=5, test_days=1)

    folds = make_folds(days_of(rows), cfg, max_target_horizon_bars=3)

    assert folds[0].train == (0, 20)  # days 0-4
    assert folds[0].test == (23, 27)  # day 8
    assert folds[0].embargo_rows == 3


def test_make_folds_validation_slice_is_purged_from_both_sides() -> None:
    # window 10 days, validation round(0.2 * 10) = 2 days, horizon 15 -> 2-day purge and
    # 2-day embargo: train days [0, 6), purge [6, 8), validation [8, 10), embargo [10, 12)
    cfg = WalkForwardConfig(train_days=10, test_days=5, validation_fraction=0.2)

    fold = make_folds(days_of([10] * 30), cfg, max_target_horizon_bars=15)[0]

    assert fold.train == (0, 60)
    assert fold.validation == (80, 100)
    assert fold.test == (120, 170)
    assert fold.validation_span == (DAY0 + 8, DAY0 + 9)
    assert (fold.purge_rows, fold.embargo_rows) == (20, 20)


def test_make_folds_zero_horizon_no_embargo_days_has_no_gap() -> None:
    cfg = WalkForwardConfig(train_days=2, test_days=1)

    folds = make_folds(days_of([3] * 4), cfg, max_target_horizon_bars=0)

    assert [(f.train, f.test) for f in folds] == [((0, 6), (6, 9)), ((3, 9), (9, 12))]


def test_fold_to_json_lists_ranges_and_spans() -> None:
    fold = make_folds(
        days_of([2] * 3), WalkForwardConfig(train_days=1, test_days=1), max_target_horizon_bars=2
    )[0]

    assert fold.to_json() == {
        "index": 0,
        "train": [0, 2],
        "validation": [2, 2],
        "test": [4, 6],
        "train_span": [DAY0, DAY0],
        "validation_span": None,
        "test_span": [DAY0 + 2, DAY0 + 2],
    }


def test_make_folds_too_few_days_raises_with_days_needed() -> None:
    cfg = WalkForwardConfig(train_days=10, test_days=5, validation_fraction=0.2)

    with pytest.raises(InvalidInputError) as err:
        make_folds(days_of([10] * 5), cfg, max_target_horizon_bars=4)

    assert str(err.value) == (
        "only 5 trading days (50 rows), but one walk-forward fold needs at least 16 "
        "(train 10: training part, purge and a 2-day validation slice; + embargo 1, holding "
        "the 4-bar target horizon; + test 5); use 11 more trading days (a longer ingest, or "
        "`fxstore demo` with its default --start/--end) or lower train_days and test_days "
        "(--train-days, --test-days)."
    )


def test_make_folds_exactly_days_needed_gives_one_fold() -> None:
    cfg = WalkForwardConfig(train_days=10, test_days=5, validation_fraction=0.2)

    folds = make_folds(days_of([10] * cfg.days_needed()), cfg, max_target_horizon_bars=4)

    assert len(folds) == 1


def test_make_folds_one_day_fewer_than_days_needed_raises() -> None:
    cfg = WalkForwardConfig(train_days=10, test_days=5, embargo_days=3)

    with pytest.raises(InvalidInputError, match=r"needs at least 18 \(train 10; \+ embargo 3,"):
        make_folds(days_of([10] * (cfg.days_needed() - 1)), cfg, max_target_horizon_bars=4)


def test_make_folds_horizon_longer_than_data_raises() -> None:
    cfg = WalkForwardConfig(train_days=1, test_days=1)

    with pytest.raises(InvalidInputError, match="fewer than the 100-bar embargo"):
        make_folds(days_of([10] * 5), cfg, max_target_horizon_bars=100)


def test_make_folds_validation_leaves_too_little_training_raises() -> None:
    cfg = WalkForwardConfig(train_days=10, test_days=5, min_train_days=9, validation_fraction=0.2)

    with pytest.raises(InvalidInputError, match=r"leaves 7 days for training.*min_train_days=9"):
        make_folds(days_of([10] * 30), cfg, max_target_horizon_bars=4)


def test_make_folds_later_fold_purge_eats_training_raises() -> None:
    # a 1-row day (day 8) right before a validation day needs a 2-day purge in fold 6:
    # window days [6, 10), validation day 9, purge days 7-8 -> 1 training day < 2
    cfg = WalkForwardConfig(train_days=4, test_days=1, min_train_days=2, validation_fraction=0.25)

    with pytest.raises(InvalidInputError, match=r"fold 7 .* does not fit"):
        make_folds(days_of([10] * 8 + [1] + [10] * 10), cfg, max_target_horizon_bars=5)


@pytest.mark.parametrize("horizon", [-1, 2.0, True])
def test_make_folds_bad_horizon_raises(horizon: int) -> None:
    with pytest.raises(InvalidInputError, match="`max_target_horizon_bars` must be an int >= 0"):
        make_folds(
            days_of([1] * 9),
            WalkForwardConfig(train_days=2, test_days=1),
            max_target_horizon_bars=horizon,
        )


@pytest.mark.parametrize(
    ("trading_day", "error", "match"),
    [
        (np.array([3, 2, 2], dtype=np.int32), SchemaError, "row 1 has 2 after 3"),
        (np.zeros((2, 2), dtype=np.int32), SchemaError, "1-D integer array"),
        (np.array([1.0, 2.0]), SchemaError, "1-D integer array"),
        (np.array([], dtype=np.int32), InvalidInputError, "is empty"),
    ],
)
def test_make_folds_bad_trading_day_raises(
    trading_day: npt.NDArray[np.int32], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        make_folds(trading_day, WalkForwardConfig(), max_target_horizon_bars=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"train_days": 0}, "`train_days` must be > 0, was 0"),
        ({"test_days": 1.5}, "`test_days` must be a whole number"),
        ({"embargo_days": -1}, "`embargo_days` must be >= 0, was -1"),
        ({"validation_fraction": 1.0}, r"`validation_fraction` must be in \[0, 1\)"),
        ({"train_days": 3, "min_train_days": 4}, "`min_train_days` \\(4\\) must be <="),
        ({"anchored": "yes"}, "`anchored` must be True or False"),
    ],
)
def test_walkforward_config_invalid_field_raises(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        WalkForwardConfig(**kwargs)  # type: ignore[arg-type]


def _day_edges(trading_day: npt.NDArray[np.int32]) -> set[int]:
    """Rows where a new trading day starts, plus 0 and n."""
    return {0, len(trading_day), *(np.flatnonzero(np.diff(trading_day)) + 1).tolist()}


def _check_fold(fold: Fold, day: npt.NDArray[np.int32], cfg: WalkForwardConfig, h: int) -> None:
    """Ordering, day-boundary edges and purge/embargo of one fold."""
    (tr0, tr1), (va0, va1), (te0, te1) = fold.train, fold.validation, fold.test
    assert 0 <= tr0 < tr1 <= va0 <= va1 <= te0 < te1 <= len(day)
    assert {tr0, tr1, va0, va1, te0, te1} <= _day_edges(day)
    # no label of a fitted or early-stopping row reaches the next slice
    assert tr1 - 1 + h < (va0 if va1 > va0 else te0)
    assert max(tr1, va1) - 1 + h < te0
    assert fold.embargo_rows >= h
    n_gap_days = len(np.unique(day[max(tr1, va1) : te0]))
    assert n_gap_days >= (cfg.embargo_days or 0)
    window_days = len(np.unique(day[tr0 : max(tr1, va1)]))
    if cfg.anchored:
        assert tr0 == 0 and window_days >= cfg.train_days
    else:
        assert window_days == cfg.train_days
    assert len(np.unique(day[te0:te1])) == cfg.test_days


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.integers(1, 12), min_size=30, max_size=80),
    horizon=st.integers(0, 15),
    train_days=st.integers(1, 12),
    test_days=st.integers(1, 6),
    embargo_days=st.none() | st.integers(0, 3),
    anchored=st.booleans(),
    validation_fraction=st.sampled_from([0.0, 0.2, 0.5]),
)
def test_make_folds_any_input_folds_disjoint_ordered_and_embargoed(
    rows: list[int],
    horizon: int,
    train_days: int,
    test_days: int,
    embargo_days: int | None,
    anchored: bool,
    validation_fraction: float,
) -> None:
    day = days_of(rows)
    cfg = WalkForwardConfig(
        train_days=train_days,
        test_days=test_days,
        embargo_days=embargo_days,
        anchored=anchored,
        validation_fraction=validation_fraction,
    )
    try:
        folds = make_folds(day, cfg, max_target_horizon_bars=horizon)
    except InvalidInputError:
        return  # too short for one fold: the error is tested above

    assert [f.index for f in folds] == list(range(len(folds)))
    for fold in folds:
        _check_fold(fold, day, cfg, horizon)
    for before, after in itertools.pairwise(folds):
        assert before.test[1] == after.test[0]  # in order, disjoint, contiguous
    assert len(np.unique(day[folds[-1].test[1] :])) < test_days  # no full window left out
