"""fxstore.train.env.data: an fxcache opened as a Market, with the facts a run records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.store import file_sha256, manifest_path
from fxstore.train.env.data import open_cache
from tests.train._fxcache import FEATURESET, SYMBOL, Fxcache

pytestmark = pytest.mark.quick


def test_open_cache_records_key_manifest_checksum_and_horizon(cache: Fxcache) -> None:
    cached = open_cache(cache.root, SYMBOL, None)

    assert (cached.key, cached.horizon, cached.market.n_rows) == (FEATURESET, 8, 1500)
    assert cached.manifest_sha256 == file_sha256(manifest_path(cache.folder))
    assert cached.to_json(SYMBOL)["max_target_horizon_bars"] == 8


def test_open_cache_without_horizon_says_rerun_precompute(cache: Fxcache) -> None:
    manifest = {k: v for k, v in cache.manifest.items() if k != "max_target_horizon_bars"}
    manifest_path(cache.folder).write_text(json.dumps(manifest))

    with pytest.raises(InvalidInputError) as info:
        open_cache(cache.root, SYMBOL, None)

    assert str(info.value) == (
        "the fxcache manifest of 'ES.FUT' has no featureset hash or max_target_horizon_bars; "
        "re-run `fxstore precompute --force`."
    )


def _record_targets(cache: Fxcache, targets: list[dict[str, object]]) -> None:
    """Rewrite the cache's manifest as if its feature set had `targets`."""
    featureset = dict(cache.manifest["featureset"])  # type: ignore[call-overload]
    manifest = {**cache.manifest, "featureset": {**featureset, "targets": targets}}
    manifest_path(cache.folder).write_text(json.dumps(manifest))


def test_open_cache_market_has_the_feature_sets_forward_return_horizons(cache: Fxcache) -> None:
    targets: list[dict[str, object]] = [
        {"name": f"fwd_{h}", "kind": "forward_return", "kind_version": 1, "params": {"horizon": h}}
        for h in (16, 2, 16)
    ]
    _record_targets(cache, targets)

    cached = open_cache(cache.root, SYMBOL, None)

    assert cached.market.target_horizons == (2, 16)


def test_open_cache_market_of_a_cache_without_targets_has_no_horizons(cache: Fxcache) -> None:
    assert open_cache(cache.root, SYMBOL, None).market.target_horizons == ()


def test_open_cache_target_without_horizon_says_rerun_precompute(cache: Fxcache) -> None:
    targets: list[dict[str, object]] = [
        {"name": "fwd_x", "kind": "forward_return", "params": {"horizon": "4"}}
    ]
    _record_targets(cache, targets)

    with pytest.raises(SchemaError) as info:
        open_cache(cache.root, SYMBOL, None)

    assert str(info.value) == (
        "the fxcache manifest of 'ES.FUT' records target 'fwd_x' without a whole `horizon` "
        ">= 1 (was '4'); re-run `fxstore precompute --force`."
    )


def test_open_cache_of_a_precomputed_default_set_has_its_horizons(store: Path) -> None:
    assert open_cache(store, SYMBOL, None).market.target_horizons == (1, 2, 4, 8, 16)
