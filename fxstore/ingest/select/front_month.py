"""Instrument selection: all records, one instrument id, or the front month with rolls.

Front-month rule (causal), by default (``--roll volume``): for each trading day D, the
outright of the requested root with the highest traded volume on the previous trading day in
the data. The first day takes the nearest unexpired outright. The roll only moves forward to
a later delivery month, a tie keeps the current contract, and because days are CME trading
days the switch happens at the session boundary (17:00 Chicago), never at midnight UTC.
Spreads and other roots that share a prefix are never chosen (see
:func:`fxstore.market.contracts.parse_outright`).

The other rules (:class:`~fxstore.config.RollConfig`) keep those properties:
``open-interest`` ranks by the open interest published before D's session opens,
``calendar`` rolls a fixed number of trading days before each contract's last trading day
or first notice day (:mod:`fxstore.ingest.select.roll_rules`), and ``months`` restricts any
rule to a root's liquid months. Each day's entry says why its contract was chosen.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from fxstore.config import InstrumentSelection, RollConfig
from fxstore.errors import NoFrontMonthError
from fxstore.ingest.dbn.reader import Symbology
from fxstore.ingest.select.activity import (
    DailyActivity,
    DaySplitter,
    count_by_instrument,
    take_records,
)
from fxstore.ingest.select.roll_rules import OpenInterest, calendar_anchor
from fxstore.market.calendar import Sessions, sessions
from fxstore.market.contracts import Contract, parse_outright
from fxstore.market.master import InstrumentMaster, contract_expiry

#: The reasons of a day whose contract differs from the day before's.
ROLL_REASONS = ("volume", "open-interest", "calendar", "databento", "expired")

__all__ = [
    "ROLL_REASONS",
    "ContinuousMap",
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
    #: Why this contract: "first-day", "held", "expired", or the rule that rolled to it
    #: ("volume", "open-interest", "calendar").
    reason: str
    #: Open-interest rule: the contract's open interest as published before the session
    #: opened (None when none was, and under the other rules).
    prior_open_interest: int | None = None
    #: Calendar rule: the trading day this contract stops being the front month (its
    #: anchor less the offset), and what the anchor is ("last trading day 2024-03-15").
    roll_day: dt.date | None = None
    anchor: str | None = None

    @property
    def is_roll(self) -> bool:
        """Whether the choice changed to a new contract on this day (set by the schedule)."""
        return self.reason in ROLL_REASONS

    def to_json(self) -> dict[str, object]:
        """The entry as the manifest's roll schedule records it (the rule's facts only
        where the rule has them, so volume-rule schedules read as they always did)."""
        out: dict[str, object] = {
            "trading_day": self.trading_day.isoformat(),
            "contract": self.contract,
            "instrument_id": self.instrument_id,
            "prior_volume_share": self.prior_volume_share,
            "volume_share": self.volume_share,
            "reason": self.reason,
        }
        if self.prior_open_interest is not None:
            out["prior_open_interest"] = self.prior_open_interest
        if self.roll_day is not None:
            out["roll_day"] = self.roll_day.isoformat()
        if self.anchor is not None:
            out["anchor"] = self.anchor
        return out


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


class _Facts(NamedTuple):
    """What a rule other than volume decided from (see :class:`RollEntry`)."""

    prior_open_interest: int | None = None
    roll_day: dt.date | None = None
    anchor: str | None = None


def _share(volume: int, volumes: Mapping[Contract, int]) -> float:
    total = sum(volumes.values())
    return volume / total if total else 0.0


class ContinuousMap(Protocol):
    """A continuous symbol's contract per UTC date (Databento's symbology:
    :class:`fxstore.ingest.select.continuous.DatabentoMapping`)."""

    @property
    def symbol(self) -> str: ...

    @property
    def stype_out(self) -> str: ...

    def on(self, day: dt.date) -> str | None: ...


class FrontMonthSelector:
    """Chooses the front month one trading day at a time, by the roll rule of `roll`.

    Call :meth:`start_day` when a trading day begins (it only sees the day's symbology,
    never its records) and :meth:`end_day` with the day's traded volume once it is over.
    The batch schedule (:func:`select_front_month`) and the streaming filter
    (:func:`iter_front_month`) both drive this one class, so they always agree.

    With ``roll.depth`` above 1 the rule still chooses the front month, but the day's
    contract (what :meth:`start_day` returns and the schedule records, the reason being the
    front month's) is the live contract ``depth - 1`` places after it: the second or third
    contract of the curve, rolling when the front month rolls.

    Parameters
    ----------
    root
        The product root ("ES").
    roll
        The rule (default: previous-day volume over every listed month).
    master, table, open_interest, continuous
        The calendar rule's contract facts and session table; the open-interest rule's
        published values; the Databento rule's mapping (required by those rules).
    """

    def __init__(
        self,
        root: str,
        roll: RollConfig | None = None,
        *,
        master: InstrumentMaster | None = None,
        table: Sessions | None = None,
        open_interest: OpenInterest | None = None,
        continuous: ContinuousMap | None = None,
    ) -> None:
        self.root = root
        self.roll = roll if roll is not None else RollConfig()
        if self.roll.rule == "open-interest" and open_interest is None:
            raise ValueError("the open-interest rule needs open_interest")
        if self.roll.rule == "databento" and continuous is None:
            raise ValueError("the databento rule needs continuous")
        self._continuous = continuous
        self._master = master if master is not None else InstrumentMaster()
        self._table = table if table is not None else sessions()
        self._open_interest = open_interest
        self._facts = _Facts()  # the day's rule facts for its entry
        self.schedule: list[RollEntry] = []
        self._current: Contract | None = None  # the front month
        self._held: Contract | None = None  # the contract at the series' depth
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
        self._held = self._at_depth(day, self._current)
        return self._today.get(self._held, self._ids.get(self._held))

    def _at_depth(self, day: dt.date, front: Contract) -> Contract:
        """The contract the series holds: `front` at depth 1, else the live contract
        ``depth - 1`` places after it (of the series' months), so it rolls with the front."""
        depth = self.roll.depth
        if depth == 1:
            return front
        later = sorted(c for c in self._today if self._allowed(c) and c > front)
        if len(later) < depth - 1:
            listed = ", ".join(c.symbol for c in later) or "none"
            raise NoFrontMonthError(
                f"--depth {depth}: {day} lists {len(later)} outright(s) of {self.root!r} after "
                f"the front month {front.symbol} ({listed}), and depth {depth} needs "
                f"{depth - 1}; lower --depth or add the later contracts' records to the input."
            )
        return later[depth - 2]

    def end_day(self, volume_by_id: Mapping[int, int]) -> None:
        """Close the day begun last with its traded volume per instrument id."""
        if not self._today or self._day is None or self._held is None:
            return
        self._ids.update(self._today)
        today = {c: volume_by_id.get(i, 0) for c, i in self._today.items()}
        prior, held = self._prior, self._held
        self.schedule.append(
            RollEntry(
                trading_day=self._day,
                contract=held.symbol,
                instrument_id=self._ids[held],
                prior_volume_share=None if prior is None else _share(prior.get(held, 0), prior),
                volume_share=_share(today.get(held, 0), today),
                reason=self._reason,
                prior_open_interest=self._facts.prior_open_interest,
                roll_day=self._facts.roll_day,
                anchor=self._facts.anchor,
            )
        )
        self._prior = today

    def _allowed(self, contract: Contract) -> bool:
        months = self.roll.months
        return months is None or contract.month_code in months

    def _choose(self, day: dt.date) -> tuple[Contract, str]:
        """The front month of `day` and why, from what was known before its session."""
        self._facts = _Facts()
        rule = self.roll.rule
        if rule == "calendar":
            return self._choose_by_calendar(day)
        if rule == "databento":
            return self._choose_by_databento(day)
        live = sorted(
            c for c in self._today if self._allowed(c) and contract_expiry(self.root, c) >= day
        )
        if rule == "open-interest":
            return self._choose_by_open_interest(day, live)
        return self._choose_by_volume(day, live)

    def _first_day(self, day: dt.date, live: list[Contract]) -> Contract:
        unexpired = [c for c in live if contract_expiry(self.root, c) > day] or live
        if not unexpired:
            months = "" if self.roll.months is None else f" in months {self.roll.months}"
            raise NoFrontMonthError(
                f"No unexpired outright of root {self.root!r}{months} is listed on {day}; "
                "check --symbol, --roll-months and the input's dates."
            )
        return unexpired[0]

    def _expired(self, day: dt.date, current: Contract, live: list[Contract]) -> Contract:
        later = [c for c in live if c > current]
        if not later:
            raise NoFrontMonthError(
                f"The front month {current.symbol} expired before {day} and no later "
                f"outright of {self.root!r} is listed that day."
            )
        return later[0]

    def _choose_by_volume(self, day: dt.date, live: list[Contract]) -> tuple[Contract, str]:
        """Yesterday's volume leader, forward only."""
        root, current, prior = self.root, self._current, self._prior
        if self.roll.months is not None and prior is not None:
            prior = {c: v for c, v in prior.items() if self._allowed(c)}
        if current is None or prior is None:
            return self._first_day(day, live), "first-day"
        if contract_expiry(root, current) < day:  # expired without a crossover in the data
            return self._expired(day, current, live), "expired"
        leader = max(prior, key=lambda c: (prior[c], -c.year, -c.month), default=None)
        if leader is not None and leader > current and prior[leader] > prior.get(current, 0):
            return leader, "volume"  # forward only; a tie keeps the current contract
        return current, "held"

    def _choose_by_open_interest(self, day: dt.date, live: list[Contract]) -> tuple[Contract, str]:
        """The open-interest leader as published before the session opens, forward only."""
        assert self._open_interest is not None
        open_ns, _ = self._table.bounds(day)
        published = self._open_interest.as_of(open_ns)
        oi = {c: published[self._today[c]] for c in live if self._today[c] in published}
        current = self._current
        if current is None:
            unexpired = [c for c in oi if contract_expiry(self.root, c) > day]
            if unexpired:  # open interest is known before the first session: use it
                chosen = max(unexpired, key=lambda c: (oi[c], -c.year, -c.month))
            else:
                chosen = self._first_day(day, live)
            reason = "first-day"
        elif contract_expiry(self.root, current) < day:
            chosen, reason = self._expired(day, current, live), "expired"
        else:
            leader = max(oi, key=lambda c: (oi[c], -c.year, -c.month), default=None)
            if leader is not None and leader > current and oi[leader] > oi.get(current, 0):
                chosen, reason = leader, "open-interest"
            else:
                chosen, reason = current, "held"
        self._facts = _Facts(prior_open_interest=oi.get(chosen))
        return chosen, reason

    def _choose_by_calendar(self, day: dt.date) -> tuple[Contract, str]:
        """The nearest contract whose calendar roll day is after `day`, forward only."""
        current = self._current
        for contract in sorted(c for c in self._today if self._allowed(c)):
            if current is not None and contract < current:
                continue
            anchor = calendar_anchor(self._master, self.root, contract, day)
            if self.roll.offset_unit == "calendar":  # the first session on or after it
                roll_day = anchor.day - dt.timedelta(days=self.roll.offset)
            else:
                roll_day = self._table.day_before(anchor.day, self.roll.offset)
            if roll_day > day:
                self._facts = _Facts(
                    roll_day=roll_day, anchor=f"{anchor.kind} {anchor.day.isoformat()}"
                )
                if current is None:
                    return contract, "first-day"
                return contract, "held" if contract == current else "calendar"
        months = "" if self.roll.months is None else f" in months {self.roll.months}"
        raise NoFrontMonthError(
            f"No outright of root {self.root!r}{months} listed on {day} rolls after it with "
            f"--roll calendar --roll-offset {self.roll.offset} ({self.roll.offset_unit} days); "
            "check --roll-offset and the "
            "input's dates."
        )

    def _choose_by_databento(self, day: dt.date) -> tuple[Contract, str]:
        """The contract Databento maps the continuous symbol to on UTC date `day` (the
        trading day's hours after 00:00 UTC: all but its first evening)."""
        mapping = self._continuous
        assert mapping is not None
        mapped = mapping.on(day)
        by_id = mapping.stype_out == "instrument_id"
        found = [c for c, i in self._today.items() if (str(i) if by_id else c.symbol) == mapped]
        if not found:
            listed = ", ".join(sorted(c.symbol for c in self._today))
            raise NoFrontMonthError(
                f"--roll databento: {mapping.symbol} maps {day} to {mapped or 'nothing'}, which "
                f"is not an outright of {self.root!r} listed that day in the input ({listed}); "
                "pass the symbology.resolve answer of the input's dates and dataset."
            )
        chosen, current = found[0], self._current
        if current is None:
            return chosen, "first-day"
        return chosen, "held" if chosen == current else "databento"


def select_front_month(
    activity: DailyActivity,
    symbols_by_day: Mapping[dt.date, Mapping[int, str]],
    root: str,
    selector: FrontMonthSelector | None = None,
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
    selector
        A selector of another roll rule (default: previous-day volume for `root`).

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
    selector = selector if selector is not None else FrontMonthSelector(root)
    for day in activity.days:
        if selector.start_day(day, symbols_by_day.get(day, {})) is not None:
            selector.end_day({i: v for i, (_, v) in activity.on(day).items()})
    if not selector.schedule:
        days = activity.days
        if days and not any(symbols_by_day.get(day) for day in days):
            shown = ", ".join(d.isoformat() for d in days[:3]) + (" …" if len(days) > 3 else "")
            raise NoFrontMonthError(
                f"No instrument of the input is listed on the trading days its records fall "
                f"on ({shown}): the records lie outside the symbology's dates (data of a "
                "weekend or holiday, when no session trades, or files of other dates); check "
                "the files' dates."
            )
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
