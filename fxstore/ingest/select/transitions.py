"""Roll transitions of a continuous series, and the adjusted prices derived from them.

A *transition* is a trading day whose front month differs from the day before's. Its prices
are the two contracts' last trades on the trading day before the switch (the latest day
before it on which each traded): what was known when the session that switches opened, so an
adjustment never looks past the roll it adjusts for. Its gaps are ``to_px - from_px``
(additive) and ``to_px / from_px`` (multiplicative).

Adjusted prices are a pure function of the raw bars and the transitions table
(:func:`adjust_prices`): the day files keep raw prices only, and a new roll at the end of a
series re-adjusts backward-adjusted history without touching a day file. With *segment* k of
a bar the number of transitions on or before its trading day (k = 0 for the first
contract, n for the last):

=========================  ===========================================  =====================
method, direction          adjusted price                               unchanged contract
=========================  ===========================================  =====================
difference, backward       ``px + sum(gap_add[j] for j >= k)``          the latest
difference, forward        ``px - sum(gap_add[j] for j < k)``           the first
ratio, backward            ``px * prod(gap_mul[j] for j >= k)``         the latest
ratio, forward             ``px / prod(gap_mul[j] for j < k)``          the first
=========================  ===========================================  =====================

So the difference-adjusted old contract's last trade equals the new contract's price at the
switch (gap 0), and ratio-adjusted returns equal raw returns within a contract.
"""

from __future__ import annotations

import datetime as dt
import itertools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fxstore.config import RollConfig
from fxstore.errors import FxStoreWarning, InvalidInputError
from fxstore.ingest.select.front_month import RollEntry
from fxstore.market.calendar import Sessions, sessions

__all__ = [
    "ADJUSTED_COLUMNS",
    "Transition",
    "adjust_prices",
    "adjusted_column",
    "build_transitions",
    "roll_of_manifest",
    "schedule_from_manifest",
    "transitions_from_manifest",
    "with_adjusted_prices",
]

#: Raw price columns and the adjusted columns added next to them.
ADJUSTED_COLUMNS: Final = {
    "open": "adj_open",
    "high": "adj_high",
    "low": "adj_low",
    "close": "adj_close",
    "vwap": "adj_vwap",
}


@dataclass(frozen=True, slots=True)
class Transition:
    """One roll of a continuous series: the first trading day of the new contract."""

    trading_day: dt.date
    #: When the new contract became the front: the session open of `trading_day` (17:00
    #: Chicago on the evening before), int64 ns UTC (nautilus_trader's transition_time_ns).
    switch_ns: int
    from_contract: str
    from_instrument_id: int
    to_contract: str
    to_instrument_id: int
    #: The roll rule of the series ("volume", "open-interest", "calendar").
    rule: str
    #: Why the schedule switched that day ("volume", "open-interest", "calendar", "expired").
    reason: str
    #: The trading day whose last trades priced the roll (the day before, unless a
    #: contract did not trade then); None without prices.
    price_day: dt.date | None
    #: Last trade of each contract, index points, as known at the switch; None when the
    #: series was built without --adjust or a contract never traded before the switch.
    from_px: float | None
    to_px: float | None

    @property
    def gap_add(self) -> float | None:
        """``to_px - from_px``: what backward difference adjustment adds to older prices."""
        if self.from_px is None or self.to_px is None:
            return None
        return self.to_px - self.from_px

    @property
    def gap_mul(self) -> float | None:
        """``to_px / from_px``: what backward ratio adjustment multiplies older prices by."""
        if self.from_px is None or self.to_px is None or self.from_px == 0.0:
            return None
        return self.to_px / self.from_px

    def to_json(self) -> dict[str, object]:
        """One row of the manifest's ``transitions`` (and of ``fxstore rolls --json``)."""
        return {
            "trading_day": self.trading_day.isoformat(),
            "switch_ns": self.switch_ns,
            "from_contract": self.from_contract,
            "from_instrument_id": self.from_instrument_id,
            "to_contract": self.to_contract,
            "to_instrument_id": self.to_instrument_id,
            "rule": self.rule,
            "reason": self.reason,
            "price_day": None if self.price_day is None else self.price_day.isoformat(),
            "from_px": self.from_px,
            "to_px": self.to_px,
            "gap_add": self.gap_add,
            "gap_mul": self.gap_mul,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Transition:
        """A row as :meth:`to_json` wrote it."""
        price_day = row.get("price_day")
        return cls(
            trading_day=dt.date.fromisoformat(str(row["trading_day"])),
            switch_ns=int(row["switch_ns"]),
            from_contract=str(row["from_contract"]),
            from_instrument_id=int(row["from_instrument_id"]),
            to_contract=str(row["to_contract"]),
            to_instrument_id=int(row["to_instrument_id"]),
            rule=str(row["rule"]),
            reason=str(row["reason"]),
            price_day=None if price_day is None else dt.date.fromisoformat(str(price_day)),
            from_px=None if row.get("from_px") is None else float(row["from_px"]),
            to_px=None if row.get("to_px") is None else float(row["to_px"]),
        )


def _last_px(
    days: Sequence[dt.date],
    last_trades: Mapping[dt.date, Mapping[int, float]],
    before: dt.date,
    instrument_id: int,
) -> tuple[dt.date | None, float | None]:
    """The latest last trade of `instrument_id` on a day before `before`."""
    for day in reversed(days):
        if day < before and instrument_id in last_trades.get(day, {}):
            return day, last_trades[day][instrument_id]
    return None, None


def build_transitions(
    schedule: Sequence[RollEntry],
    roll: RollConfig,
    table: Sessions,
    last_trades: Mapping[dt.date, Mapping[int, float]] | None = None,
) -> list[Transition]:
    """The transitions of a roll schedule (one per change of contract), switching at the
    session opens of `table`, priced when `last_trades` (trading day → instrument_id → last
    trade price that day) is given.

    A contract without a trade before the switch leaves the roll unpriced: a FxStoreWarning
    says so, and adjustment treats that roll's gap as 0 (difference) or 1 (ratio). Under
    ``--adjust ratio`` a roll priced at or below 0 raises (:func:`check_ratio_prices`).
    """
    days = sorted(last_trades or {})
    out: list[Transition] = []
    for prev, entry in itertools.pairwise(schedule):
        if entry.contract == prev.contract:
            continue
        price_day: dt.date | None = None
        from_px = to_px = None
        if last_trades is not None:
            from_day, from_px = _last_px(days, last_trades, entry.trading_day, prev.instrument_id)
            to_day, to_px = _last_px(days, last_trades, entry.trading_day, entry.instrument_id)
            if from_px is None or to_px is None:
                missing = prev.contract if from_px is None else entry.contract
                warnings.warn(
                    FxStoreWarning(
                        f"roll {entry.trading_day} {prev.contract} -> {entry.contract}: "
                        f"{missing} has no trade before the switch in the input, so the roll "
                        "is unpriced and adjusted prices take its gap as 0 (ratio 1); "
                        "ingest from an earlier start date to price it."
                    ),
                    stacklevel=2,
                )
            else:
                price_day = min(d for d in (from_day, to_day) if d is not None)
        out.append(
            Transition(
                trading_day=entry.trading_day,
                switch_ns=table.bounds(entry.trading_day)[0],
                from_contract=prev.contract,
                from_instrument_id=prev.instrument_id,
                to_contract=entry.contract,
                to_instrument_id=entry.instrument_id,
                rule=roll.rule,
                reason=entry.reason,
                price_day=price_day,
                from_px=from_px,
                to_px=to_px,
            )
        )
    if roll.adjust == "ratio":
        check_ratio_prices(out)
    return out


def adjust_prices(
    px: npt.NDArray[np.float64],
    segment: npt.NDArray[np.int64],
    gap_add: npt.NDArray[np.float64],
    gap_mul: npt.NDArray[np.float64],
    method: str,
    direction: str,
) -> npt.NDArray[np.float64]:
    """Adjusted prices (see the module docstring's table).

    Parameters
    ----------
    px
        Raw prices, shape (n,).
    segment
        Each price's contract segment: transitions on or before its trading day, shape (n,),
        values in [0, m].
    gap_add, gap_mul
        Each transition's additive and multiplicative gap, shape (m,).
    method, direction
        "difference" or "ratio"; "backward" or "forward".
    """
    if method == "difference":
        before = np.concatenate(([0.0], np.cumsum(gap_add)))  # sum(gap[j] for j < k)
        shift = before[-1] - before[segment] if direction == "backward" else -before[segment]
        return np.asarray(px + shift, dtype=np.float64)
    if method == "ratio":
        before = np.concatenate(([1.0], np.cumprod(gap_mul)))  # prod(gap[j] for j < k)
        scale = before[-1] / before[segment] if direction == "backward" else 1.0 / before[segment]
        return np.asarray(px * scale, dtype=np.float64)
    raise InvalidInputError(f"`--adjust` must be 'difference' or 'ratio', was {method!r}.")


def check_ratio_prices(transitions: Sequence[Transition]) -> None:
    """Raise unless every priced roll has two positive prices, as ratio adjustment needs.

    A ratio with a price at or below 0 (crude oil on 2020-04-20, a spread) would flip the
    sign of the adjusted history or divide by zero; the difference method has no such limit.
    """
    for t in transitions:
        if t.from_px is None or t.to_px is None or (t.from_px > 0 and t.to_px > 0):
            continue
        raise InvalidInputError(
            f"`--adjust ratio` needs positive prices at each roll: the roll on {t.trading_day} "
            f"({t.from_contract} -> {t.to_contract}) is priced {t.from_px} -> {t.to_px}, and a "
            "ratio there would flip or break the adjusted series; ingest with `--adjust "
            "difference` (or `--adjust none`) instead."
        )


def adjusted_column(
    bars: pa.Table, name: str, transitions: Sequence[Transition], method: str, direction: str
) -> pa.Array:
    """The column `name` of `bars` adjusted (float64; nulls stay null), by each row's
    ``trading_day`` segment (:func:`adjust_prices`)."""
    if method == "ratio":
        check_ratio_prices(transitions)
    day = bars.column("trading_day").to_numpy().astype("datetime64[D]")
    roll_days = np.array([t.trading_day for t in transitions], dtype="datetime64[D]")
    segment = np.searchsorted(roll_days, day, side="right").astype(np.int64)
    gap_add = np.array([t.gap_add or 0.0 for t in transitions], dtype=np.float64)
    gap_mul = np.array([t.gap_mul or 1.0 for t in transitions], dtype=np.float64)
    column = bars.column(name)
    px = column.to_numpy(zero_copy_only=False).astype(np.float64)
    out = adjust_prices(px, segment, gap_add, gap_mul, method, direction)
    return pa.array(out, pa.float64(), mask=column.is_null().to_numpy(zero_copy_only=False))


def with_adjusted_prices(
    bars: pa.Table, transitions: Sequence[Transition], method: str, direction: str
) -> pa.Table:
    """`bars` with the adjusted price columns (:data:`ADJUSTED_COLUMNS`) appended.

    `bars` holds a ``trading_day`` column (date32) and the raw price columns present of
    open, high, low, close, vwap; rows in time order.
    """
    for raw, adjusted in ADJUSTED_COLUMNS.items():
        if raw in bars.column_names and adjusted not in bars.column_names:
            column = adjusted_column(bars, raw, transitions, method, direction)
            bars = bars.append_column(adjusted, column)
    return bars


def transitions_from_manifest(manifest: Mapping[str, Any]) -> list[Transition]:
    """The transitions a bar manifest records; from its roll schedule, unpriced, for a
    series built without ``--roll``/``--adjust`` (which records none)."""
    rows = manifest.get("transitions")
    if isinstance(rows, list):
        return [Transition.from_json(r) for r in rows]
    schedule = schedule_from_manifest(manifest)
    roll = roll_of_manifest(manifest)
    recorded = manifest.get("calendar")
    name = recorded.get("name") if isinstance(recorded, dict) else None
    return build_transitions(schedule, roll, sessions(str(name)) if name else sessions())


def schedule_from_manifest(manifest: Mapping[str, Any]) -> list[RollEntry]:
    """The roll schedule a bar manifest records (the volume rule's fields; the other
    rules' facts are in the manifest rows themselves)."""
    return [
        RollEntry(
            trading_day=dt.date.fromisoformat(str(e["trading_day"])),
            contract=str(e["contract"]),
            instrument_id=int(e["instrument_id"]),
            prior_volume_share=e.get("prior_volume_share"),
            volume_share=float(e.get("volume_share") or 0.0),
            reason=str(e["reason"]),
        )
        for e in manifest.get("roll_schedule", [])
    ]


def roll_of_manifest(manifest: Mapping[str, Any]) -> RollConfig:
    """The roll rule a bar manifest was built with (today's rule when it records none)."""
    config = manifest.get("config")
    roll = config.get("roll") if isinstance(config, dict) else None
    return RollConfig(**roll) if isinstance(roll, dict) else RollConfig()
