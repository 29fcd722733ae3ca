"""`fxstore precompute`: a symbol's bar series → features → its fxcache.

Reads ``bars/<SYMBOL>/<instrument-key>/<bar-key>/`` (every day file checked against the bar
manifest's SHA-256), computes the feature set (:func:`~fxstore.features.compute.compute_features`)
and writes ``fxcache/<SYMBOL>/<featureset-hash>/`` (:mod:`fxstore.fxcache`): a build (a first
one, or ``--force`` over a finished cache) writes its shards and, last, its manifest into a
staging folder beside the cache, then switches the two folders atomically
(:func:`fxstore.store.commit_fxcache`), so a reader sees the old cache or the new one, never a
mix, and a build that fails (disk full, a damaged day file, a kill) leaves the old cache whole
for the runs pinned to it. A lock file (carried into the new folder) serialises two writers.
The key covers the feature set and the bar series (its keys and manifest checksum), so other
bars never share a cache: a run whose bars, feature set and sharding are unchanged does
nothing unless ``force``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fxstore import __version__
from fxstore.config import FeatureConfig
from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError, SymbolNotFoundError
from fxstore.executor import open_ray_pool, require_ray
from fxstore.features.compute import FeatureFrame, compute_features
from fxstore.features.definitions import FeatureSet, resolve_featureset
from fxstore.features.inputs import REQUIRED_COLUMNS
from fxstore.fxcache import (
    FORMAT,
    ShardEntry,
    describe_truncated,
    split_shards,
    truncated_inputs,
    write_shard,
)
from fxstore.market.master import calendar_of_symbol

if TYPE_CHECKING:
    from fxstore.ingest import Transition
from fxstore.store import (
    atomic_write_json,
    bar_day_entries,
    bars_dir,
    bars_relpath,
    commit_fxcache,
    discard_fxcache_stage,
    file_sha256,
    find_bar_version,
    fxcache_dir,
    key_lock,
    list_bar_series,
    manifest_field,
    manifest_path,
    matches_manifest,
    os_errors,
    read_bar_manifest,
    read_json,
    resolve_manifest_file,
    stage_fxcache,
)

__all__ = ["BarSource", "PrecomputeSummary", "precompute", "read_bars", "resolve_bars"]

logger = logging.getLogger(__name__)

Json = dict[str, Any]
_VOL_INPUT: Final = "r_t: within-contract one-bar log return of the close (0 on a roll bar)"


@dataclass(frozen=True, slots=True)
class BarSource:
    """The bar series precompute reads."""

    folder: Path
    instrument_key: str
    bar_key: str
    #: The bar manifest as read, and the SHA-256 of its file.
    manifest: Json
    manifest_sha256: str
    #: The version of the bar series read (:func:`fxstore.store.find_bar_version`).
    version: int = 1


@dataclass(frozen=True, slots=True)
class PrecomputeSummary:
    """What :func:`precompute` did (or found already done)."""

    out_dir: Path
    #: The feature-set hash (the folder's name).
    key: str
    n_bars: int
    n_rows: int
    warmup_rows_dropped: int
    tail_rows_dropped: int
    n_features: int
    n_targets: int
    n_shards: int
    bars_per_day: float
    elapsed_s: float
    #: True when bars and feature set were unchanged and nothing was written.
    up_to_date: bool
    #: Truncated DBN inputs the bars were built from (their last days are incomplete).
    n_truncated_inputs: int = 0

    def format_text(self, where: str | None = None) -> str:
        """One line saying what was done (``fxstore precompute``); `where` names the fxcache
        in place of its local folder (an s3:// store's URL)."""
        where = where or str(self.out_dir)
        if self.up_to_date:
            return f"Up to date: {where} ({self.n_rows:,} rows); --force rebuilds."
        return (
            f"Precomputed {self.n_features} features and {self.n_targets} targets over "
            f"{self.n_bars:,} bars ({self.bars_per_day:.1f}/day): {self.n_rows:,} rows kept, "
            f"{self.warmup_rows_dropped} warm-up and {self.tail_rows_dropped} trailing bars "
            f"dropped, {self.n_shards} shards, in {self.elapsed_s:.1f} s -> {where}"
            + (
                f"; built from {self.n_truncated_inputs} truncated input(s), see the warning"
                if self.n_truncated_inputs
                else ""
            )
        )


def resolve_bars(store_root: Path, config: FeatureConfig) -> BarSource:
    """Find the bar series of `config` (the only bar key when none is given).

    Raises
    ------
    SymbolNotFoundError
        No finished bar series of that symbol, instrument key or bar key (lists the known).
    InvalidInputError
        Several bar keys and none chosen.
    """
    series = list_bar_series(store_root, config.symbol)
    if not series:
        known = sorted({s[0] for s in list_bar_series(store_root)})
        raise SymbolNotFoundError(
            f"No bars for symbol {config.symbol!r} in {store_root / 'bars'}; known: "
            f"{', '.join(known) or 'none'}. Run `fxstore ingest` first."
        )
    keys = [b for _, i, b in series if i == config.instrument_key]
    if config.bar_key is not None and config.bar_key not in keys:
        series_keys = ", ".join(f"{i}/{b}" for _, i, b in series)
        raise SymbolNotFoundError(
            f"No bars {config.instrument_key}/{config.bar_key} for {config.symbol!r}; "
            f"known: {series_keys}."
        )
    if not keys:
        instrument_keys = ", ".join(sorted({i for _, i, _ in series}))
        raise SymbolNotFoundError(
            f"No bars with instrument key {config.instrument_key!r} for {config.symbol!r}; "
            f"known: {instrument_keys}."
        )
    if config.bar_key is None and len(keys) > 1:
        raise InvalidInputError(
            f"{config.symbol!r} has {len(keys)} bar series under {config.instrument_key}: "
            f"{', '.join(keys)}; pick one with --bar-key."
        )
    bar_key = config.bar_key or keys[0]
    folder = bars_dir(store_root, config.symbol, config.instrument_key, bar_key)
    version = find_bar_version(folder)  # the current version
    manifest = read_bar_manifest(version)  # checked against its commit: never an edited one
    return BarSource(
        version.folder,
        config.instrument_key,
        bar_key,
        manifest,
        version.manifest_sha256,
        version.version,
    )


def contract_tick_size(manifest: Json, where: str) -> float:
    """The tick size of a bar series' contracts, from its manifest's contract facts.

    Outrights (instrument class 'F') decide when the manifest lists any; all must agree.

    Raises
    ------
    InvalidInputError
        No contract gives a tick size, or the contracts give several (`where` names the
        manifest; a feature set's [settings] tick_size is the way out).
    """
    contracts = manifest.get("contracts")
    facts = (
        [f for f in contracts.values() if isinstance(f, dict)]
        if isinstance(contracts, dict)
        else []
    )
    outrights = [f for f in facts if f.get("instrument_class") == "F"] or facts
    ticks = sorted({float(f["tick_size"]) for f in outrights if f.get("tick_size") is not None})
    if len(ticks) == 1:
        return ticks[0]
    found = "no contract gives one" if not ticks else f"its contracts give {ticks}"
    raise InvalidInputError(
        f"{where}: the bars' tick size is not known ({found}); set [settings] tick_size in a "
        "feature-set file (--features FILE.toml)."
    )


#: The price-level columns ``[settings] prices = "adjusted"`` replaces by adjusted ones.
ADJUSTED_INPUTS: Final = ("close", "vwap", "bid_px_00", "ask_px_00")


def read_bars(source: BarSource, prices: str = "raw") -> pa.Table:
    """The bar columns features need, every day file checked against its SHA-256.

    With `prices` "adjusted", the price levels (:data:`ADJUSTED_INPUTS`) are the bars'
    roll-adjusted ones, by the adjustment and transitions their manifest records.

    Raises
    ------
    InvalidInputError
        A day file is missing or changed since ingest, or the series has no bars; adjusted
        prices asked of bars ingested without ``--adjust``.
    SchemaError
        The bar manifest names a file outside the series folder, or a field of a day entry
        is missing or of another type.
    """
    adjust = _adjustment(source) if prices == "adjusted" else None
    tables = []
    where = manifest_path(source.folder)
    for day in bar_day_entries(source.manifest, where):
        if "file" not in day:
            continue  # a trading day without bars
        path = resolve_manifest_file(where, str(day["file"]))
        if not path.is_file() or file_sha256(path) != day.get("sha256"):
            raise InvalidInputError(
                f"{path}: missing or changed since ingest (SHA-256 differs from the bar "
                "manifest); re-run `fxstore ingest --force`."
            )
        with os_errors(path, "read"):
            table = pq.read_table(path, columns=list(REQUIRED_COLUMNS))
        tables.append(table if adjust is None else _adjusted(table, *adjust))
    if not tables:
        raise InvalidInputError(f"{source.folder}: the bar series has no bars.")
    return pa.concat_tables(tables)


def _adjustment(source: BarSource) -> tuple[list[Transition], str, str]:
    from fxstore.ingest import roll_of_manifest, transitions_from_manifest

    roll = roll_of_manifest(source.manifest)
    if roll.adjust == "none":
        raise InvalidInputError(
            f"{source.folder}: the feature set reads adjusted prices ([settings] prices = "
            "'adjusted') but these bars were ingested without --adjust; re-run `fxstore "
            "ingest` with --adjust difference or ratio, or set prices = 'raw'."
        )
    return transitions_from_manifest(source.manifest), roll.adjust, roll.direction


def _adjusted(
    table: pa.Table, transitions: list[Transition], method: str, direction: str
) -> pa.Table:
    """`table` with its price levels replaced by adjusted ones (nulls stay null)."""
    from fxstore.ingest import adjusted_column

    for name in ADJUSTED_INPUTS:
        column = adjusted_column(table, name, transitions, method, direction)
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table


def _bars_per_day(bars: pa.Table) -> float:
    """Bars per distinct CME trading day (the bars' ``trading_day``)."""
    days = bars.column("trading_day").to_numpy()
    return float(bars.num_rows / (1 + int(np.count_nonzero(days[1:] != days[:-1]))))


def _calendar(source: BarSource, config: FeatureConfig) -> str:
    """The calendar the bars were cut by (their manifest's; the symbol's for older series)."""
    recorded = source.manifest.get("calendar")
    if isinstance(recorded, dict) and isinstance(recorded.get("name"), str):
        return str(recorded["name"])
    return calendar_of_symbol(config.symbol)


def _stats(values: np.ndarray) -> dict[str, float]:
    data = values.astype(np.float64)
    return {
        "mean": float(data.mean()),
        "std": float(data.std()),
        "min": float(data.min()),
        "max": float(data.max()),
    }


def _normalisation(frame: FeatureFrame, featureset: FeatureSet) -> Json:
    """How each column was normalised (causally), and descriptive statistics of the rows.

    The statistics describe the stored rows; nothing was scaled with them (that would look
    ahead), they are for inspection and sanity checks.
    """
    settings = featureset.settings
    columns: Json = {}
    for prefix, defs, arrays in (
        ("f_", featureset.features, frame.features),
        ("target_", featureset.targets, frame.targets),
    ):
        for d in defs:
            column = prefix + d.name
            columns[column] = {
                "formula": d.spec.formula,
                "normalisation": d.spec.normalisation,
                **_stats(arrays[column]),
            }
    return {
        "vol_normaliser": {
            "input": _VOL_INPUT,
            "statistic": "rolling RMS over the past window_bars bars, floored at floor",
            "window_bars": settings.vol_window,
            "floor": settings.vol_floor,
            **_stats(frame.sigma),
            "last": float(frame.sigma[-1]),
        },
        "columns": columns,
    }


def _manifest(
    config: FeatureConfig,
    featureset: FeatureSet,
    source: BarSource,
    frame: FeatureFrame,
    key: str,
    extra: tuple[float, list[ShardEntry]],
) -> Json:
    bars_per_day, shards = extra
    definition = featureset.definition(
        instrument_key=source.instrument_key,
        bar_key=source.bar_key,
        bars_sha256=source.manifest_sha256,
    )
    return {
        "format": FORMAT,
        "symbol": config.symbol,
        "featureset": {"hash": key, **definition},
        "columns": {
            "flags": list(frame.flags),
            "market": list(frame.market),
            "features": list(frame.features),
            "targets": list(frame.targets),
        },
        "source": {
            "bars_dir": bars_relpath(config.symbol, source.instrument_key, source.bar_key),
            "instrument_key": source.instrument_key,
            "bar_key": source.bar_key,
            "bar_version": source.version,
            "manifest_sha256": source.manifest_sha256,
            "truncated_inputs": _truncated(source),
            # records of the inputs in no bar, neither MBP-10 nor symbol mappings
            "n_records_passed_over": source.manifest.get("n_records_passed_over", 0),
            # the instrument master's facts the bars were built with: what PnL is booked at
            "contracts": source.manifest.get("contracts", {}),
        },
        "bars_per_day": bars_per_day,
        "n_bars": frame.n_bars,
        "n_rows": frame.n_rows,
        "warmup_rows_dropped": frame.warmup_rows_dropped,
        "tail_rows_dropped": frame.tail_rows_dropped,
        "max_target_horizon_bars": featureset.max_target_horizon,
        "normalisation": _normalisation(frame, featureset),
        "shard_by": config.shard_by,
        "shards": [s.to_json() for s in shards],
        "fxstore_version": __version__,
    }


def _existing(out_dir: Path, source: BarSource, config: FeatureConfig) -> Json | None:
    """The manifest of a finished cache built from the same bars and sharding, else None."""
    path = manifest_path(out_dir)
    with os_errors(path, "read"):
        if not path.is_file():
            return None
    manifest: Json = read_json(path)
    same = (
        manifest.get("format") == FORMAT
        and manifest.get("shard_by") == config.shard_by
        and isinstance(manifest.get("source"), dict)
        and manifest["source"].get("manifest_sha256") == source.manifest_sha256
    )
    try:
        shards = [ShardEntry.from_json(s, path) for s in manifest.get("shards") or []]
    except SchemaError:
        return None
    files = [resolve_manifest_file(path, s.file) for s in shards]
    complete = same and all(
        matches_manifest(f, path, s.sha256, s.bytes) for f, s in zip(files, shards, strict=True)
    )
    return manifest if shards and complete else None


def _truncated(source: BarSource) -> list[Json]:
    """The bar manifest's truncated inputs (see ``ingest``'s manifest), for the cache's."""
    found = []
    for entry in source.manifest.get("inputs") or []:
        cut = entry.get("truncated") if isinstance(entry, dict) else None
        if isinstance(cut, dict):
            found.append({"name": entry.get("name"), **cut})
    return found


def _summary(out_dir: Path, manifest: Json, started: float, up_to_date: bool) -> PrecomputeSummary:
    where = manifest_path(out_dir)
    columns = manifest_field(manifest, "columns", dict, where)
    truncated = truncated_inputs(manifest)
    if truncated:
        warnings.warn(FxStoreWarning(describe_truncated(str(out_dir), truncated)), stacklevel=3)
    return PrecomputeSummary(
        out_dir=out_dir,
        key=out_dir.name,
        n_bars=manifest_field(manifest, "n_bars", int, where),
        n_rows=manifest_field(manifest, "n_rows", int, where),
        warmup_rows_dropped=manifest_field(manifest, "warmup_rows_dropped", int, where),
        tail_rows_dropped=manifest_field(manifest, "tail_rows_dropped", int, where),
        n_features=len(manifest_field(columns, "features", list, where)),
        n_targets=len(manifest_field(columns, "targets", list, where)),
        n_shards=len(manifest_field(manifest, "shards", list, where)),
        bars_per_day=manifest_field(manifest, "bars_per_day", float, where),
        elapsed_s=time.perf_counter() - started,
        up_to_date=up_to_date,
        n_truncated_inputs=len(truncated),
    )


def _write_shards(
    out_dir: Path, frame: FeatureFrame, config: FeatureConfig, key: str
) -> list[ShardEntry]:
    """Write every shard of `frame` into the (fresh, staging) folder `out_dir`."""
    table = frame.to_table()
    made_by = {"stage": "precompute", "symbol": config.symbol, "featureset": key}
    metadata = {b"fxstore": json.dumps(made_by | {"version": __version__}).encode()}
    return [
        write_shard(out_dir / name, table.slice(lo, hi - lo), metadata)
        for name, lo, hi in split_shards(frame.trading_day, config.shard_by)
    ]


@dataclass(frozen=True, slots=True)
class CacheTask:
    """One fxcache to build: the unit of work of precompute (a whole bar series, since the
    features are causal over it: a rolling window carries from day to day)."""

    config: FeatureConfig
    featureset: FeatureSet
    source: BarSource
    key: str
    #: Where the shards go: the staging folder beside the cache (:func:`stage_fxcache`).
    out_dir: Path
    calendar: str

    def describe(self) -> str:
        return f"precompute of {self.config.symbol} into {self.out_dir}"


def build_cache(task: CacheTask) -> Json:
    """Read the bars, compute the features, write the shards; return the manifest to commit
    (in this process, or in a Ray task: the driver writes it)."""
    bars = read_bars(task.source, task.featureset.settings.prices)
    frame = compute_features(bars, task.featureset, calendar=task.calendar)
    shards = _write_shards(task.out_dir, frame, task.config, task.key)
    extra = (_bars_per_day(bars), shards)
    manifest = _manifest(task.config, task.featureset, task.source, frame, task.key, extra)
    runs = contract_runs(bars, frame, task.source)
    if runs is not None:
        manifest["source"]["contract_runs"] = runs
    return manifest


def contract_runs(
    bars: pa.Table, frame: FeatureFrame, source: BarSource
) -> list[list[object]] | None:
    """``[first row, raw symbol]`` of each contract's run of the frame's rows (the first at
    row 0, each later one at a roll): what books each row at its own contract's facts. The
    symbol is the one the bar manifest's day lists for the run's first bar's instrument id
    (else the day's one contract). None when a run's contract is not known that way.
    """
    lo = frame.warmup_rows_dropped
    ids = bars.column("instrument_id").to_numpy()[lo : lo + frame.n_rows]
    starts = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist()]
    where = manifest_path(source.folder)
    days = {str(d["trading_day"]): d for d in bar_day_entries(source.manifest, where)}
    runs: list[list[object]] = []
    for row in starts:
        day = days.get(str(np.datetime64(int(frame.trading_day[row]), "D")), {})
        listed = day.get("listed")
        contract = str(day.get("contract", ""))
        raw = listed.get(str(ids[row])) if isinstance(listed, dict) else None
        if not isinstance(raw, str):
            raw = contract if contract and "," not in contract else None
        if raw is None:
            return None
        runs.append([row, raw])
    return runs


def _run_cache_task(task: CacheTask) -> Json:
    """:func:`build_cache` here, or as one Ray task with ``--executor ray`` (paths made
    absolute: a Ray worker may run in another folder or on another node)."""
    if not task.config.executor.is_ray:
        return build_cache(task)
    source = dataclasses.replace(task.source, folder=task.source.folder.absolute())
    remote = dataclasses.replace(task, source=source, out_dir=task.out_dir.absolute())
    with open_ray_pool(task.config.executor, 1) as pool:
        (manifest,) = pool.map(build_cache, [remote])
    return manifest


def precompute(config: FeatureConfig, store_root: Path) -> PrecomputeSummary:
    """Compute `config.features` over a bar series and write the symbol's fxcache.

    Parameters
    ----------
    config
        Symbol, bar series, feature set (None: the default set), sharding, force.
    store_root
        The store root (holds ``bars/`` and ``fxcache/``).

    Returns
    -------
    PrecomputeSummary
        Where the cache is and what it holds; ``up_to_date`` when nothing had to be done.

    Raises
    ------
    SymbolNotFoundError, InvalidInputError
        No such bar series, a changed day file, too few bars, a non-finite value (named
        with its bar).
    SchemaError
        The bars are not one continuous series in ``ts_close`` order.
    """
    started = time.perf_counter()
    if config.executor.is_ray:
        require_ray()  # before anything is read or written
    source = resolve_bars(store_root, config)
    featureset = resolve_featureset(config.features)
    if featureset.settings.tick_size is None:  # the instrument master's, via the bars
        where = str(source.folder / "manifest.json")
        featureset = featureset.with_tick_size(contract_tick_size(source.manifest, where))
    key = featureset.hash(
        instrument_key=source.instrument_key,
        bar_key=source.bar_key,
        bars_sha256=source.manifest_sha256,
    )
    out_dir = fxcache_dir(store_root, config.symbol, key)
    # Up to date needs no lock: a read-only store (or a teammate's) is read as it is.
    existing = None if config.force else _existing(out_dir, source, config)
    if existing is not None:
        logger.info("fxcache %s is up to date", out_dir)
        return _summary(out_dir, existing, started, up_to_date=True)
    with key_lock(out_dir):
        existing = None if config.force else _existing(out_dir, source, config)
        if existing is not None:  # another process finished it while we waited for the lock
            return _summary(out_dir, existing, started, up_to_date=True)
        stage = stage_fxcache(out_dir)  # beside the cache: until the switch it stays whole
        task = CacheTask(config, featureset, source, key, stage, _calendar(source, config))
        try:
            manifest = _run_cache_task(task)
            atomic_write_json(manifest_path(stage), manifest)
        except BaseException:
            discard_fxcache_stage(stage)
            raise
        commit_fxcache(stage, out_dir)
    n_shards = len(manifest["shards"])
    logger.info("wrote %d rows in %d shards to %s", manifest["n_rows"], n_shards, out_dir)
    return _summary(out_dir, manifest, started, up_to_date=False)
