"""`fxstore scan`: what is in DBN MBP-10 files, before anything is built.

One streaming pass over the records counts, per trading day and instrument, the records
and the traded volume; the front-month schedule is derived from those counts with the
same selector that ingest uses.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from fxstore.errors import InvalidInputError, NoFrontMonthError
from fxstore.ingest.dbn.reader import DbnSource, open_dbn
from fxstore.ingest.run.plan import expand_definitions
from fxstore.ingest.select.activity import ActivityCounter
from fxstore.ingest.select.front_month import RollEntry, select_front_month, symbols_listed
from fxstore.market.calendar import sessions
from fxstore.market.contracts import root_of_parent
from fxstore.market.master import InstrumentMaster, calendar_of_symbol

__all__ = ["InstrumentDay", "ScanReport", "scan_dbn"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class InstrumentDay:
    """One instrument's activity on one trading day."""

    trading_day: dt.date
    instrument_id: int
    #: Raw symbol from the symbology ("ESH4", "ESH4-ESM4"); "?" when unmapped.
    symbol: str
    n_records: int
    #: Traded contracts (sum of trade sizes).
    volume: int


@dataclass(frozen=True, slots=True)
class ContractInfo:
    """What the instrument master knows of one instrument of the inputs, and from where."""

    symbol: str
    #: Dollars per price point; None when neither a definition nor the table gives one.
    multiplier: float | None
    tick_size: float | None
    #: Last trading day.
    expiration: dt.date | None
    #: "definition", "builtin", or "unknown" (pass --definitions).
    source: str


@dataclass(frozen=True, slots=True)
class ScanReport:
    """What :func:`scan_dbn` found."""

    files: tuple[Path, ...]
    dataset: str
    schema: str
    n_records: int
    #: ts_recv of the first and last record, ns since the epoch (None without records).
    first_ts_recv: int | None
    last_ts_recv: int | None
    trading_days: tuple[dt.date, ...]
    activity: tuple[InstrumentDay, ...]
    #: Product root the schedule is for ("ES"), None when it could not be told.
    root: str | None
    schedule: tuple[RollEntry, ...]
    elapsed_s: float
    #: Contract facts per instrument symbol seen (see :class:`ContractInfo`).
    contracts: tuple[ContractInfo, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The report as JSON-ready data (dates as ISO strings)."""
        return {
            "files": [str(p) for p in self.files],
            "dataset": self.dataset,
            "schema": self.schema,
            "n_records": self.n_records,
            "first_ts_recv": self.first_ts_recv,
            "last_ts_recv": self.last_ts_recv,
            "trading_days": [d.isoformat() for d in self.trading_days],
            "activity": [
                {**asdict(a), "trading_day": a.trading_day.isoformat()} for a in self.activity
            ],
            "root": self.root,
            "front_month": [
                {**asdict(e), "trading_day": e.trading_day.isoformat(), "is_roll": e.is_roll}
                for e in self.schedule
            ],
            "contracts": [
                {**asdict(c), "expiration": c.expiration and c.expiration.isoformat()}
                for c in self.contracts
            ],
        }

    def format_text(self, *, brief: bool = False) -> str:
        """The report as a human-readable text block; `brief`: the header and the front
        month, without the instruments' tables (their totals and each trading day's)."""
        instruments = [] if brief else [*_format_instruments(self), ""]
        return "\n".join([*_format_header(self), "", *instruments, *_format_schedule(self)])


_MAX_COLUMNS = 6


def _utc(ts: int | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts / 1e9, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _format_header(report: ScanReport) -> list[str]:
    days = report.trading_days
    span = f"{days[0]} … {days[-1]}" if days else "none"
    names = [p.name for p in report.files]
    shown = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"
    return [
        f"Dataset   {report.dataset}   schema {report.schema}",
        f"Files     {len(names)} ({shown})",
        f"Records   {report.n_records:,} in {report.elapsed_s:.1f} s",
        f"Span      {_utc(report.first_ts_recv)} → {_utc(report.last_ts_recv)}",
        f"Days      {len(days)} trading days: {span}",
    ]


def _format_instruments(report: ScanReport) -> list[str]:
    totals: dict[str, list[int]] = {}
    for row in report.activity:
        t = totals.setdefault(row.symbol, [row.instrument_id, 0, 0, 0])
        t[1], t[2], t[3] = t[1] + 1, t[2] + row.n_records, t[3] + row.volume
    order = sorted(totals, key=lambda sym: -totals[sym][3])
    facts = {c.symbol: c for c in report.contracts}
    lines = [
        f"Instruments ({len(order)})",
        f"  {'symbol':<12}{'id':>10}{'days':>6}{'records':>14}{'volume':>12}"
        f"{'$/point':>10}{'tick':>10}  {'expiry':<11}source",
    ]
    lines += [
        f"  {s:<12}{totals[s][0]:>10}{totals[s][1]:>6}{totals[s][2]:>14,}{totals[s][3]:>12,}"
        + _format_facts(facts.get(s))
        for s in order
    ]
    shown = order[:_MAX_COLUMNS]
    cells: dict[tuple[dt.date, str], str] = {
        (r.trading_day, r.symbol): f"{r.n_records:,}/{r.volume:,}" for r in report.activity
    }
    lines += [
        "",
        "Records/volume per trading day"
        + (f" (top {_MAX_COLUMNS} by volume; all in --json)" if len(order) > _MAX_COLUMNS else ""),
    ]
    lines.append("  " + f"{'day':<12}" + "".join(f"{s:>20}" for s in shown))
    for day in report.trading_days:
        lines.append(
            "  "
            + f"{day.isoformat():<12}"
            + "".join(f"{cells.get((day, s), '-'):>20}" for s in shown)
        )
    return lines


def _format_facts(info: ContractInfo | None) -> str:
    if info is None or info.source == "unknown":
        return f"{'-':>10}{'-':>10}  {'-':<11}unknown: pass --definitions"
    mult = "-" if info.multiplier is None else f"{info.multiplier:g}"
    tick = "-" if info.tick_size is None else f"{info.tick_size:g}"
    expiry = "-" if info.expiration is None else info.expiration.isoformat()
    return f"{mult:>10}{tick:>10}  {expiry:<11}{info.source}"


def _contract_info(master: InstrumentMaster, symbol: str, day: dt.date) -> ContractInfo:
    try:
        multiplier, source, facts = master.resolve(symbol, day)
    except InvalidInputError:
        return ContractInfo(symbol, None, None, None, "unknown")
    if facts is None:  # a spread: its legs' multiplier, no facts of its own
        return ContractInfo(symbol, multiplier, None, None, source)
    return ContractInfo(symbol, multiplier, facts.tick_size, facts.expiration, facts.source)


def _format_schedule(report: ScanReport) -> list[str]:
    if not report.schedule:
        return ["Front month: none (pass --symbol ROOT.FUT to choose the root)"]
    lines = [f"Front month of {report.root} (chosen from the previous trading day's volume)"]
    runs: list[list[RollEntry]] = []
    for entry in report.schedule:
        if runs and runs[-1][-1].contract == entry.contract:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    for run in runs:
        head = run[0]
        share = (
            ""
            if head.prior_volume_share is None
            else f", {head.prior_volume_share:.0%} of the day before"
        )
        span = f"{head.trading_day} → {run[-1].trading_day}"
        lines.append(
            f"  {span}  {head.contract:<8} id {head.instrument_id:<10} {len(run):>3} days"
            f"  ({head.reason}{share})"
        )
    return lines


def _infer_root(source: DbnSource) -> str | None:
    """The root of a parent-symbol request ("ES.FUT" → "ES") when all files agree on one."""
    parents = {
        sym
        for f in source.files
        if f.metadata.stype_in == "parent"
        for sym in f.metadata.symbols
        if sym.endswith(".FUT")
    }
    return root_of_parent(parents.pop()) if len(parents) == 1 else None


def scan_dbn(
    paths: Sequence[Path],
    *,
    symbol: str | None = None,
    definitions: Sequence[Path] = (),
    on_start: Callable[[int], None] | None = None,
    on_progress: Callable[[Path], None] | None = None,
) -> ScanReport:
    """Scan DBN MBP-10 inputs: activity per trading day and instrument, and the front month.

    Parameters
    ----------
    paths
        Files and/or batch-download folders (see :func:`fxstore.ingest.dbn.reader.open_dbn`).
    symbol
        Parent symbol whose front month to derive ("ES.FUT"); None infers it from the
        files' metadata when they were requested by one parent symbol.
    definitions
        Databento definition files or folders for contract facts, besides any definition
        file among `paths`.
    on_start
        Called once with the number of files about to be read.
    on_progress
        Called with each file's path once its records have been read.

    Raises
    ------
    NoFrontMonthError
        `symbol` was given and no outright of its root is in the input.
    """
    started = time.perf_counter()
    source = open_dbn(list(paths))
    root = root_of_parent(symbol) if symbol else _infer_root(source)
    if on_start is not None:
        on_start(len(source.files))
    table = sessions(calendar_of_symbol(root or ""))
    counter = ActivityCounter(table)
    n_records, first, last, current = 0, None, None, None
    for chunk in source.iter_chunks():
        if on_progress is not None and current is not None and chunk.path != current:
            on_progress(current)
        current = chunk.path
        ts = chunk.records["ts_recv"]
        first = int(ts[0]) if first is None else first
        last = int(ts[-1])
        n_records += len(chunk.records)
        counter.update(chunk.records)
    if on_progress is not None and current is not None:
        on_progress(current)
    activity = counter.result()
    days = activity.days
    listed = {day: symbols_listed(source.symbology, day, table) for day in days}
    schedule: list[RollEntry] = []
    if root is not None and days:
        try:
            schedule = select_front_month(activity, listed, root)
        except NoFrontMonthError:
            if symbol:
                raise
            logger.info("no front month of inferred root %s", root)
    rows = tuple(
        InstrumentDay(
            trading_day=day,
            instrument_id=int(iid),
            symbol=listed[day].get(int(iid), "?"),
            n_records=int(n),
            volume=int(v),
        )
        for day64, iid, n, v in zip(
            activity.trading_day,
            activity.instrument_id,
            activity.n_records,
            activity.volume,
            strict=True,
        )
        for day in [day64.astype("datetime64[D]").item()]
    )
    master = InstrumentMaster.from_files(
        [f.path for f in source.definitions] + expand_definitions(definitions)
    )
    last_seen = {row.symbol: row.trading_day for row in rows if row.symbol != "?"}
    contracts = tuple(_contract_info(master, s, d) for s, d in sorted(last_seen.items()))
    return ScanReport(
        files=tuple(f.path for f in source.files),
        dataset=source.dataset,
        schema="mbp-10",
        n_records=n_records,
        first_ts_recv=first,
        last_ts_recv=last,
        trading_days=tuple(days),
        activity=rows,
        root=root,
        schedule=tuple(schedule),
        elapsed_s=time.perf_counter() - started,
        contracts=contracts,
    )
