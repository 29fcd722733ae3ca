"""The parent side of writing days: pick each day's bars in day order and put its file.

In front-month mode the choice for a day depends on the days before it, so one
:class:`DayWriter` sees every day in trading-day order, whoever built it: an in-process
build hands it tables, a worker hands it files in the parts folder
(:mod:`fxstore.ingest.run.day_files`), which it moves into place.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from fxstore.ingest.dbn.format import FIXED_PRICE_SCALE
from fxstore.ingest.run.day_builder import ALL_INSTRUMENTS, DayResult
from fxstore.ingest.run.day_files import (
    DayFile,
    bars_metadata,
    combine_instruments,
    day_file_name,
    write_day_file,
)
from fxstore.ingest.run.plan import IngestPlan
from fxstore.ingest.run.reuse import Reuse, link_day_file
from fxstore.ingest.select.front_month import FrontMonthSelector
from fxstore.market.contracts import parse_outright
from fxstore.store import MANIFEST, fsync_dir, os_errors, resolve_manifest_file

__all__ = ["ENDS_EARLY_NS", "DayWriter", "Json", "Request", "StagedArea"]

#: A day whose records stop this long before its session closes, where an input's request
#: asked for records after them, is one the inputs were cut inside (a download cut on a
#: record boundary): an hour of a futures book without a single update is no market.
ENDS_EARLY_NS: Final = 3_600_000_000_000


@dataclass(frozen=True, slots=True)
class Request:
    """What one input's DBN metadata says its request asked for."""

    #: Start of the query, ns UTC.
    start: int
    #: End of the query, ns UTC; None when open-ended (live data).
    end: int | None
    #: Most records asked for; 0 for no limit.
    limit: int


#: JSON data of manifests and progress files.
Json = dict[str, Any]


class StagedArea(Protocol):
    """Workers' parts kept elsewhere than in a folder here (an object store)."""

    def place(self, part: Path, path: Path, sha256: str) -> None:
        """Make the part `part` (of `sha256`) the day file `path`."""


class DayWriter:
    """Picks each day's bars (front month, one id, or all) and writes them, in day order."""

    def __init__(self, out_dir: Path, plan: IngestPlan) -> None:
        self.out_dir = out_dir
        self.plan = plan
        self.selector: FrontMonthSelector | None = plan.new_selector()
        self.entries: list[Json] = []
        self._begun: tuple[dt.date, int | None] | None = None
        self.metadata = bars_metadata(plan.config)
        #: Builds a worker's day again in-process for the instrument chosen (set per group).
        self.rebuild: Callable[[dt.date, int], DayResult] | None = None
        #: The inputs' requests (their metadata), to tell a cut input from a short request;
        #: none known: every day that ends early is taken for one the inputs were cut in.
        self.requests: tuple[Request, ...] = ()
        #: Where the workers' parts are when not in a folder here: in the store's bucket
        #: (:class:`fxstore.ingest.run.objects.StagedParts`); None: the parts folder.
        self.staged: StagedArea | None = None
        #: Days taken from the current version (:mod:`fxstore.ingest.run.reuse`): every one
        #: is skipped where the inputs hold it; those with an entry are written in day order.
        self.reuse: Reuse | None = None
        self._pending: list[dt.date] = []
        #: Days whose file and entry were taken from the current version.
        self.n_reused = 0
        #: Called with each day taken.
        self.on_reused: Callable[[dt.date], None] | None = None
        #: Builds a day from every input that holds it, for the front month chosen (None:
        #: none), when the choice differs from the one of the version it was to be taken from.
        self.build_day: Callable[[dt.date, int | None], DayResult] | None = None

    def take_days(self, reuse: Reuse) -> None:
        """Take the days of `reuse` instead of building them (those not written yet)."""
        written = {str(e["trading_day"]) for e in self.entries}
        self.reuse = reuse
        self._pending = sorted(
            d for d, e in reuse.days.items() if e is not None and d.isoformat() not in written
        )

    def is_taken(self, day: dt.date) -> bool:
        """Whether `day` comes from the current version (its records are not built)."""
        return self.reuse is not None and day in self.reuse.days

    def _catch_up(self, before: dt.date | None) -> None:
        """Write the days taken that come before `before` (None: all that are left)."""
        while self._pending and (before is None or self._pending[0] < before):
            self._take(self._pending.pop(0))

    def _take(self, day: dt.date) -> None:
        """Write a day taken from the current version: its file linked, its entry copied;
        in front-month mode only if the selector picks the same contract (else built)."""
        assert self.reuse is not None
        entry = self.reuse.days[day]
        assert entry is not None
        listed = {int(k): str(v) for k, v in entry["listed"].items()}
        if self.selector is not None:
            chosen = self.selector.start_day(day, listed)
            if ("" if chosen is None else listed.get(chosen, "")) != entry["contract"]:
                assert self.build_day is not None
                self._begun = (day, chosen)
                self._write(self.build_day(day, chosen))
            else:
                self.selector.end_day({int(k): int(v[1]) for k, v in entry["activity"].items()})
                self._link(day, entry)
        else:
            self._link(day, entry)
        if self.on_reused is not None:
            self.on_reused(day)

    def _link(self, day: dt.date, entry: Json) -> None:
        assert self.reuse is not None
        if "file" in entry:
            manifest = self.reuse.folder / MANIFEST
            source = resolve_manifest_file(manifest, str(entry["file"]))
            link_day_file(source, self.out_dir / day_file_name(day))
        self.entries.append(dict(entry))
        self.n_reused += 1

    def finish(self) -> None:
        """Write the days taken after the last day built."""
        self._catch_up(None)

    def begin(self, day: dt.date, listed: dict[int, str]) -> set[int]:
        """Choose the front month of `day` before its records are read (in-process runs)."""
        assert self.selector is not None
        self._catch_up(day)
        chosen = self.selector.start_day(day, listed)
        self._begun = (day, chosen)
        return set() if chosen is None else {chosen}

    def _choose(self, day: DayResult) -> int | None:
        """The front month of `day` (chosen from the days before it), then log its volume."""
        assert self.selector is not None
        if self._begun is not None and self._begun[0] == day.day:
            chosen = self._begun[1]
        else:
            chosen = self.selector.start_day(day.day, day.listed)
        self._begun = None
        self.selector.end_day({i: v for i, (_, v) in day.activity.items()})
        return chosen

    def write(self, day: DayResult) -> Json | None:
        """Write one day's file (if it has bars); return its manifest entry (None: the day
        is taken from the current version, written in its turn)."""
        self._catch_up(day.day)
        if self.is_taken(day.day):  # its records in a file read for other days
            for part in (day.parts or {}).values():
                part.path.unlink(missing_ok=True)
            return None
        return self._write(day)

    def _write(self, day: DayResult) -> Json:
        if self.selector is not None:
            key = self._choose(day)
            built = day
            if key is not None and key not in day.built:  # not among a worker's candidates
                assert self.rebuild is not None
                built = self.rebuild(day.day, key)
            contract = "" if key is None else day.listed.get(key, "")
            kept = 0 if key is None else day.activity.get(key, (0, 0))[0]
            outside = [(0, 0) if key is None else day.out_of_session.get(key, (0, 0))]
        else:
            key, built = ALL_INSTRUMENTS, day
            contract = ",".join(sorted({day.listed.get(i, "?") for i in day.built}))
            kept = sum(day.activity.get(i, (0, 0))[0] for i in day.built)
            outside = [day.out_of_session.get(i, (0, 0)) for i in day.built]
        path = self.out_dir / day_file_name(day.day)
        written = self._place(built, key, path)
        for other, part in (day.parts or {}).items():
            if other != key and self.staged is None:  # staged parts go with their folder
                part.path.unlink(missing_ok=True)
        entry: Json = {
            "trading_day": day.day.isoformat(),
            "contract": contract,
            "n_bars": 0 if written is None else written.n_bars,
            "n_records": sum(n for n, _ in day.activity.values()),
            "n_kept": kept,
            # the kept records outside the session (pre-open, post-close): in no bar
            "n_out_of_session": sum(n for n, _ in outside),
            "activity": {str(i): list(nv) for i, nv in sorted(day.activity.items())},
            "listed": {str(i): s for i, s in sorted(day.listed.items())},
        }
        if any(v for _, v in outside):
            entry["volume_out_of_session"] = sum(v for _, v in outside)
        early_s = self._ends_early_s(day)
        if early_s is not None:
            entry["records_end_before_close_s"] = early_s
        if self.plan.records_transitions:
            entry["last_trade_px"] = self._outright_last_trades(day)
        if written is None:
            path.unlink(missing_ok=True)  # a stale file of an earlier config or input
        else:
            entry |= {"file": path.name, "sha256": written.sha256} | written.quality
        self.entries.append(entry)
        return entry

    def _ends_early_s(self, day: DayResult) -> int | None:
        """Seconds between the day's last record and its session close, when the records
        stop well before it (:data:`ENDS_EARLY_NS`) while an input's request asked for
        records after them (:meth:`_asked_for_more`): inputs cut inside the session."""
        if day.last_ts_recv < 0 or not self.plan.sessions.is_trading_day(day.day):
            return None
        _, close_ns = self.plan.sessions.bounds(day.day)
        gap = close_ns - day.last_ts_recv
        if gap <= ENDS_EARLY_NS or not self._asked_for_more(day.last_ts_recv, close_ns):
            return None
        return gap // 1_000_000_000

    def _asked_for_more(self, last_ns: int, close_ns: int) -> bool:
        """Whether an input's request asked for records more than :data:`ENDS_EARLY_NS`
        after `last_ns` and before `close_ns`: it started by then, asked for no record
        limit (a limited request ends where its records do) and ends later (or is
        open-ended). A request that ends before the session closes is a short request, its
        records end where it does. True when no request is known."""
        if not self.requests:
            return True
        return any(
            not r.limit
            and r.start <= last_ns
            and (r.end is None or min(r.end, close_ns) - last_ns > ENDS_EARLY_NS)
            for r in self.requests
        )

    def _outright_last_trades(self, day: DayResult) -> dict[str, float]:
        """Last trade price of each outright of the root that traded, by instrument id."""
        root = self.plan.root or ""
        return {
            str(i): px / FIXED_PRICE_SCALE
            for i, px in sorted(day.last_trade.items())
            if parse_outright(day.listed.get(i, ""), root, day.day) is not None
        }

    def last_trades(self) -> dict[dt.date, dict[int, float]]:
        """Trading day → instrument_id → last trade price, of every day written or replayed."""
        return {
            dt.date.fromisoformat(str(e["trading_day"])): {
                int(k): float(v) for k, v in e.get("last_trade_px", {}).items()
            }
            for e in self.entries
        }

    def _place(self, day: DayResult, key: int | None, path: Path) -> DayFile | None:
        """Put the day's file of `key` at `path`: move a worker's part, or write the table."""
        if key is None:
            return None
        if day.parts is not None:
            part = day.parts.get(key)
            if part is None:
                return None
            if self.staged is not None:
                self.staged.place(part.path, path, part.sha256)
                return dataclasses.replace(part, path=path)
            with os_errors(path, "write"):
                os.replace(part.path, path)
            fsync_dir(path.parent)
            return dataclasses.replace(part, path=path)
        table = combine_instruments(day.bars) if key == ALL_INSTRUMENTS else day.bars.get(key)
        if table is None or not table.num_rows:
            return None
        return write_day_file(table, path, self.metadata)

    def replay(self, entry: Json) -> None:
        """Account for a day finished by an earlier run (keeps the selector's state right)."""
        self._pending = [d for d in self._pending if d.isoformat() != entry["trading_day"]]
        if self.selector is not None:
            day = dt.date.fromisoformat(str(entry["trading_day"]))
            listed = {int(k): str(v) for k, v in entry["listed"].items()}
            activity = {int(k): int(v[1]) for k, v in entry["activity"].items()}
            self.selector.start_day(day, listed)
            self.selector.end_day(activity)
        self.entries.append(entry)
