"""fxstore.train.env.data: an fxcache opened as a Market, with the facts a run records."""

from __future__ import annotations

import json

import pytest

from fxstore.errors import InvalidInputError
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
