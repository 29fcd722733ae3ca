"""Instrument selection: all records, one instrument id, or the front month with rolls.

Front-month rule (causal): for each trading day D, the outright of the requested root with
the highest traded volume on the previous trading day in the data. The first day takes the
nearest unexpired outright. The roll only moves forward to a later delivery month, a tie
keeps the current contract, and because days are CME trading days the switch happens at
the session boundary (17:00 Chicago), never at midnight UTC. Spreads and other roots that
share a prefix are never chosen (see :func:`fxstore.market.contracts.parse_outright`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fxstore.config import InstrumentSelection
from fxstore.errors import NoFrontMonthError
from fxstore.ingest.dbn.reader import Symbology
from fxstore.ingest.select.activity import (
    DailyActivity,
    DaySplitter,
    count_by_instrument,
    take_records,
)
from fxstore.market.calendar import Sessions, sessions
from fxstore.market.contracts import Contract, parse_outright
from fxstore.market.master import contract_expiry

__all__ = [
    "FrontMonthSelector",
    "RollEntry",
    "iter_selected",
    "select_front_month",
    "symbols_listed",
]


@dataclass(frozen=True, slots=True)
class RollEntry:
    """The front month of one trading day."""

    trading_day: dt.date
    #: The contract's raw symbol ("ESH4").
    contract: str
    instrument_id: int
    #: The contract's share of the root's outright volume on the previous trading day
    #: (the volume the choice was made from); None on the first day.
    prior_volume_share: float | None
    #: The contract's share of the root's outright volume on this day (reported, not used).
    volume_share: float
    #: Why this contract: "first-day", "volume", "held" or "expired".
    reason: str

    @property
    def is_roll(self) -> bool:
        """Whether the choice changed to a new contract on this day (set by the schedule)."""
        return self.reason in ("volume", "expired")


def symbols_listed(
    symbology: Symbology, day: dt.date, table: Sessions | None = None
) -> dict[int, str]:
    """instrument_id → raw symbol of every instrument the symbology lists during trading day `day`.

    A mapping counts when its validity overlaps the session (of `table`, default equity-index
    hours: 17:00 Chicago on D-1 to 16:00 on D); where several do, the one that started last
    wins.
    """
    open_ns, close_ns = (table or sessions()).bounds(day)
    listed: dict[int, str] = {}
    for instrument_id in symbology.instrument_ids():
        spans = [
            s
            for s in symbology.spans(instrument_id)
            if s.start_ns < close_ns and open_ns < s.end_ns
        ]
        if spans:
            listed[instrument_id] = max(spans, key=lambda s: s.start_ns).symbol
    return listed


def _outrights(day: dt.date, symbols: Mapping[int, str], root: str) -> dict[Contract, int]:
    """Outrights of `root` among `symbols` (instrument_id → raw symbol): contract → id."""
    found: dict[Contract, int] = {}
    for instrument_id, symbol in symbols.items():
        contract = parse_outright(symbol, root, day)
        if contract is not None:
            found[contract] = instrument_id
    return found


def _share(volume: int, volumes: Mapping[Contract, int]) -> float:
    total = sum(volumes.values())
    return volume / total if total else 0.0


class FrontMonthSelector:
    """Chooses the front month one trading day at a time, from the previous day's volume.

    Call :meth:`start_day` when a trading day begins (it only sees the day's symbology,
    never its records) and :meth:`end_day` with the day's traded volume once it is over.
    The batch schedule (:func:`select_front_month`) and the streaming filter
    (:func:`iter_front_month`) both drive this one class, so they always agree.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.schedule: list[RollEntry] = []
        self._current: Contract | None = None
        self._prior: dict[Contract, int] | None = None  # outright volumes of the last day
        self._day: dt.date | None = None
        self._reason = ""
        self._today: dict[Contract, int] = {}  # outrights listed today → instrument id
        self._ids: dict[Contract, int] = {}  # every outright seen so far → instrument id

    def start_day(self, day: dt.date, symbols: Mapping[int, str]) -> int | None:
        """Begin trading day `day`; return the chosen instrument id, or None (no outright)."""
        self._day = day
        self._today = _outrights(day, symbols, self.root)
        if not self._today:
            return None
        self._current, self._reason = self._choose(day)
        return self._today.get(self._current, self._ids.get(self._current))

    def end_day(self, volume_by_id: Mapping[int, int]) -> None:
        """Close the day begun last with its traded volume per instrument id."""
        if not self._today or self._day is None or self._current is None:
            return
        self._ids.update(self._today)
        today = {c: volume_by_id.get(i, 0) for c, i in self._today.items()}
        prior = self._prior
        self.schedule.append(
            RollEntry(
                trading_day=self._day,
                contract=self._current.symbol,
                instrument_id=self._ids[self._current],
                prior_volume_share=None
                if prior is None
                else _share(prior.get(self._current, 0), prior),
                volume_share=_share(today.get(self._current, 0), today),
                reason=self._reason,
            )
        )
        self._prior = today

    def _choose(self, day: dt.date) -> tuple[Contract, str]:
        """The front month of `day` and why, from yesterday's volume only."""
        root, current, prior = self.root, self._current, self._prior
        live = sorted(c for c in self._today if contract_expiry(root, c) >= day)
        if current is None or prior is None:
            unexpired = [c for c in live if contract_expiry(root, c) > day] or live
            if not unexpired:
                raise NoFrontMonthError(
                    f"No unexpired outright of root {root!r} is listed on {day}; "
                    "check --symbol and the input's dates."
                )
            return unexpired[0], "first-day"
        if contract_expiry(root, current) < day:  # expired without a crossover in the data
            later = [c for c in live if c > current]
            if not later:
                raise NoFrontMonthError(
                    f"The front month {current.symbol} expired before {day} and no later "
                    f"outright of {root!r} is listed that day."
                )
            return later[0], "expired"
        leader = max(prior, key=lambda c: (prior[c], -c.year, -c.month), default=None)
        if leader is not None and leader > current and prior[leader] > prior.get(current, 0):
            return leader, "volume"  # forward only; a tie keeps the current contract
        return current, "held"


def select_front_month(
    activity: DailyActivity, symbols_by_day: Mapping[dt.date, Mapping[int, str]], root: str
) -> list[RollEntry]:
    """Build the front-month schedule, one entry per trading day listing an outright of `root`.

    Parameters
    ----------
    activity
        Records and traded volume per trading day and instrument id.
    symbols_by_day
        For each trading day, instrument_id → raw symbol of every instrument the DBN
        symbology lists that day (with or without records).
    root
        The product root, e.g. "ES" for ES.FUT.

    Returns
    -------
    list of RollEntry
        In trading-day order. Days listing no outright of the root get no entry.

    Raises
    ------
    NoFrontMonthError
        No outright of `root` is listed at all, or the held contract expired and no later
        outright is listed.
    """
    selector = FrontMonthSelector(root)
    for day in activity.days:
        if selector.start_day(day, symbols_by_day.get(day, {})) is not None:
            selector.end_day({i: v for i, (_, v) in activity.on(day).items()})
    if not selector.schedule:
        raise NoFrontMonthError(
            f"No outright of root {root!r} in the input: no symbol is {root} + month code + "
            f"year (e.g. {root}H4); check --symbol."
        )
    return selector.schedule


def iter_selected(
    chunks: Iterable[npt.NDArray[np.void]],
    selection: InstrumentSelection,
    *,
    root: str | None = None,
    symbols_on: Callable[[dt.date], Mapping[int, str]] | None = None,
    selector: FrontMonthSelector | None = None,
    table: Sessions | None = None,
) -> Iterator[tuple[dt.date, npt.NDArray[np.void]]]:
    """Keep the records `selection` asks for, split by trading day, in one streaming pass.

    Parameters
    ----------
    chunks
        MBP-10 record arrays (MBP10_DTYPE) in ts_recv order across the whole input.
    selection
        all, id=N or front-month.
    root, symbols_on, selector
        Front-month only: the product root, the symbology (trading day → instrument_id →
        raw symbol of every instrument listed that day) and optionally the selector whose
        ``schedule`` the caller reads afterwards.
    table
        The product's session table (trading days); default: equity-index hours.

    Yields
    ------
    (trading_day, records)
        Kept records of one trading day, in ts_recv order; a day may come in several pieces.
        In front-month mode the choice for day D uses only the volume of the days before D.
    """
    if selection.mode != "front-month":
        wanted = selection.instrument_id
        splitter = DaySplitter(table)
        for chunk in chunks:
            for day, run in splitter.split(chunk):
                kept = run if wanted is None else take_records(run, run["instrument_id"] == wanted)
                if len(kept):
                    yield day, kept
        return
    if symbols_on is None or (root is None and selector is None):
        raise ValueError("front-month selection needs root and symbols_on")
    selector = selector or FrontMonthSelector(root or "")
    yield from _iter_front_month(chunks, selector, symbols_on, table)


def _iter_front_month(
    chunks: Iterable[npt.NDArray[np.void]],
    selector: FrontMonthSelector,
    symbols_on: Callable[[dt.date], Mapping[int, str]],
    table: Sessions | None,
) -> Iterator[tuple[dt.date, npt.NDArray[np.void]]]:
    current_day: dt.date | None = None
    chosen: int | None = None
    volume: dict[int, int] = {}
    splitter = DaySplitter(table)
    for chunk in chunks:
        for day, run in splitter.split(chunk):
            if day != current_day:
                if current_day is not None:
                    selector.end_day(volume)
                current_day, volume = day, {}
                chosen = selector.start_day(day, symbols_on(day))
            for key, (_, traded) in count_by_instrument(run).items():
                volume[key] = volume.get(key, 0) + traded
            if chosen is not None:
                kept = take_records(run, run["instrument_id"] == chosen)
                if len(kept):
                    yield day, kept
    if current_day is not None:
        selector.end_day(volume)
