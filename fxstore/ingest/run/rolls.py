"""`fxstore rolls SYMBOL`: the transitions of a front-month bar series, from its manifest.

One row per roll (:class:`~fxstore.ingest.select.transitions.Transition`); optionally, per
trading day, fxstore's front month next to Databento's continuous symbology
(:mod:`fxstore.ingest.select.continuous`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fxstore.config import RollConfig
from fxstore.errors import InvalidInputError, SymbolNotFoundError
from fxstore.ingest.select.continuous import (
    DayComparison,
    compare_with_databento,
    read_resolve_json,
)
from fxstore.ingest.select.transitions import (
    Transition,
    roll_of_manifest,
    schedule_from_manifest,
    transitions_from_manifest,
)
from fxstore.market.calendar import sessions
from fxstore.market.master import calendar_of_symbol
from fxstore.store import bars_dir, find_bar_version, list_bar_series, read_bar_manifest

__all__ = ["TRANSITION_COLUMNS", "RollsReport", "read_rolls"]

#: The columns of ``fxstore rolls --csv``, in order.
TRANSITION_COLUMNS: Final = (
    "trading_day",
    "switch_ns",
    "from_contract",
    "from_instrument_id",
    "to_contract",
    "to_instrument_id",
    "rule",
    "reason",
    "price_day",
    "from_px",
    "to_px",
    "gap_add",
    "gap_mul",
)


@dataclass(frozen=True, slots=True)
class RollsReport:
    """The transitions of one bar series version, and its comparison with Databento."""

    symbol: str
    folder: Path
    version: int
    roll: RollConfig
    transitions: tuple[Transition, ...]
    #: Whether the series priced its rolls (built with --roll, --roll-months or --adjust).
    is_priced: bool
    #: Per trading day against Databento's continuous symbology (with --databento).
    comparison: tuple[DayComparison, ...] = ()
    databento_symbol: str | None = None

    def to_json(self) -> dict[str, object]:
        """The report as ``--json`` prints it."""
        out: dict[str, object] = {
            "symbol": self.symbol,
            "series": str(self.folder),
            "version": self.version,
            "roll": self.roll.to_json(),
            "priced": self.is_priced,
            "transitions": [t.to_json() for t in self.transitions],
        }
        if self.databento_symbol is not None:
            out["databento_symbol"] = self.databento_symbol
            out["comparison"] = [c.to_json() for c in self.comparison]
        return out

    def to_csv(self) -> str:
        """The transitions (or, with --databento, the per-day comparison) as CSV."""
        buffer = io.StringIO()
        if self.databento_symbol is not None:
            rows = [c.to_json() for c in self.comparison]
            columns = list(rows[0]) if rows else ["trading_day"]
        else:
            rows, columns = [t.to_json() for t in self.transitions], list(TRANSITION_COLUMNS)
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
        return buffer.getvalue()

    def format_text(self) -> str:
        """A table for people."""
        rule = self.roll.rule + (f" {self.roll.offset}" if self.roll.rule == "calendar" else "")
        months = f", months {self.roll.months}" if self.roll.months else ""
        n = len(self.transitions)
        lines = [
            f"{self.symbol} v{self.version}: {n} roll{'' if n == 1 else 's'} by {rule}{months} "
            f"(adjust {self.roll.adjust}, {self.roll.direction}) in {self.folder}"
        ]
        for t in self.transitions:
            prices = (
                f"{t.from_px:g} -> {t.to_px:g} on {t.price_day}, gap {t.gap_add:+g} "
                f"(x{t.gap_mul:.6f})"
                if t.from_px is not None and t.to_px is not None and t.gap_mul is not None
                else "unpriced"
            )
            lines.append(
                f"  {t.trading_day}  {t.from_contract} ({t.from_instrument_id}) -> "
                f"{t.to_contract} ({t.to_instrument_id})  {t.reason}  {prices}"
            )
        if not self.is_priced and self.transitions:
            lines.append(
                "  (no prices: the series was built with the default rule; ingest with "
                "--adjust difference or ratio to price its rolls)"
            )
        if self.databento_symbol is not None:
            lines.append(self._format_comparison())
        return "\n".join(lines)

    def _format_comparison(self) -> str:
        rows = self.comparison
        counts = {a: sum(1 for c in rows if c.agree == a) for a in ("yes", "evening", "no", "n/a")}
        lines = [
            f"against Databento {self.databento_symbol} (UTC dates, switch at 00:00 UTC; fxstore "
            f"switches at the 17:00 Chicago open): {counts['yes']} days agree, "
            f"{counts['evening']} differ from the open to midnight UTC only, {counts['no']} "
            f"differ, {counts['n/a']} outside the resolution"
        ]
        for c in rows:
            if c.agree != "yes":
                lines.append(
                    f"  {c.trading_day}  fxstore {c.contract}  databento {c.databento} "
                    f"(open's UTC date {c.open_utc_date}: {c.databento_at_open})  {c.agree}"
                )
        return "\n".join(lines)


def _front_month_series(store_root: Path, symbol: str, instrument_key: str | None) -> Path:
    series = [s for s in list_bar_series(store_root, symbol) if s[1].startswith("mbp10_front")]
    found = [s for s in series if instrument_key in (None, s[1])]
    known = ", ".join(f"{i}/{b}" for _, i, b in series) or "none"
    if not found:
        raise SymbolNotFoundError(
            f"No front-month bars{' ' + instrument_key if instrument_key else ''} for "
            f"{symbol!r} in "
            f"{store_root / 'bars'}; known: {known}. Run `fxstore ingest --instrument-mode "
            "front-month` first."
        )
    if len(found) > 1:
        raise InvalidInputError(
            f"{symbol!r} has {len(found)} front-month bar series: {known}; pick one with "
            "--instrument-key (and --bar-key)."
        )
    return bars_dir(store_root, *found[0])


def read_rolls(
    store_root: Path,
    symbol: str,
    *,
    instrument_key: str | None = None,
    bar_key: str | None = None,
    databento: Path | None = None,
    databento_symbol: str | None = None,
) -> RollsReport:
    """The transitions of `symbol`'s current front-month bar series (continuous, "ES.FUT").

    Parameters
    ----------
    instrument_key, bar_key
        The series; None: the only front-month one.
    databento
        A saved ``symbology.resolve`` JSON to compare the schedule with, per trading day.
    databento_symbol
        The continuous symbol in it to use ("ES.c.0"); None: the only one.

    Raises
    ------
    SymbolNotFoundError
        No front-month bar series of the symbol.
    InvalidInputError, SchemaError
        Several series and none chosen; an unreadable resolve file.
    """
    if bar_key is None:
        folder = _front_month_series(store_root, symbol, instrument_key)
    else:
        folder = bars_dir(store_root, symbol, instrument_key or "mbp10_front_month", bar_key)
    version = find_bar_version(folder)
    manifest: dict[str, Any] = dict(read_bar_manifest(version))
    roll = roll_of_manifest(manifest)
    report = RollsReport(
        symbol=symbol,
        folder=version.folder,
        version=version.version,
        roll=roll,
        transitions=tuple(transitions_from_manifest(manifest)),
        is_priced="transitions" in manifest,
    )
    if databento is None:
        return report
    mapping = read_resolve_json(databento, databento_symbol)
    recorded = manifest.get("calendar")
    calendar = recorded.get("name") if isinstance(recorded, dict) else None
    calendar = str(calendar) if calendar else calendar_of_symbol(symbol)
    rows = compare_with_databento(schedule_from_manifest(manifest), mapping, sessions(calendar))
    return dataclasses.replace(report, comparison=tuple(rows), databento_symbol=mapping.symbol)
