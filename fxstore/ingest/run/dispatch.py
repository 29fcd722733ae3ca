"""The order a pool gets its groups in, and their results back in trading-day order.

A pool run ends when its last group does. Sent in trading-day order, a big group (a roll
week, a busy day) that starts late keeps one worker going while the others sit idle. So the
last rounds of groups go out largest first (by input bytes, a proxy for records), and the
smallest groups fill the gaps at the end. The groups before them keep trading-day order, so
the parent can write days, save progress and advance the front-month selector as they come;
the results of the reordered tail are held back (a few descriptions, not bars) and handed
on in trading-day order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final, TypeVar

__all__ = ["dispatch_order", "in_order"]

T = TypeVar("T")

#: Rounds of groups (workers each) at the end of a run that go out largest first.
TAIL_ROUNDS: Final = 2


def dispatch_order(sizes: Sequence[int], workers: int) -> list[int]:
    """Positions of the groups in the order a pool of `workers` gets them.

    `sizes` are the groups' input bytes in trading-day order. All but the last
    ``TAIL_ROUNDS * workers`` groups keep their order; those go out largest first (ties in
    trading-day order).
    """
    n = len(sizes)
    head = max(0, n - TAIL_ROUNDS * max(1, workers))
    tail = sorted(range(head, n), key=lambda i: (-sizes[i], i))
    return [*range(head), *tail]


def in_order(results: Iterator[T], order: Sequence[int]) -> Iterator[T]:
    """The results of groups sent in `order` (``results`` yields them in that order), in
    position order.

    A group that failed raises when its turn comes, so the error a run reports is the one
    of the earliest failing group, as when the groups run in trading-day order; results of
    later groups that were already back are dropped with it.
    """
    done: dict[int, T] = {}
    failed: dict[int, Exception] = {}
    due = 0
    for position in order:
        try:
            done[position] = next(results)
        except StopIteration:
            if failed:  # an iterator that stops at its first error
                raise failed[min(failed)] from None
            raise RuntimeError("the pool returned fewer results than groups sent") from None
        except Exception as err:  # raised below, when the group's turn comes
            failed[position] = err
        while due in done or due in failed:
            if due in failed:
                raise failed[due]
            yield done.pop(due)
            due += 1
