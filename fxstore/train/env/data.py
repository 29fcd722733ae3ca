"""The training data path: a symbol's fxcache opened as a :class:`~fxstore.train.env.market.Market`.

Backtests (:mod:`fxstore.train.evaluate.results`) and training (:mod:`fxstore.train.loop`) both read
their rows through :func:`open_cache`: the loader maps the shards (format checks in
:mod:`fxstore.fxcache`, paths from :mod:`fxstore.store`), and the run records the cache's key,
manifest checksum and longest target horizon.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError
from fxstore.fxcache import REDO, describe_truncated, truncated_inputs
from fxstore.store import (
    bars_dir,
    file_sha256,
    find_bar_version,
    list_bar_versions,
    manifest_field,
    manifest_path,
    read_bar_manifest,
)

if TYPE_CHECKING:
    from fxstore.train.env.loader import DeviceName
    from fxstore.train.env.market import Market

__all__ = ["CachedMarket", "bar_contracts", "open_cache"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CachedMarket:
    """An fxcache's rows as a Market, and the facts a run records about the cache."""

    market: Market
    key: str
    """Feature-set hash (the fxcache folder name)."""
    manifest_sha256: str
    horizon: int
    """Longest target horizon in bars: the least gap between walk-forward slices."""
    ts_close: npt.NDArray[np.int64]
    """int64 ``(n_rows,)`` on the host: each row's bar close, ns UTC (for the oracle)."""
    contracts: Mapping[str, Mapping[str, object]] | None = None
    """The facts of the bars' contracts (raw symbol -> multiplier, tick size, ... as ingest
    used them), from the bar manifest the cache was built from; None for a cache that names
    no bar series (:func:`~fxstore.train.env.market.contract_spec` then uses the table)."""

    def to_json(self, symbol: str) -> dict[str, object]:
        """The facts for a run's ``config.json``."""
        return {
            "symbol": symbol,
            "key": self.key,
            "manifest_sha256": self.manifest_sha256,
            "n_rows": self.market.n_rows,
            "bars_per_day": self.market.bars_per_day,
            "max_target_horizon_bars": self.horizon,
        }


def open_cache(
    root: Path, symbol: str, featureset: str | None, device: DeviceName = "cpu"
) -> CachedMarket:
    """Open `symbol`'s fxcache on `device` as a :class:`CachedMarket`.

    Raises
    ------
    SymbolNotFoundError, InvalidInputError, SchemaError
        See :func:`~fxstore.train.env.loader.open_fxcache`; also a manifest without the
        feature-set hash or ``max_target_horizon_bars``.
    """
    from fxstore.train.env.loader import open_fxcache
    from fxstore.train.env.market import market_from_view
    from fxstore.train.gpu.xp import to_host

    with open_fxcache(root, symbol, featureset=featureset, device=device) as view:
        market = market_from_view(view)
        manifest, folder = view.manifest, view.folder
        ts_close = np.concatenate([to_host(p) for p in view.columns["ts_close"]])
    truncated = truncated_inputs(manifest)
    if truncated:
        warnings.warn(FxStoreWarning(describe_truncated(str(folder), truncated)), stacklevel=2)
    definition = manifest.get("featureset")
    key = definition.get("hash") if isinstance(definition, dict) else None
    horizon = manifest.get("max_target_horizon_bars")
    if not isinstance(key, str) or not isinstance(horizon, int) or horizon < 0:
        raise InvalidInputError(
            f"the fxcache manifest of {symbol!r} has no featureset hash or "
            f"max_target_horizon_bars; {REDO}."
        )
    return CachedMarket(
        market,
        key,
        file_sha256(manifest_path(folder)),
        horizon,
        ts_close.astype(np.int64),
        bar_contracts(root, symbol, manifest, manifest_path(folder)),
    )


def bar_contracts(
    root: Path, symbol: str, manifest: Mapping[str, object], where: Path
) -> dict[str, Mapping[str, object]] | None:
    """The contract facts of the bars an fxcache (its `manifest`, read from `where`) was
    built from: those precompute copied into its ``source`` (so a machine holding only the
    fxcache books right), else the ``contracts`` of that bar version's manifest, checked
    against the SHA-256 the cache and the version's commit recorded. None when the cache
    names no bar series. Warns when the series has other bars now.

    Raises
    ------
    SymbolNotFoundError
        The bar version is gone.
    SchemaError
        The version holds other bars than the cache was built from, its manifest was edited
        after its commit, or it has no ``contracts``.
    """
    source = manifest.get("source")
    if not isinstance(source, Mapping) or "bar_version" not in source:
        return None
    keys = [manifest_field(source, k, str, where) for k in ("instrument_key", "bar_key")]
    number = manifest_field(source, "bar_version", int, where)
    sha256 = manifest_field(source, "manifest_sha256", str, where)
    series = bars_dir(root, symbol, *keys)
    versions = list_bar_versions(series)  # none where only the fxcache was copied or pulled
    current = next((v for v in versions if v.is_current), None)
    if current is not None and current.manifest_sha256 != sha256:
        warnings.warn(
            FxStoreWarning(
                f"{where.parent}: built from version {number} of {series}, which has other "
                f"bars now (version {current.version}, ingested since): this trades the older "
                "bars; run `fxstore precompute` to trade the current ones."
            ),
            stacklevel=3,
        )
    recorded = source.get("contracts")
    if isinstance(recorded, dict) and all(isinstance(v, dict) for v in recorded.values()):
        return recorded
    version = find_bar_version(series, version=number)
    if version.manifest_sha256 != sha256:
        raise SchemaError(
            f"{where}: built from version {number} of {version.folder.parent} with manifest "
            f"SHA-256 {sha256}, but that version is now {version.manifest_sha256}; {REDO}."
        )
    contracts = read_bar_manifest(version).get("contracts")
    if not isinstance(contracts, dict) or not all(isinstance(v, dict) for v in contracts.values()):
        raise SchemaError(
            f"{version.manifest}: field `contracts` must map each contract to its facts; the "
            "manifest is damaged or was edited: re-run `fxstore ingest --force`."
        )
    return contracts
