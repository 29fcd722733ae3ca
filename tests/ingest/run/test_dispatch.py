from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fxstore.ingest.run.dispatch import TAIL_ROUNDS, dispatch_order, in_order

pytestmark = pytest.mark.quick


def test_the_head_keeps_its_order_and_the_tail_goes_largest_first() -> None:
    sizes = [5, 1, 9, 2, 7, 3, 8, 4, 6, 10]
    order = dispatch_order(sizes, workers=2)
    head = len(sizes) - TAIL_ROUNDS * 2
    assert order[:head] == list(range(head))
    assert [sizes[i] for i in order[head:]] == sorted(sizes[head:], reverse=True)


def test_ties_keep_trading_day_order_and_few_groups_are_all_tail() -> None:
    assert dispatch_order([3, 3, 1, 3], workers=8) == [0, 1, 3, 2]
    assert dispatch_order([], workers=4) == []


def _pool_like(values: list[str], order: list[int], bad: set[int]) -> Iterator[str]:
    """Like Pool.imap's iterator: a failed item raises, and the next call goes on."""

    class Results:
        def __init__(self) -> None:
            self.k = 0

        def __iter__(self) -> Results:
            return self

        def __next__(self) -> str:
            if self.k == len(order):
                raise StopIteration
            i = order[self.k]
            self.k += 1
            if i in bad:
                raise ValueError(f"group {i}")
            return values[i]

    return Results()


@given(st.lists(st.integers(0, 100), max_size=40), st.integers(1, 16))
def test_results_come_back_in_trading_day_order(sizes: list[int], workers: int) -> None:
    order = dispatch_order(sizes, workers)
    assert sorted(order) == list(range(len(sizes)))
    values = [f"day{i}" for i in range(len(sizes))]
    assert list(in_order(_pool_like(values, order, set()), order)) == values


def test_the_earliest_failing_group_raises_after_the_groups_before_it() -> None:
    sizes = [1, 1, 1, 1, 2, 9, 5, 7]  # tail (workers=2): 5, 7, 6, 4 by size
    order = dispatch_order(sizes, workers=2)
    assert order == [0, 1, 2, 3, 5, 7, 6, 4]
    values = [f"day{i}" for i in range(len(sizes))]
    got: list[str] = []
    with pytest.raises(ValueError, match="group 4"):
        for value in in_order(_pool_like(values, order, {4, 7}), order):
            got.append(value)
    assert got == values[:4]  # group 7 failed first in time, but group 4 comes first


def test_a_pool_that_returns_too_few_results_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="fewer results"):
        list(in_order(iter(["a"]), [0, 1]))


def test_an_iterator_that_stops_at_its_first_error_still_raises_that_error() -> None:
    def sent() -> Iterator[str]:
        yield "day0"
        raise ValueError("group 2")

    with pytest.raises(ValueError, match="group 2"):
        list(in_order(sent(), [0, 2, 1]))
