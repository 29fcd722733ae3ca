"""What a store holds, for ``fxstore ls`` and ``fxstore info``: bar series and feature caches."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from fxstore.errors import FxStoreError, InvalidInputError, SymbolNotFoundError
from fxstore.features.definitions import FeatureSet
from fxstore.features.reader import FeatureStore
from fxstore.fxcache import FxCacheManifest, describe_truncated, truncated_inputs
from fxstore.store import (
    bars_dir,
    find_bar_version,
    fxcache_dir,
    list_bar_series,
    manifest_field,
    read_bar_manifest,
)

__all__ = [
    "BarSeriesInfo",
    "CacheFeatureSet",
    "CacheInfo",
    "StoreListing",
    "cache_featureset",
    "format_info",
    "list_store",
]

_EPOCH: Final = dt.date(1970, 1, 1)


def _iso(days: int) -> str:
    return (_EPOCH + dt.timedelta(days=days)).isoformat()


@dataclass(frozen=True, slots=True)
class BarSeriesInfo:
    """One bar series of the store (``bars/<symbol>/<instrument-key>/<bar-key>``)."""

    symbol: str
    instrument_key: str
    bar_key: str
    n_bars: int
    #: Trading days with bars, the first and last of them (ISO dates, "" when none).
    n_days: int
    first_day: str
    last_day: str
    #: The current version (``fxstore info SYMBOL --versions`` lists them all).
    version: int = 1


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """One feature cache of the store (``fxcache/<symbol>/<featureset-hash>``)."""

    symbol: str
    key: str
    bar_key: str
    n_rows: int
    n_features: int
    n_targets: int
    n_shards: int
    first_day: str
    last_day: str


@dataclass(frozen=True, slots=True)
class StoreListing:
    """What a store holds: bar series and feature caches (``fxstore ls``)."""

    root: Path
    bars: tuple[BarSeriesInfo, ...]
    caches: tuple[CacheInfo, ...]
    #: Bar series and caches whose manifest cannot be read: (folder, why), listed apart.
    damaged: tuple[tuple[Path, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        """The listing as JSON data."""
        return {
            "root": str(self.root),
            "bars": [asdict(b) for b in self.bars],
            "fxcache": [asdict(c) for c in self.caches],
            "damaged": [{"folder": str(f), "error": why} for f, why in self.damaged],
        }

    def format_text(self) -> str:
        """The listing as aligned text lines."""
        lines = [f"bars/ in {self.root}:"]
        lines += [
            f"  {b.symbol}  {b.instrument_key}/{b.bar_key}  {b.n_bars:,} bars, {b.n_days} days "
            f"({b.first_day} .. {b.last_day}), version {b.version}"
            for b in self.bars
        ] or ["  (none: run `fxstore ingest`)"]
        lines.append("fxcache/:")
        lines += [
            f"  {c.symbol}  {c.key}  {c.n_rows:,} rows, {c.n_features} features, "
            f"{c.n_targets} targets, {c.n_shards} shards ({c.first_day} .. {c.last_day}) "
            f"from {c.bar_key}"
            for c in self.caches
        ] or ["  (none: run `fxstore precompute`)"]
        if self.damaged:
            lines.append("damaged (left out above):")
            lines += [f"  {folder}  DAMAGED: {why}" for folder, why in self.damaged]
        return "\n".join(lines)


def _bar_info(root: Path, symbol: str, instrument_key: str, bar_key: str) -> BarSeriesInfo:
    current = find_bar_version(bars_dir(root, symbol, instrument_key, bar_key))
    where = current.manifest
    manifest = read_bar_manifest(current)
    days = [d for d in manifest_field(manifest, "days", list, where) if isinstance(d, dict)]
    n_bars = [manifest_field(d, "n_bars", int, where) for d in days]
    with_bars = [
        manifest_field(d, "trading_day", str, where)
        for d, n in zip(days, n_bars, strict=True)
        if n > 0
    ]
    return BarSeriesInfo(
        symbol=symbol,
        instrument_key=instrument_key,
        bar_key=bar_key,
        n_bars=sum(n_bars),
        n_days=len(with_bars),
        first_day=with_bars[0] if with_bars else "",
        last_day=with_bars[-1] if with_bars else "",
        version=current.version,
    )


def _cache_info(manifest: FxCacheManifest) -> CacheInfo:
    return CacheInfo(
        symbol=manifest.symbol,
        key=manifest.key,
        bar_key=str(_table(manifest.data, "source").get("bar_key", "?")),
        n_rows=manifest.n_rows,
        n_features=len(manifest.features),
        n_targets=len(manifest.targets),
        n_shards=len(manifest.shards),
        first_day=_iso(manifest.shards[0].first_trading_day) if manifest.shards else "",
        last_day=_iso(manifest.shards[-1].last_trading_day) if manifest.shards else "",
    )


def list_store(root: Path) -> StoreListing:
    """List the bar series and feature caches under `root` (``fxstore ls``).

    Raises
    ------
    Nothing: a bar series or cache whose manifest cannot be read is listed as damaged
    (with the error) and the others are listed as usual.
    """
    store = FeatureStore(root)
    caches, bars, damaged = [], [], []
    for symbol in store.list_symbols():
        for key in store.list_featuresets(symbol):
            try:
                caches.append(_cache_info(store.manifest(symbol, key)))
            except FxStoreError as err:
                damaged.append((fxcache_dir(root, symbol, key), str(err)))
    for series in list_bar_series(root):
        try:
            bars.append(_bar_info(root, *series))
        except FxStoreError as err:
            damaged.append((bars_dir(root, *series), str(err)))
    return StoreListing(root, tuple(bars), tuple(caches), tuple(damaged))


def _table(data: Mapping[str, object], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _params(definition: object) -> str:
    if not isinstance(definition, dict):
        return "?"
    if "expr" in definition:  # an expression feature: its canonical text
        from fxstore.features.expressions import node_from_json, unparse

        try:
            text = unparse(node_from_json(definition["expr"]))
        except FxStoreError:
            return "?"
        reset = definition.get("reset")
        return f"= {text}" + (f"  (reset {reset})" if reset not in (None, "none") else "")
    params = definition.get("params", {})
    inner = ", ".join(f"{k}={v}" for k, v in params.items()) if isinstance(params, dict) else ""
    return f"{definition.get('kind')}({inner})"


def format_info(manifest: FxCacheManifest) -> str:
    """A cache's manifest as text (``fxstore info``): source, rows, definitions, shards."""
    data = manifest.data
    featureset, source = _table(data, "featureset"), _table(data, "source")
    lines = [
        f"{manifest.symbol} fxcache {manifest.key} ({data.get('format')}, fxstore "
        f"{data.get('fxstore_version')})",
        f"  folder:   {manifest.folder}",
        f"  bars:     {source.get('instrument_key')}/{source.get('bar_key')}, "
        f"{data.get('n_bars', 0):,} bars, {manifest.bars_per_day:.1f} bars/day",
        f"  rows:     {manifest.n_rows:,} (warm-up dropped {data.get('warmup_rows_dropped')}, "
        f"tail dropped {data.get('tail_rows_dropped')}), {len(manifest.shards)} shards",
        f"  settings: {json.dumps(featureset.get('settings'), sort_keys=True)}",
    ]
    truncated = truncated_inputs(data)
    if truncated:
        lines.append("  warning:  " + describe_truncated("its bars", truncated))
    passed_over = source.get("n_records_passed_over")
    if isinstance(passed_over, int) and passed_over:
        lines.append(
            f"  inputs:   {passed_over:,} records passed over, in no bar (not MBP-10: their "
            "bar manifest's inputs give each rtype and why)"
        )
    for group, prefix in (("features", "f_"), ("targets", "target_")):
        definitions = featureset.get(group, [])
        lines.append(f"  {group} ({len(definitions)}):")
        lines += [f"    {prefix + str(d.get('name')):<20} {_params(d)}" for d in definitions]
    lines.append("  shards:")
    lines += [
        f"    {s.file:<16} {s.rows:>9,} rows  {_iso(s.first_trading_day)} .. "
        f"{_iso(s.last_trading_day)}  sha256 {s.sha256[:12]}"
        for s in manifest.shards
    ]
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class CacheFeatureSet:
    """The feature set that built an fxcache (``fxstore features show KEY``)."""

    symbol: str
    key: str
    #: The cache's manifest file.
    path: Path
    featureset: FeatureSet
    #: The key these definitions give today over the same bars: `key` unless the
    #: definitions' or a kind's version changed since the cache was built.
    key_now: str


def cache_featureset(root: Path, key: str, symbol: str | None = None) -> CacheFeatureSet:
    """The feature set recorded in the manifest of fxcache `key` (of `symbol`, or of the one
    symbol holding that key).

    Raises
    ------
    SymbolNotFoundError
        No cache `key` (of `symbol`); the message lists the keys there are.
    InvalidInputError
        Several symbols hold `key` and none was chosen, or the manifest records no valid
        feature set.
    """
    from fxstore.features.definitions import featureset_from_definition

    store = FeatureStore(root)
    if symbol is None:
        holders = [s for s in store.list_symbols() if key in store.list_featuresets(s)]
        if len(holders) > 1:
            raise InvalidInputError(
                f"fxcache {key!r} exists for {', '.join(holders)}; pick one with --symbol."
            )
        if not holders:
            known = [f"{s}/{k}" for s in store.list_symbols() for k in store.list_featuresets(s)]
            raise SymbolNotFoundError(
                f"No fxcache {key!r} in {root / 'fxcache'}; known: {', '.join(known) or 'none'}."
            )
        symbol = holders[0]
    manifest = store.manifest(symbol, key)
    definition = manifest.data.get("featureset")
    path = manifest.path
    where = str(path)
    if not isinstance(definition, dict) or not isinstance(definition.get("bars"), dict):
        raise InvalidInputError(f"{where}: the manifest does not record a feature set.")
    featureset = featureset_from_definition(definition, where)
    bars = definition["bars"]
    key_now = featureset.hash(
        instrument_key=str(bars.get("instrument_key")),
        bar_key=str(bars.get("bar_key")),
        bars_sha256=str(bars.get("manifest_sha256")),
    )
    return CacheFeatureSet(symbol, key, path, featureset, key_now)
