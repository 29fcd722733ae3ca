"""The versions of bar series: listing (``fxstore info --versions``), reading one, and ``gc``.

Every ingest build is a version of its series (:mod:`fxstore.store` keeps them, ArcticDB's
versions are the model). Here they are listed with what they hold, read back by number or as
of a time (:meth:`fxstore.features.reader.FeatureStore.read_bars`), and pruned: ``gc`` keeps
the current version, every version an fxcache was built from (a cache's manifest references
it, as an ArcticDB snapshot does) and what its rules keep, and lists or deletes the rest.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from fxstore.ingest import Transition

from fxstore.errors import FxStoreError, InvalidInputError, SymbolNotFoundError
from fxstore.store import (
    BarVersion,
    bar_day_entries,
    bars_dir,
    delete_bar_versions,
    file_sha256,
    fxcache_dir,
    key_lock,
    list_bar_series,
    list_bar_versions,
    list_fxcache_keys,
    list_orphan_bar_folders,
    manifest_field,
    manifest_path,
    os_errors,
    read_bar_manifest,
    read_json,
    resolve_manifest_file,
)

__all__ = [
    "GcReport",
    "SeriesVersions",
    "VersionInfo",
    "bar_series",
    "gc",
    "list_versions",
    "parse_time_ns",
    "read_version",
]

_DURATION_RE: Final = re.compile(r"(\d+)([smhdw])")
_UNIT_S: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_time_ns(value: dt.datetime | dt.date | str, param: str) -> int:
    """A point in time as ns since the epoch, UTC.

    `value` is a ``datetime`` (naive: UTC), a ``date`` (its midnight UTC), an ISO 8601 string
    of either, or an age: a whole number of s, m, h, d or w before now ("30d").

    Examples
    --------
    >>> parse_time_ns("2024-06-01", "as_of")
    1717200000000000000
    """
    if isinstance(value, str):
        found = _DURATION_RE.fullmatch(value.strip())
        if found:
            age_s = int(found.group(1)) * _UNIT_S[found.group(2)]
            return time.time_ns() - age_s * 1_000_000_000
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError as err:
            raise InvalidInputError(
                f"`{param}` must be an ISO date or time (2024-06-01, 2024-06-01T12:00Z) or an "
                f"age (30d, 12h), was {value!r}."
            ) from err
    if not isinstance(value, dt.datetime):
        if not isinstance(value, dt.date):
            raise InvalidInputError(f"`{param}` must be a datetime, date or str, was {value!r}.")
        value = dt.datetime.combine(value, dt.time())
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def bar_series(
    root: Path, symbol: str, instrument_key: str | None = None, bar_key: str | None = None
) -> Path:
    """The folder of `symbol`'s bar series (the only one when a key is not given).

    Raises
    ------
    SymbolNotFoundError
        No bar series of that symbol and keys (lists the known).
    InvalidInputError
        Several series match and the keys do not pick one.
    """
    series = list_bar_series(root, symbol)
    found = [s for s in series if instrument_key in (None, s[1]) and bar_key in (None, s[2])]
    known = ", ".join(f"{i}/{b}" for _, i, b in series) or "none"
    if not found:
        want = f"{instrument_key or '*'}/{bar_key or '*'}"
        raise SymbolNotFoundError(
            f"No bars {want} for {symbol!r} in {root / 'bars'}; known: {known}. "
            "Run `fxstore ingest` first."
        )
    if len(found) > 1:
        raise InvalidInputError(
            f"{symbol!r} has {len(found)} bar series: {known}; pick one with instrument_key "
            "and bar_key."
        )
    return bars_dir(root, *found[0])


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One version of a bar series, as ``fxstore info --versions`` lists it."""

    version: int
    committed_at: str
    is_current: bool
    manifest_sha256: str
    n_bars: int
    #: Trading days with bars, the first and last of them (ISO dates, "" when none).
    n_days: int
    first_day: str
    last_day: str
    #: Keys of the fxcaches built from this version.
    fxcaches: tuple[str, ...]
    #: Why its manifest cannot be read ("" when it can).
    damaged: str = ""
    #: Records of its inputs in no bar that are neither MBP-10 nor symbol mappings (its
    #: manifest's ``n_records_passed_over``; 0 for a version that does not count them).
    n_records_passed_over: int = 0


@dataclass(frozen=True, slots=True)
class SeriesVersions:
    """The versions of one bar series, oldest first."""

    symbol: str
    instrument_key: str
    bar_key: str
    folder: Path
    versions: tuple[VersionInfo, ...]

    def format_text(self) -> str:
        """The versions as aligned lines, newest first."""
        lines = [f"{self.symbol} {self.instrument_key}/{self.bar_key} ({self.folder}):"]
        for v in reversed(self.versions):
            what = (
                f"DAMAGED: {v.damaged}"
                if v.damaged
                else f"{v.n_bars:,} bars, {v.n_days} days ({v.first_day} .. {v.last_day})"
            )
            if v.n_records_passed_over:
                what += f", {v.n_records_passed_over:,} records passed over (not MBP-10)"
            marks = ["current"] if v.is_current else []
            marks += [f"fxcache {key}" for key in v.fxcaches]
            tail = f"  [{', '.join(marks)}]" if marks else ""
            lines.append(
                f"  v{v.version:<4} {v.committed_at}  {what}  sha256 {v.manifest_sha256[:12]}{tail}"
            )
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """The versions as JSON data."""
        return {
            "symbol": self.symbol,
            "instrument_key": self.instrument_key,
            "bar_key": self.bar_key,
            "folder": str(self.folder),
            "versions": [asdict(v) for v in self.versions],
        }


def _cache_sources(root: Path, symbol: str) -> dict[tuple[str, str, str], list[str]]:
    """(instrument key, bar key, bar manifest SHA-256) → keys of the fxcaches built from it.

    A cache whose manifest cannot be read references nothing it could be read with.
    """
    found: dict[tuple[str, str, str], list[str]] = {}
    for key in list_fxcache_keys(root, symbol):
        try:
            source = read_json(manifest_path(fxcache_dir(root, symbol, key))).get("source")
        except FxStoreError:
            continue
        if isinstance(source, dict):
            ref = tuple(
                str(source.get(k)) for k in ("instrument_key", "bar_key", "manifest_sha256")
            )
            found.setdefault((ref[0], ref[1], ref[2]), []).append(key)
    return found


def _version_info(version: BarVersion, caches: Sequence[str]) -> VersionInfo:
    where = version.manifest
    try:
        manifest = read_bar_manifest(version)
        days = [d for d in manifest_field(manifest, "days", list, where) if isinstance(d, dict)]
        n_bars = [manifest_field(d, "n_bars", int, where) for d in days]
        with_bars = [str(d.get("trading_day")) for d, n in zip(days, n_bars, strict=True) if n]
        passed_over = manifest.get("n_records_passed_over", 0)
        damaged = ""
    except FxStoreError as err:
        n_bars, with_bars, damaged, passed_over = [], [], str(err), 0
    return VersionInfo(
        version=version.version,
        committed_at=version.committed_at,
        is_current=version.is_current,
        manifest_sha256=version.manifest_sha256,
        n_bars=sum(n_bars),
        n_days=len(with_bars),
        first_day=with_bars[0] if with_bars else "",
        last_day=with_bars[-1] if with_bars else "",
        fxcaches=tuple(caches),
        damaged=damaged,
        n_records_passed_over=passed_over if isinstance(passed_over, int) else 0,
    )


def list_versions(root: Path, symbol: str) -> list[SeriesVersions]:
    """Every bar series of `symbol` with its committed versions (``fxstore info --versions``).

    Raises
    ------
    SymbolNotFoundError
        `symbol` has no bar series (lists the symbols that have).
    """
    series = list_bar_series(root, symbol)
    if not series:
        known = ", ".join(sorted({s[0] for s in list_bar_series(root)})) or "none"
        raise SymbolNotFoundError(
            f"No bars for symbol {symbol!r} in {root / 'bars'}; known: {known}. "
            "Run `fxstore ingest` first."
        )
    caches = _cache_sources(root, symbol)
    listing = []
    for _, instrument_key, bar_key in series:
        folder = bars_dir(root, symbol, instrument_key, bar_key)
        versions = tuple(
            _version_info(v, caches.get((instrument_key, bar_key, v.manifest_sha256), []))
            for v in list_bar_versions(folder)
        )
        listing.append(SeriesVersions(symbol, instrument_key, bar_key, folder, versions))
    return listing


def _iso_day(value: dt.date | str | None, param: str) -> str | None:
    if value is None:
        return None
    try:
        day = dt.date.fromisoformat(value) if isinstance(value, str) else value
    except ValueError as err:
        raise InvalidInputError(f"`{param}` must be a date YYYY-MM-DD, was {value!r}.") from err
    if isinstance(day, dt.datetime) or not isinstance(day, dt.date):
        raise InvalidInputError(f"`{param}` must be a trading day (datetime.date), was {value!r}.")
    return day.isoformat()


def read_version(
    version: BarVersion,
    *,
    start: dt.date | str | None = None,
    end: dt.date | str | None = None,
    columns: Sequence[str] | None = None,
    verify: bool = True,
    fetch: Callable[[Path, str, Path], None] | None = None,
) -> pa.Table:
    """The bars of `version`, trading days `start` .. `end` (inclusive), in day order.

    Each day file is checked against its SHA-256 in the version's manifest when `verify`.
    `fetch` (file, SHA-256, manifest) makes each day file read local first: a lazy mirror
    of an ``s3://`` store downloads only the days asked for.
    The schema metadata ``b"fxstore_bar_version"`` holds the version, its commit time and its
    manifest's SHA-256.

    Raises
    ------
    InvalidInputError
        A bad date, a missing or changed day file, or an unknown column.
    SchemaError
        The manifest is malformed or names a file outside the version's folder.
    """
    first, last = _iso_day(start, "start"), _iso_day(end, "end")
    where = version.manifest
    manifest = read_bar_manifest(version)
    adjust = _adjustment(manifest)
    tables = []
    for day in bar_day_entries(manifest, where):
        if "file" not in day:
            continue  # a trading day without bars
        trading_day = manifest_field(day, "trading_day", str, where)
        if (first is not None and trading_day < first) or (last is not None and trading_day > last):
            continue
        path = resolve_manifest_file(where, manifest_field(day, "file", str, where))
        if fetch is not None:
            fetch(path, str(day.get("sha256")), where)
        if verify and (not path.is_file() or file_sha256(path) != day.get("sha256")):
            raise InvalidInputError(
                f"{path}: missing or changed since ingest (SHA-256 differs from {where}); "
                "re-run `fxstore ingest --force`."
            )
        with os_errors(path, "read"):
            table = pq.read_table(path)
        if adjust is not None:  # adj_* columns: a function of the version's transitions
            from fxstore.ingest import with_adjusted_prices

            table = with_adjusted_prices(table, *adjust)
        unknown = [c for c in columns or () if c not in table.schema.names]
        if unknown:
            raise InvalidInputError(
                f"no column {unknown[0]!r} in the bars of {version.folder}; they have: "
                f"{', '.join(table.schema.names)}."
            )
        tables.append(table.select(list(columns)) if columns is not None else table)
    meta = {
        "version": version.version,
        "committed_at": version.committed_at,
        "manifest_sha256": version.manifest_sha256,
    }
    if not tables:
        from fxstore.ingest import ADJUSTED_COLUMNS, BAR_SCHEMA

        full = BAR_SCHEMA
        if adjust is not None:
            for name in ADJUSTED_COLUMNS.values():
                full = full.append(pa.field(name, pa.float64()))
        schema = full if columns is None else pa.schema([full.field(c) for c in columns])
        tables = [schema.empty_table()]
    table = pa.concat_tables(tables)
    return table.replace_schema_metadata({b"fxstore_bar_version": json.dumps(meta).encode()})


def _adjustment(manifest: dict[str, Any]) -> tuple[list[Transition], str, str] | None:
    """The transitions and adjustment of a version built with --adjust; None without."""
    from fxstore.ingest import roll_of_manifest, transitions_from_manifest

    roll = roll_of_manifest(manifest)
    if roll.adjust == "none":
        return None
    return transitions_from_manifest(manifest), roll.adjust, roll.direction


# --- gc ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GcEntry:
    """A version folder gc deletes (or would), or a version it keeps and why."""

    folder: Path
    version: int
    n_bytes: int
    why: str


@dataclass(frozen=True, slots=True)
class GcReport:
    """What ``fxstore gc`` deleted, or would delete in a dry run."""

    root: Path
    dry_run: bool
    deleted: tuple[GcEntry, ...]
    kept: tuple[GcEntry, ...]

    def format_text(self) -> str:
        """One line per version deleted (or to delete) and kept, then the total."""
        verb = "would delete" if self.dry_run else "deleted"
        lines = [
            f"{verb} {e.folder} (v{e.version}, {e.n_bytes:,} bytes): {e.why}" for e in self.deleted
        ]
        lines += [f"kept {e.folder} (v{e.version}): {e.why}" for e in self.kept]
        total = sum(e.n_bytes for e in self.deleted)
        lines.append(f"{verb.capitalize()} {len(self.deleted)} versions, {total:,} bytes.")
        if self.dry_run and self.deleted:
            lines.append("Nothing was deleted: re-run with --delete to delete them.")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """The report as JSON data."""
        return {
            "root": str(self.root),
            "dry_run": self.dry_run,
            "deleted": [asdict(e) | {"folder": str(e.folder)} for e in self.deleted],
            "kept": [asdict(e) | {"folder": str(e.folder)} for e in self.kept],
        }


def _n_bytes(folder: Path) -> int:
    with os_errors(folder, "read"):
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _plan_series(
    folder: Path,
    cached: set[str],
    keep: int | None,
    older_than_ns: int | None,
) -> tuple[list[GcEntry], list[GcEntry]]:
    """The versions of one series to delete and to keep (with why), newest first."""
    delete, kept = [], []
    for rank, version in enumerate(reversed(list_bar_versions(folder))):
        if version.is_current:
            why = "the current version"
        elif version.manifest_sha256 in cached:
            why = "an fxcache was built from it (delete that cache first to free it)"
        elif keep is not None and rank < keep:
            why = f"among the {keep} newest"
        elif older_than_ns is not None and version.committed_ns >= older_than_ns:
            why = f"committed {version.committed_at}, not older than the limit"
        else:
            why = f"committed {version.committed_at}"
            delete.append(GcEntry(version.folder, version.version, _n_bytes(version.folder), why))
            continue
        kept.append(GcEntry(version.folder, version.version, 0, why))
    for orphan in list_orphan_bar_folders(folder):
        delete.append(
            GcEntry(orphan, int(orphan.name[1:]), _n_bytes(orphan), "no version names it")
        )
    return delete, kept


def gc(
    root: Path,
    *,
    symbol: str | None = None,
    keep: int | None = None,
    older_than_ns: int | None = None,
    dry_run: bool = True,
) -> GcReport:
    """Delete the old versions of bar series: those beyond the `keep` newest and/or committed
    before `older_than_ns` (both rules, when both are given).

    Never deleted: the current version of a series, and any version an fxcache was built from.
    With `dry_run` (the default) nothing is deleted: the report lists what would be.

    Raises
    ------
    InvalidInputError
        Neither rule given, or `keep` < 1.
    SymbolNotFoundError
        `symbol` has no bar series.
    """
    if keep is None and older_than_ns is None:
        raise InvalidInputError(
            "give --keep N or --older-than TIME (or both) to say what to delete."
        )
    if keep is not None and keep < 1:
        raise InvalidInputError(
            f"`keep` must be >= 1 (the current version is always kept), was {keep}."
        )
    series = list_bar_series(root, symbol)
    if symbol is not None and not series:
        raise SymbolNotFoundError(f"No bars for symbol {symbol!r} in {root / 'bars'}.")
    deleted, kept = [], []
    for name, instrument_key, bar_key in series:
        folder = bars_dir(root, name, instrument_key, bar_key)
        caches = _cache_sources(root, name)
        cached = {sha for (i, b, sha) in caches if (i, b) == (instrument_key, bar_key)}
        if dry_run:
            delete, keep_here = _plan_series(folder, cached, keep, older_than_ns)
        else:
            with key_lock(folder):  # decided and deleted under the lock: no build commits between
                delete, keep_here = _plan_series(folder, cached, keep, older_than_ns)
                numbers = [e.version for e in delete if e.why != "no version names it"]
                delete_bar_versions(folder, numbers)
        deleted += delete
        kept += keep_here
    return GcReport(root, dry_run, tuple(deleted), tuple(kept))
