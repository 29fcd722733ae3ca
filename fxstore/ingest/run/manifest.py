"""The bar series' manifest: what a finished ingest records, and what a later run trusts.

The manifest is written last, atomically, once every day file is in place; its
``fingerprint`` (the config, the fxstore version and the inputs' names, sizes and mtimes)
decides whether a later run has anything to do.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from fxstore import __version__
from fxstore.config import IngestConfig
from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError
from fxstore.ingest.bars.kernels import MAX_TRADE_FROM_MID, MAX_TRADE_QTY
from fxstore.ingest.bars.params import CLOSE_REASONS
from fxstore.ingest.dbn.reader import DbnFile, describe_passed_over
from fxstore.ingest.run.day_writer import DayWriter, Json
from fxstore.ingest.run.plan import IngestPlan
from fxstore.ingest.select.front_month import RollEntry
from fxstore.ingest.select.transitions import build_transitions
from fxstore.market.calendar import NS_PER_HOUR, Sessions
from fxstore.market.plausible import plausible_range
from fxstore.store import (
    BarVersion,
    atomic_write_json,
    file_sha256,
    manifest_field,
    manifest_path,
    matches_manifest,
    os_errors,
    read_bar_manifest,
    resolve_manifest_file,
)

__all__ = [
    "IngestSummary",
    "fingerprint",
    "summary_from_manifest",
    "up_to_date_manifest",
    "warn_ended_early",
    "warn_if_target_missed",
    "warn_implausible",
    "warn_truncated",
    "write_manifest",
]

#: Imbalance bars per day further than this factor from the target are reported.
_TARGET_FACTOR: Final = 1.5
#: A Globex session of 17:00-16:00 Chicago; shorter ones are early closes.
_REGULAR_SESSION_HOURS: Final = 23.0


@dataclass(frozen=True, slots=True)
class IngestSummary:
    """What :func:`ingest` did."""

    out_dir: Path
    n_days: int
    days_written: int
    #: Days not rebuilt: unchanged since the last run, or finished before it was killed.
    days_skipped: int
    #: Days whose file and entry were taken from the series' previous version, their day
    #: key unchanged (:mod:`fxstore.ingest.run.reuse`): not built.
    days_reused: int
    #: MBP-10 records read (with days taken from the previous version: the records its
    #: manifest recorded of those days, and the others read), and those of the kept
    #: instrument(s).
    n_records: int
    n_kept: int
    n_bars: int
    schedule: tuple[RollEntry, ...]
    elapsed_s: float
    #: Seconds spent building days, summed over the groups built (each group's wall time in
    #: its process): against ``elapsed_s × workers`` it shows how busy the pool was.
    build_s: float
    #: True when inputs and config were unchanged and nothing had to be done.
    up_to_date: bool

    @property
    def bars_per_day(self) -> float:
        """Bars per trading day with bars."""
        return self.n_bars / self.n_days if self.n_days else 0.0


def fingerprint(
    config: IngestConfig,
    files: Sequence[DbnFile],
    definitions: Sequence[Path] = (),
    mtimes: Mapping[Path, int] | None = None,
) -> str:
    """What decides a series' content: config, version, inputs (names, sizes, mtimes).

    `mtimes` gives the times of inputs that are no local files (objects in storage: the
    times their downloads would have, so that either way gives the same fingerprint).
    """
    known = mtimes or {}
    stat = [
        (f.path.name, f.size_bytes, known.get(f.path) or f.path.stat().st_mtime_ns) for f in files
    ]
    stat += [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in definitions]
    blob = json.dumps({"config": config.to_json(), "inputs": stat, "version": __version__})
    return hashlib.sha256(blob.encode()).hexdigest()


def up_to_date_manifest(version: BarVersion, fingerprint: str) -> Json | None:
    """The manifest of committed `version` when it was built with `fingerprint`, its day
    files unchanged; else None (the series is built again).

    Raises
    ------
    SchemaError
        The manifest is not the one its version committed (:func:`read_bar_manifest`).
    """
    path = version.manifest
    with os_errors(path, "read"):
        if not path.exists():
            return None
    manifest = read_bar_manifest(version)
    if manifest.get("fingerprint") != fingerprint:
        return None
    days = manifest.get("days", [])
    for day in days if isinstance(days, list) else [None]:
        if not isinstance(day, dict):
            return None
        if "file" not in day:
            continue
        file = resolve_manifest_file(path, str(day["file"]))
        if not matches_manifest(file, path, str(day.get("sha256"))):
            warnings.warn(
                FxStoreWarning(
                    f"{file}: not the file {path} recorded (changed, damaged or replaced since): "
                    "building the series again."
                ),
                stacklevel=2,
            )
            return None
    return manifest


def write_manifest(
    out_dir: Path,
    writer: DayWriter,
    inputs: list[list[object]],
    fingerprint: str,
    definitions: Sequence[Path] = (),
    truncated: Mapping[str, list[int]] | None = None,
    passed_over: Mapping[str, Mapping[str, int]] | None = None,
    day_keys: Mapping[str, str] | None = None,
) -> None:
    """Commit the series: written last, atomically, once every day file is in place.

    `truncated` (file name → [bytes dropped, records kept, last ts_recv]) marks those
    inputs, and the trading day their last record fell on, as incomplete. `passed_over`
    (file name → {rtype "0xNN": records}) counts the records of each input in no bar that
    are neither MBP-10 nor symbol mappings, each rtype with its reason. `day_keys`
    (trading day → key, :func:`fxstore.ingest.run.reuse.day_keys`) let a later build take
    the days whose key it shares.
    """
    passed = {
        name: describe_passed_over(by_rtype) for name, by_rtype in (passed_over or {}).items()
    }
    config = writer.plan.config
    cut = _truncated_json(truncated or {}, writer.plan.sessions)
    for entry in writer.entries:
        names = [n for n, c in cut.items() if c["last_trading_day"] == entry["trading_day"]]
        if names:
            entry["truncated"] = sorted(names)
    schedule = writer.selector.schedule if writer.selector else []
    atomic_write_json(
        manifest_path(out_dir),
        {
            "stage": "ingest",
            "fxstore_version": __version__,
            "fingerprint": fingerprint,
            "config": config.to_json(),
            "bar_key": config.bars.key,
            "bar_rule": _bar_rule(config),
            "calendar": _calendar_json(writer.plan, writer.entries),
            "inputs": [
                {"name": n, "size": s, "sha256": h}
                | ({"truncated": cut[n]} if n in cut else {})
                | ({"passed_over": passed[n]} if n in passed else {})
                for n, s, h in inputs
            ],
            # records read that are in no bar for what they are (by rtype, in `inputs`)
            "n_records_passed_over": sum(
                sum(by_rtype.values()) for by_rtype in (passed_over or {}).values()
            ),
            "definitions": [
                {"name": p.name, "size": p.stat().st_size, "sha256": file_sha256(p)}
                for p in definitions
            ],
            "contracts": contract_facts(writer.plan, writer.entries),
            "roll_schedule": [e.to_json() for e in schedule],
            **_transitions_json(writer, schedule),
            "days": writer.entries,
            "day_keys": dict(day_keys or {}),
            "n_bars": sum(int(str(e["n_bars"])) for e in writer.entries),
        },
    )


def _transitions_json(writer: DayWriter, schedule: Sequence[RollEntry]) -> Json:
    """The roll rule, its inputs and the priced transitions (absent for a default run)."""
    plan = writer.plan
    if not plan.records_transitions:
        return {}
    transitions = build_transitions(schedule, plan.roll, plan.sessions, writer.last_trades())
    return {
        "roll": plan.roll.to_json()
        | {"switch": "session open (17:00 America/Chicago of the day before)"},
        "statistics": [
            {"name": p.name, "size": p.stat().st_size, "sha256": file_sha256(p)}
            for p in plan.statistics_files
        ],
        "transitions": [t.to_json() for t in transitions],
    } | (
        {"symbology": [_file_json(plan.config.symbology)]}
        if plan.config.symbology is not None
        else {}
    )


def _file_json(path: Path) -> Json:
    return {"name": path.name, "size": path.stat().st_size, "sha256": file_sha256(path)}


def summary_from_manifest(out_dir: Path, manifest: Json, started: float) -> IngestSummary:
    """The summary of a series found up to date (its manifest's fields checked by type)."""
    where = manifest_path(out_dir)
    warn_truncated(manifest, where)
    days = manifest_field(manifest, "days", list, where)
    if not all(isinstance(d, dict) for d in days):
        raise SchemaError(
            f"{where}: every entry of `days` must be a JSON object; the manifest is damaged or "
            "was edited: re-run the command that wrote it with --force."
        )
    counts = [
        {k: manifest_field(d, k, int, where) for k in ("n_bars", "n_records", "n_kept")}
        for d in days
    ]
    n_bars = sum(c["n_bars"] for c in counts)
    return IngestSummary(
        out_dir=out_dir,
        n_days=sum(1 for c in counts if c["n_bars"] > 0),
        days_written=0,
        days_skipped=len(days),
        days_reused=0,
        n_records=sum(c["n_records"] for c in counts),
        n_kept=sum(c["n_kept"] for c in counts),
        n_bars=n_bars,
        schedule=(),
        elapsed_s=time.perf_counter() - started,
        build_s=0.0,
        up_to_date=True,
    )


def _calendar_json(plan: IngestPlan, entries: Sequence[Json]) -> Json:
    """Which sessions the bars were cut by, and the short sessions among the series' days
    (early closes: their imbalance bars aim at the target over the shorter session)."""
    table = plan.sessions
    early: Json = {}
    for entry in entries:
        day = dt.date.fromisoformat(str(entry["trading_day"]))
        hours = table.length_ns(day) / NS_PER_HOUR
        if hours < _REGULAR_SESSION_HOURS:
            early[day.isoformat()] = round(hours, 2)
    return {
        "name": plan.calendar,
        "source": "pandas_market_calendars",
        "early_closes_session_hours": early,
    }


def _truncated_json(truncated: Mapping[str, list[int]], table: Sessions) -> dict[str, Json]:
    out: dict[str, Json] = {}
    for name, (dropped, kept, last_ts) in truncated.items():
        day = table.trading_day_of(np.array([last_ts], dtype=np.int64))[0] if last_ts >= 0 else None
        out[name] = {
            "dropped_bytes": int(dropped),
            "records_kept": int(kept),
            "last_trading_day": None if day is None else str(day),
        }
    return out


def warn_truncated(manifest: Json, where: Path) -> None:
    """Warn about each input a series was built from that ended in a partial record."""
    for entry in manifest_field(manifest, "inputs", list, where):
        cut = entry.get("truncated") if isinstance(entry, dict) else None
        if isinstance(cut, dict):
            warnings.warn(
                FxStoreWarning(
                    f"{where}: input {entry.get('name')} was truncated ({cut.get('dropped_bytes')}"
                    f" bytes dropped after {cut.get('records_kept')} records): its last trading "
                    f"day {cut.get('last_trading_day')} is incomplete; download it again and "
                    "re-run with --force."
                ),
                stacklevel=2,
            )


def contract_facts(plan: IngestPlan, entries: Sequence[Json]) -> Json:
    """The facts of every contract with bars, and their source, as the bars used them."""
    facts: Json = {}
    for entry in entries:
        if not int(entry.get("n_bars", 0)):
            continue
        day = dt.date.fromisoformat(str(entry["trading_day"]))
        for symbol in str(entry.get("contract", "")).split(","):
            if symbol and symbol not in facts:
                facts[symbol] = _facts_json(plan, symbol, day)
    return dict(sorted(facts.items()))


def _facts_json(plan: IngestPlan, symbol: str, day: dt.date) -> Json:
    lo, hi, range_source = plausible_range(symbol)
    plausible = {"plausible_px": [lo, hi], "plausible_px_source": range_source}
    if plan.bars.multiplier is not None:  # the option overrides the multiplier, no other fact
        option = {"multiplier": plan.bars.multiplier, "multiplier_source": "option"}
        try:
            return plan.master.facts(symbol, day).to_json() | option | plausible
        except InvalidInputError:  # a contract the master does not know: the option alone
            return {"multiplier": plan.bars.multiplier, "source": "option"} | plausible
    multiplier, source, known = plan.master.resolve(symbol, day)
    if known is None:  # a spread fxstore cannot parse: its legs gave the multiplier
        return {"multiplier": multiplier, "source": source} | plausible
    return known.to_json() | {"multiplier": multiplier, "multiplier_source": source} | plausible


def _bar_rule(config: IngestConfig) -> Json:
    """How each bar's boundary can be re-derived from the bars and the raw trades."""
    bars = config.bars
    rule: Json = {
        "bar_type": bars.bar_type,
        "close_reasons": list(CLOSE_REASONS),
        "columns": ["threshold", "min_trades", "max_trades", "close_reason", "is_partial"],
    }
    if bars.is_imbalance:
        rule |= {
            "warmup": "the first bar of each day closes at the first F_LAST record at least "
            "session length / target_bars_per_day after its first trade",
            "trade_limits": "each later bar holds between min_trades = max(1, ceil(T*/band)) "
            "and max_trades = ceil(T*·band) trades, T* being the day's trades per target bar "
            "so far; threshold = max(E0[T]·|E0[b·v]|, sqrt(T*·var))",
            "band": bars.band,
            "target_bars_per_day": bars.target_bars_per_day,
            "ewma_span_bars": bars.ewma_span_bars,
            "ewma_span_trades": bars.ewma_span_trades,
        }
    else:
        rule |= {"threshold": bars.threshold}
    return rule


def warn_implausible(plan: IngestPlan, entries: Sequence[Json]) -> None:
    """Warn when book states or trades were priced outside their contract's plausible range."""
    days = [e for e in entries if int(e.get("n_implausible_px", 0))]
    if not days:
        return
    n = sum(int(e["n_implausible_px"]) for e in days)
    n_bars = sum(int(e.get("n_bars_implausible_px", 0)) for e in days)
    contracts = sorted({str(e.get("contract")) for e in days})
    lo, hi, source = plausible_range(contracts[0].split(",")[0])
    warnings.warn(
        FxStoreWarning(
            f"{plan.store_symbol}: {n:,} book states or trades priced outside the plausible range "
            f"of {', '.join(contracts[:3])} ([{lo:g}, {hi:g}] points, {source}), or trades "
            f"more than {MAX_TRADE_FROM_MID:.0%} from the book's mid or of more than "
            f"{MAX_TRADE_QTY:,} contracts, in {n_bars:,} bars on {len(days)} trading day(s), "
            f"first {days[0]['trading_day']}: damaged records or a wrong price scale; the "
            "bars count them in n_implausible_px (filter them out, or check the inputs)."
        ),
        stacklevel=2,
    )


def warn_ended_early(plan: IngestPlan, entries: Sequence[Json]) -> None:
    """Warn about trading days whose records end well before the session closes."""
    days = [e for e in entries if e.get("records_end_before_close_s") is not None]
    if not days:
        return
    shown = ", ".join(
        f"{e['trading_day']} ({int(e['records_end_before_close_s']) / 3600:.1f} h early)"
        for e in days[:3]
    ) + (" …" if len(days) > 3 else "")
    warnings.warn(
        FxStoreWarning(
            f"{plan.store_symbol}: the records of {len(days)} trading day(s) end well before the "
            f"session closes: {shown}, though their inputs' requests (the DBN metadata's end) "
            "asked for more: the inputs were cut inside those sessions (a download cut short "
            "on a record boundary), so their bars are "
            "of part of a session (the manifest's days say records_end_before_close_s). "
            "Download the missing part and re-run with --force."
        ),
        stacklevel=2,
    )


def warn_if_target_missed(plan: IngestPlan, entries: Sequence[Json]) -> None:
    """Warn when imbalance bars came out far from ``--target-bars-per-day``, and why."""
    bars = plan.bars
    days = [e for e in entries if int(e.get("n_bars", 0)) > 0]
    if not bars.is_imbalance or not days:
        return
    rate = sum(int(e["n_bars"]) for e in days) / len(days)
    target = bars.target_bars_per_day
    if 1 / _TARGET_FACTOR <= rate / target <= _TARGET_FACTOR:
        return
    reasons: dict[str, int] = {}
    for entry in days:
        for reason, count in dict(entry.get("close_reasons", {})).items():
            reasons[reason] = reasons.get(reason, 0) + int(count)
    total = sum(reasons.values()) or 1
    shares = ", ".join(f"{r} {reasons[r] / total:.0%}" for r in CLOSE_REASONS if reasons.get(r))
    limit = "max_trades" if rate < target else "min_trades"
    if reasons.get(limit, 0) / total >= 0.5:
        why = (
            f"most bars closed at their trade limit ({limit}), which --band {bars.band:g} "
            "sets from the day's trade rate: a wider band lets them follow the target"
        )
    else:
        trades = sum(int(e.get("n_kept", 0)) for e in days) / len(days)
        why = (
            "imbalance bars meet the target only at a steady trade rate and balanced flow; "
            f"with {trades:,.0f} records kept a day this is the rate the flow gave"
        )
    warnings.warn(
        FxStoreWarning(
            f"{plan.store_symbol}: {rate:.1f} bars per trading day against --target-bars-per-day "
            f"{target:g} (close reasons: {shares}); {why}."
        ),
        stacklevel=2,
    )
