"""Reading feature caches back: ``fxstore.open(root)``.

:class:`FeatureStore` reads like a mapping of symbols (ArcticDB's ``Library`` over a root):
``store["ES.FUT"].read(start="2024-03-01")`` returns a zero-copy pyarrow Table over the
memory-mapped shards, each checked against its manifest checksum first.
``store.read_bars("ES.FUT", version=2)`` (or ``as_of=``) reads a version of the bar series.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict, Unpack, cast

import numpy as np
import pyarrow as pa

from fxstore.errors import InvalidInputError, SymbolNotFoundError
from fxstore.features.versions import (
    SeriesVersions,
    bar_series,
    list_versions,
    parse_time_ns,
    read_version,
)
from fxstore.fxcache import FxCacheManifest, ShardEntry, read_entry, read_manifest
from fxstore.store import (
    bars_dir,
    find_bar_version,
    fxcache_dir,
    list_fxcache_keys,
    list_fxcache_symbols,
    read_json,
)

if TYPE_CHECKING:
    import polars as pl

__all__ = ["FeatureStore", "ReadOptions", "SymbolCache"]

logger = logging.getLogger(__name__)

_EPOCH: Final = dt.date(1970, 1, 1)


def _trading_day(value: dt.date | str | None, param: str) -> int | None:
    """A trading-day bound as days since 1970-01-01."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = dt.date.fromisoformat(value)
        except ValueError as err:
            raise InvalidInputError(f"`{param}` must be a date YYYY-MM-DD, was {value!r}.") from err
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise InvalidInputError(f"`{param}` must be a trading day (datetime.date), was {value!r}.")
    return (value - _EPOCH).days


def _read_days(
    manifest: FxCacheManifest, entry: ShardEntry, days: tuple[int | None, int | None], verify: bool
) -> pa.Table:
    """The rows of one shard whose trading day is within `days` (inclusive; None: open)."""
    table = read_entry(manifest, entry, verify=verify)
    logger.debug("read shard %s (%d rows)", manifest.shard_path(entry), table.num_rows)
    first, last = days
    day = table.column("trading_day").chunk(0).to_numpy()
    lo = 0 if first is None else int(np.searchsorted(day, first, side="left"))
    hi = len(day) if last is None else int(np.searchsorted(day, last, side="right"))
    return table.slice(lo, hi - lo)


def _with_back_adjusted(table: pa.Table, root: Path, manifest: FxCacheManifest) -> pa.Table:
    """`table` with ``mkt_close_adj``: ``mkt_close`` difference-adjusted backward by the roll
    gaps of the bar version the cache was built from (the gaps of its bars' ``adj_close``)."""
    from fxstore.ingest import adjusted_column, roll_of_manifest, transitions_from_manifest

    source = manifest.data.get("source")
    source = source if isinstance(source, dict) else {}
    try:
        ik, bk = str(source["instrument_key"]), str(source["bar_key"])
        number = int(source["bar_version"])
    except (KeyError, TypeError, ValueError) as err:
        raise InvalidInputError(
            f"{manifest.path}: back_adjust needs the bar version the cache was built from, and "
            "its manifest does not say it; rebuild it with `fxstore precompute --force`."
        ) from err
    version = find_bar_version(bars_dir(root, manifest.symbol, ik, bk), version=number)
    bars = read_json(version.manifest)
    roll = roll_of_manifest(bars)
    if "transitions" not in bars or roll.adjust == "none":
        raise InvalidInputError(
            f"{version.folder}: back_adjust uses the roll gaps the bars record, and these bars "
            "were ingested without --adjust (their rolls are not priced); re-run `fxstore "
            "ingest` with --adjust difference, then `fxstore precompute`."
        )
    featureset = manifest.data.get("featureset")
    settings = featureset.get("settings") if isinstance(featureset, dict) else None
    if isinstance(settings, dict) and settings.get("prices") == "adjusted":
        if (roll.adjust, roll.direction) != ("difference", "backward"):
            raise InvalidInputError(
                f"{manifest.path}: its mkt_close is adjusted already ({roll.adjust}, "
                f"{roll.direction}); back_adjust gives the backward difference adjustment of "
                "raw closes: read a cache of prices = 'raw'."
            )
        return table.append_column("mkt_close_adj", table.column("mkt_close").cast(pa.float64()))
    transitions = transitions_from_manifest(bars)
    adjusted = adjusted_column(table, "mkt_close", transitions, "difference", "backward")
    return table.append_column("mkt_close_adj", adjusted)


class FeatureStore(Mapping[str, "SymbolCache"]):
    """The feature caches under one store root, read like a mapping of symbols.

    ``store["ES.FUT"]`` is a :class:`SymbolCache`; iterating yields the symbols that have at
    least one complete fxcache.

    Examples
    --------
    >>> store = fxstore.open("data")  # doctest: +SKIP
    >>> table = store.read("ES.FUT", start="2024-03-01", columns=["ts_close", "f_ret_1"])
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fetch: Callable[[Path, str, Path], None] | None = None,
    ) -> None:
        self.root = Path(root)
        #: A lazy mirror of an ``s3://`` store: makes a file listed by a manifest (file,
        #: SHA-256, manifest) local before it is read (:func:`fxstore.remote.open_reader`).
        self._fetch = fetch

    def __repr__(self) -> str:
        return f"FeatureStore({str(self.root)!r})"

    def __getitem__(self, symbol: str) -> SymbolCache:
        if not self.has_symbol(symbol):
            raise KeyError(symbol)
        return SymbolCache(self, symbol)

    def __iter__(self) -> Iterator[str]:
        return iter(self.list_symbols())

    def __len__(self) -> int:
        return len(self.list_symbols())

    def __contains__(self, symbol: object) -> bool:
        return isinstance(symbol, str) and self.has_symbol(symbol)

    def has_symbol(self, symbol: str) -> bool:
        """Whether `symbol` has at least one complete fxcache."""
        try:
            return bool(self.list_featuresets(symbol))
        except InvalidInputError:
            return False

    def list_symbols(self) -> list[str]:
        """Symbols with at least one complete fxcache, sorted."""
        return list_fxcache_symbols(self.root)

    def list_featuresets(self, symbol: str) -> list[str]:
        """Feature-set hashes of `symbol` with a complete cache, most recently written first."""
        return list_fxcache_keys(self.root, symbol)

    def manifest(self, symbol: str, featureset: str | None = None) -> FxCacheManifest:
        """The manifest of `symbol`'s cache `featureset` (default: the latest written).

        Raises
        ------
        SymbolNotFoundError
            `symbol` has no cache, or none with hash `featureset` (the message lists them).
        """
        keys = self.list_featuresets(symbol)
        if not keys:
            known = ", ".join(self.list_symbols()) or "none"
            raise SymbolNotFoundError(
                f"No fxcache for symbol {symbol!r} in {self.root}; known: {known}. "
                f"Run `fxstore precompute --symbol {symbol}` first."
            )
        if featureset is not None and featureset not in keys:
            raise SymbolNotFoundError(
                f"No fxcache {featureset!r} for {symbol!r}; known: {', '.join(keys)}."
            )
        return read_manifest(fxcache_dir(self.root, symbol, featureset or keys[0]), symbol)

    def read(
        self,
        symbol: str,
        *,
        featureset: str | None = None,
        start: dt.date | str | None = None,
        end: dt.date | str | None = None,
        columns: Sequence[str] | None = None,
        verify: bool = True,
        back_adjust: bool = False,
    ) -> pa.Table:
        """Read `symbol`'s cache rows of trading days `start` .. `end` (inclusive).

        Parameters
        ----------
        symbol
            Store symbol, continuous (e.g. "ES.FUT").
        featureset
            Feature-set hash; None reads the most recently written cache.
        start, end
            First and last trading day (``datetime.date`` or "YYYY-MM-DD"); None: unbounded.
        columns
            Columns to return, in this order; None: every column in file order.
        verify
            Check each shard read against its SHA-256 in the manifest.
        back_adjust
            Add ``mkt_close_adj`` (float64): ``mkt_close`` back-adjusted by differences with
            the roll gaps of the bars the cache was built from, so it equals their
            ``adj_close`` under ``--adjust difference``: each roll's gap is the new contract's
            last trade minus the old one's on the trading day before the switch (known at the
            session open that switches), added to every bar before the roll; the last
            contract is unchanged (:mod:`fxstore.ingest.select.transitions`). It uses later
            rolls: never a model input, for charts and P&L checks. Needs bars ingested with
            ``--adjust``.

        Returns
        -------
        pyarrow.Table
            Zero-copy over the memory-mapped shards (one chunk per shard); its schema
            metadata ``b"fxcache_manifest"`` holds the manifest JSON.

        Raises
        ------
        SymbolNotFoundError, InvalidInputError, SchemaError
            No such cache; an unknown column or bad date; a damaged or malformed shard.
        """
        manifest = self.manifest(symbol, featureset)
        first, last = _trading_day(start, "start"), _trading_day(end, "end")
        schema = manifest.schema()
        names = list(columns) if columns is not None else list(schema.names)
        unknown = [n for n in names if n not in schema.names]
        if unknown:
            raise InvalidInputError(
                f"no column {unknown[0]!r} in the fxcache of {symbol!r}; it has: "
                f"{', '.join(schema.names)}."
            )
        tables = [schema.empty_table()]
        for entry in manifest.shards:
            if (first is None or entry.last_trading_day >= first) and (
                last is None or entry.first_trading_day <= last
            ):
                if self._fetch is not None:
                    self._fetch(manifest.shard_path(entry), entry.sha256, manifest.path)
                tables.append(_read_days(manifest, entry, (first, last), verify))
        table = pa.concat_tables(tables)
        if back_adjust:
            table = _with_back_adjusted(table, self.root, manifest)
            names.append("mkt_close_adj")
        metadata = {b"fxcache_manifest": json.dumps(manifest.data, sort_keys=True).encode()}
        return table.select(names).replace_schema_metadata(metadata)

    def read_bars(
        self,
        symbol: str,
        *,
        instrument_key: str | None = None,
        bar_key: str | None = None,
        version: int | None = None,
        as_of: dt.datetime | dt.date | str | None = None,
        start: dt.date | str | None = None,
        end: dt.date | str | None = None,
        columns: Sequence[str] | None = None,
        verify: bool = True,
    ) -> pa.Table:
        """Read `symbol`'s bars: the current version, or `version`, or the one current at `as_of`.

        Parameters
        ----------
        symbol
            Store symbol, continuous (e.g. "ES.FUT").
        instrument_key, bar_key
            The bar series; None: the only one of `symbol`.
        version
            A committed version number (``fxstore info SYMBOL --versions`` lists them).
        as_of
            A time (``datetime``, naive: UTC; ``date``: its midnight UTC; ISO string; or an
            age such as "7d"): the version that was current then, as in ArcticDB.
        start, end
            First and last trading day (``datetime.date`` or "YYYY-MM-DD"); None: unbounded.
        columns
            Columns to return, in this order; None: every bar column.
        verify
            Check each day file read against its SHA-256 in the version's manifest.

        Returns
        -------
        pyarrow.Table
            The bars in day order; schema metadata ``b"fxstore_bar_version"`` names the version.

        Raises
        ------
        SymbolNotFoundError, InvalidInputError, SchemaError
            No such series or version, both `version` and `as_of`, a bad date or column, a
            damaged day file or manifest.

        Examples
        --------
        >>> store.read_bars("ES.FUT", version=2, start="2024-03-01")  # doctest: +SKIP
        """
        folder = bar_series(self.root, symbol, instrument_key, bar_key)
        as_of_ns = None if as_of is None else parse_time_ns(as_of, "as_of")
        found = find_bar_version(folder, version=version, as_of_ns=as_of_ns)
        return read_version(
            found, start=start, end=end, columns=columns, verify=verify, fetch=self._fetch
        )

    def list_bar_versions(self, symbol: str) -> list[SeriesVersions]:
        """Every bar series of `symbol` with its committed versions, oldest first."""
        return list_versions(self.root, symbol)

    def read_polars(
        self,
        symbol: str,
        *,
        featureset: str | None = None,
        start: dt.date | str | None = None,
        end: dt.date | str | None = None,
        columns: Sequence[str] | None = None,
        verify: bool = True,
        back_adjust: bool = False,
    ) -> pl.DataFrame:
        """:meth:`read` as a polars DataFrame (same parameters and errors)."""
        import polars as pl

        table = self.read(
            symbol,
            featureset=featureset,
            start=start,
            end=end,
            columns=columns,
            verify=verify,
            back_adjust=back_adjust,
        )
        return cast("pl.DataFrame", pl.from_arrow(table, rechunk=False))


class ReadOptions(TypedDict, total=False):
    """Keyword arguments of :meth:`FeatureStore.read`."""

    featureset: str | None
    start: dt.date | str | None
    end: dt.date | str | None
    columns: Sequence[str] | None
    verify: bool
    back_adjust: bool


@dataclass(frozen=True, slots=True)
class SymbolCache:
    """One symbol of a :class:`FeatureStore`: its feature sets and reads."""

    store: FeatureStore
    symbol: str

    @property
    def featuresets(self) -> list[str]:
        """Feature-set hashes with a complete cache, most recently written first."""
        return self.store.list_featuresets(self.symbol)

    def manifest(self, featureset: str | None = None) -> FxCacheManifest:
        """See :meth:`FeatureStore.manifest`."""
        return self.store.manifest(self.symbol, featureset)

    def read(self, **options: Unpack[ReadOptions]) -> pa.Table:
        """See :meth:`FeatureStore.read` (the same keyword arguments)."""
        return self.store.read(self.symbol, **options)

    def read_polars(self, **options: Unpack[ReadOptions]) -> pl.DataFrame:
        """See :meth:`FeatureStore.read_polars` (the same keyword arguments)."""
        return self.store.read_polars(self.symbol, **options)
