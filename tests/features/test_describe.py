"""The feature set as text and TOML; examples/features.toml is the default set."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fxstore.features.definitions import (
    FeatureDef,
    FeatureSet,
    Settings,
    default_featureset,
    load_featureset,
    parse_featureset,
)
from fxstore.features.describe import featureset_toml, format_featureset

pytestmark = pytest.mark.quick

EXAMPLE = Path(__file__).parents[2] / "examples" / "features.toml"
SOURCE = {"instrument_key": "mbp10_front_month", "bar_key": "dib-b100-0", "bars_sha256": "0" * 64}


def test_example_features_toml_loads_to_the_default_set_and_its_hash() -> None:
    loaded = load_featureset(EXAMPLE)

    assert loaded == default_featureset()
    es = loaded.with_tick_size(0.25).hash(**SOURCE)
    assert es == default_featureset().with_tick_size(0.25).hash(**SOURCE)


def test_example_features_toml_is_what_features_toml_prints() -> None:
    title = "fxstore's default feature set"

    assert EXAMPLE.read_text() == featureset_toml(default_featureset(), title=title)


def test_featureset_toml_round_trips_a_set_with_tick_size_and_no_targets() -> None:
    featureset = FeatureSet(
        (
            FeatureDef("tod", "time_of_day", {"fn": "cos"}),
            FeatureDef("ret_2", "log_return", {"horizon": 2}),
        ),
        (),
        Settings(tick_size=0.5, vol_window=20, vol_floor=1e-5),
    )

    doc = tomllib.loads(featureset_toml(featureset, title="t"))

    assert parse_featureset(doc) == featureset


def test_format_featureset_lists_every_column_with_params_and_units() -> None:
    text = format_featureset(default_featureset().with_tick_size(0.25), tick_source="from m.json")

    assert "tick_size   0.25 points (from m.json)" in text
    assert "f_ofi_3              ofi_level          level=3, window=100  divided by" in text
    assert "target_fwd_16" in text
    assert text.count("\n  f_") == 51
