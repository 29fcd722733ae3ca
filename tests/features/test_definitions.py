"""Feature definitions, feature sets, their hash and the TOML form."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from fxstore.errors import InvalidInputError
from fxstore.features import definitions, registry
from fxstore.features.definitions import (
    FEATURESETS,
    SLOW_SPANS,
    ExprDef,
    FeatureDef,
    FeatureSet,
    Settings,
    classic_featureset,
    default_featureset,
    featureset_named,
    load_featureset,
    parse_featureset,
)

pytestmark = pytest.mark.quick

SOURCE = {
    "instrument_key": "mbp10_front_month",
    "bar_key": "dib-b100-946dfb62",
    "bars_sha256": "0" * 64,
}


def _hash(featureset: FeatureSet, **source: str) -> str:
    return featureset.with_tick_size(0.25).hash(**(SOURCE | source))


def _small(**settings: float) -> FeatureSet:
    return FeatureSet(
        (FeatureDef("ret_4", "log_return", {"horizon": 4}), FeatureDef("spread", "spread_ticks")),
        (FeatureDef("fwd_4", "forward_return", {"horizon": 4}),),
        Settings(**settings),  # type: ignore[arg-type]
    )


def test_default_featureset_has_every_feature_kind_once_or_more() -> None:
    featureset = default_featureset()

    kinds = {d.kind for d in featureset.features}
    builtin = {k for k, spec in registry.KINDS.items() if not spec.is_target}
    assert kinds == builtin | {"expression"}
    assert [d.name for d in featureset.targets] == ["fwd_1", "fwd_2", "fwd_4", "fwd_8", "fwd_16"]
    assert featureset.warmup_rows == 200
    assert featureset.max_target_horizon == 16  # the walk-forward gaps of the classic set


def test_classic_featureset_keeps_its_three_targets() -> None:
    featureset = classic_featureset()

    assert [dict(d.params) for d in featureset.targets] == [
        {"horizon": 1},
        {"horizon": 4},
        {"horizon": 16},
    ]
    assert featureset.max_target_horizon == 16


def test_hash_is_16_lowercase_hex_and_stable_for_equal_sets() -> None:
    explicit = FeatureSet(
        (
            FeatureDef("ret_4", "log_return", {"horizon": 4}),
            FeatureDef("spread", "spread_ticks", {}),
        ),
        (FeatureDef("fwd_4", "forward_return", {"horizon": 4}),),
    )

    assert re.fullmatch(r"[0-9a-f]{16}", _hash(_small()))
    assert _hash(_small()) == _hash(explicit)


def test_hash_of_a_fixed_set_is_pinned() -> None:
    # The hash names the fxcache folder: a change here orphans every cache already built, so
    # it must come with a DEFINITIONS_VERSION or kind version bump, or a change of what the
    # key covers (and this literal updated).
    assert _hash(_small()) == "34df9049ab50b312"
    assert _hash(_small(), bar_key="dib-b200-00000000") != "34df9049ab50b312"


def test_hash_with_tick_from_contract_facts_equals_the_es_default_of_before() -> None:
    # The tick size used to default to ES's 0.25 in the settings; the bars'
    # contract facts giving 0.25 must name the same fxcache.
    from_facts = _small().with_tick_size(0.25)

    assert from_facts.settings.tick_size == 0.25
    assert from_facts.hash(**SOURCE) == _small(tick_size=0.25).hash(**SOURCE)
    assert from_facts.hash(**SOURCE) == "34df9049ab50b312"


def test_hash_of_an_unresolved_tick_size_raises() -> None:
    with pytest.raises(InvalidInputError, match="`tick_size` is not set"):
        _small().hash(**SOURCE)


def test_with_tick_size_keeps_a_tick_size_the_set_gives() -> None:
    assert _small(tick_size=0.5).with_tick_size(0.25).settings.tick_size == 0.5


def test_hash_differs_for_other_bars_under_the_same_keys() -> None:
    # a re-ingest of other data keeps the series' keys; only its manifest differs
    assert _hash(_small(), bars_sha256="1" * 64) != _hash(_small())


@pytest.mark.parametrize(
    "changed",
    [
        dataclasses.replace(
            _small(),
            features=(FeatureDef("ret_4b", "log_return", {"horizon": 4}), _small().features[1]),
        ),
        dataclasses.replace(
            _small(),
            features=(FeatureDef("ret_4", "log_return", {"horizon": 5}), _small().features[1]),
        ),
        dataclasses.replace(_small(), targets=()),
        _small(vol_window=100),
        _small(tick_size=0.5),
        dataclasses.replace(_small(), features=tuple(reversed(_small().features))),
    ],
    ids=["name", "param", "targets", "vol_window", "tick_size", "order"],
)
def test_hash_changes_when_a_name_param_or_setting_changes(changed: FeatureSet) -> None:
    assert _hash(changed) != _hash(_small())


def test_hash_changes_with_definitions_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _hash(_small())

    monkeypatch.setattr(definitions, "DEFINITIONS_VERSION", definitions.DEFINITIONS_VERSION + 1)

    assert _hash(_small()) != before


def test_hash_changes_with_a_kind_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _hash(_small())
    kinds = dict(registry.KINDS)
    kinds["spread_ticks"] = dataclasses.replace(kinds["spread_ticks"], version=2)

    monkeypatch.setattr(definitions, "KINDS", kinds)
    monkeypatch.setattr(registry, "KINDS", kinds)

    assert _hash(_small()) != before


def test_hash_changes_with_the_bar_series() -> None:
    assert _hash(_small(), bar_key="dib-b50-00000000") != _hash(_small())


def test_feature_def_fills_defaults_and_records_kind_version() -> None:
    d = FeatureDef("ofi", "ofi_level")

    assert dict(d.params) == {"level": 0, "window": 100}
    assert d.to_json() == {
        "name": "ofi",
        "kind": "ofi_level",
        "kind_version": 1,
        "params": {"level": 0, "window": 100},
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("bad name", "spread_ticks", {}), "feature name must hold only"),
        (("x", "nope", {}), "feature 'x': unknown kind 'nope'; known: "),
        (("x", "log_return", {"window": 3}), "kind 'log_return' has no parameter 'window'"),
        (("x", "log_return", {"horizon": 0}), "`horizon` must be >= 1, was 0"),
        (("x", "forward_return", {"horizon": 0}), "`horizon` must be >= 1 and <= 256, was 0"),
        (("x", "forward_return", {"horizon": 257}), "`horizon` must be >= 1 and <= 256, was 257"),
        (("x", "log_return", {"horizon": 2.5}), "`horizon` must be a whole number, was 2.5"),
        (("x", "ofi_level", {"level": 10}), "`level` must be >= 0 and <= 9, was 10"),
        (("x", "time_of_day", {"fn": "tan"}), "`fn` must be 'sin' or 'cos', was 'tan'"),
        (("x", "depth", {"levels": True}), "`levels` must be a number, was True"),
    ],
)
def test_feature_def_invalid_raises_naming_the_problem(
    args: tuple[str, str, dict[str, object]], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FeatureDef(*args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("features", "targets", "message"),
    [
        ((), (), "at least one feature"),
        (
            (FeatureDef("f", "forward_return"),),
            (),
            "feature 'f': kind 'forward_return' looks ahead",
        ),
        ((FeatureDef("s", "spread_ticks"),), (FeatureDef("t", "spread_ticks"),), "target 't'"),
        ((FeatureDef("s", "spread_ticks"), FeatureDef("s", "vwap_distance")), (), "used twice"),
    ],
)
def test_featureset_invalid_raises(
    features: tuple[FeatureDef, ...], targets: tuple[FeatureDef, ...], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        FeatureSet(features, targets)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tick_size": 0.0}, "`tick_size` must be > 0.0, was 0.0"),
        ({"vol_window": 1}, "`vol_window` must be >= 2 bars, was 1"),
        ({"vol_window": 2.0}, "`vol_window` must be a whole number"),
        ({"vol_floor": float("nan")}, "`vol_floor` must be a finite number"),
    ],
)
def test_settings_invalid_raise(settings: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        Settings(**settings)  # type: ignore[arg-type]


TOML_PICK = """
[settings]
vol_window = 50

[[features]]
name = "ret_4"

[[features]]
name = "ofi_0"
window = 20

[[features]]
name = "ret_8"
kind = "log_return"
horizon = 8

[[targets]]
name = "fwd_2"
kind = "forward_return"
horizon = 2
"""


@pytest.mark.parametrize("horizon", [1, 3, 100, 256])
def test_load_featureset_takes_target_horizons_from_1_to_256_bars(
    tmp_path: Path, horizon: int
) -> None:
    path = tmp_path / "features.toml"
    path.write_text(
        f"[[targets]]\nname = 'fwd_2'\n[[targets]]\nname = 'ahead'\nkind = 'forward_return'\n"
        f"horizon = {horizon}\n"
    )

    featureset = load_featureset(path)

    assert [(d.name, dict(d.params)) for d in featureset.targets] == [
        ("fwd_2", {"horizon": 2}),
        ("ahead", {"horizon": horizon}),
    ]
    assert featureset.max_target_horizon == max(2, horizon)


def test_load_featureset_picks_defaults_overrides_params_and_adds_kinds(tmp_path: Path) -> None:
    path = tmp_path / "features.toml"
    path.write_text(TOML_PICK)

    featureset = load_featureset(path)

    assert featureset.settings == Settings(vol_window=50)
    assert [(d.name, d.kind, dict(d.params)) for d in featureset.features] == [
        ("ret_4", "log_return", {"horizon": 4}),
        ("ofi_0", "ofi_level", {"level": 0, "window": 20}),
        ("ret_8", "log_return", {"horizon": 8}),
    ]
    assert [(d.name, dict(d.params)) for d in featureset.targets] == [("fwd_2", {"horizon": 2})]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({}, default_featureset()),
        ({"targets": []}, dataclasses.replace(default_featureset(), targets=())),
        (
            {"settings": {"tick_size": 0.5}},
            dataclasses.replace(default_featureset(), settings=Settings(tick_size=0.5)),
        ),
    ],
    ids=["empty-file-is-default", "no-targets", "settings-only"],
)
def test_parse_featureset_omitted_tables_take_defaults(
    doc: dict[str, object], expected: FeatureSet
) -> None:
    assert parse_featureset(doc) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[features]]\nname = 'nope'\n", "'nope' is not a default feature .*give it a `kind`"),
        ("[[features]]\nkind = 'depth'\n", r"\[\[features\]\] entry 1 needs a `name`"),
        ("[[features]]\nname = 'd'\nkind = 'depth'\nlevels = 11\n", "`levels` must be >= 1"),
        ("[[features]]\nname = 'x'\nkind = 'vwap_distance'\nfoo = 1\n", "no parameter 'foo'"),
        ("[settings]\ntick = 1\n", "unknown setting 'tick'; known: prices, tick_size"),
        ("[feature]\nname = 'x'\n", "unknown key 'feature'"),
        ("features = 3\n", "`features` must be an array of tables"),
        ("[[targets]]\nname = 'r'\nkind = 'log_return'\n", "target 'r': kind 'log_return'"),
        (
            "[[targets]]\nname = 'far'\nkind = 'forward_return'\nhorizon = 512\n",
            "target 'far' \\(forward_return\\): `horizon` must be >= 1 and <= 256, was 512",
        ),
        ("[[targets]]\nname = 'fwd_4'\nhorizon = 0\n", "`horizon` must be >= 1 and <= 256, was 0"),
        ("[[features\n", "not valid TOML"),
    ],
)
def test_load_featureset_invalid_file_raises_naming_file_and_entry(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)

    with pytest.raises(InvalidInputError, match=message) as info:
        load_featureset(path)

    assert str(info.value).startswith(str(path))


def test_load_featureset_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cannot read the feature-set file"):
        load_featureset(tmp_path / "missing.toml")


def test_default_featureset_is_the_classic_set_plus_slow_views_of_the_flow() -> None:
    classic, default = classic_featureset(), default_featureset()

    slow = default.features[len(classic.features) :]
    assert default.features[: len(classic.features)] == classic.features
    assert not any(isinstance(d, ExprDef) for d in classic.features)
    assert len(classic.features) == 30 and len(slow) == 3 * len(SLOW_SPANS) == 21
    assert all(isinstance(d, ExprDef) and d.reset == "session" for d in slow)
    assert [d.name for d in slow[:7]] == [f"trade_imb_ema{n}" for n in SLOW_SPANS]
    assert default.settings == classic.settings
    assert all(t in default.targets for t in classic.targets)  # fwd_1, fwd_4, fwd_16
    assert default.max_target_horizon == classic.max_target_horizon  # the same gaps
    assert default.warmup_rows == classic.warmup_rows  # restarted daily: no longer warm-up


@pytest.mark.parametrize("name", ["default", "classic"])
def test_featureset_named_gives_the_built_in_sets(name: str) -> None:
    assert featureset_named(name) == FEATURESETS[name]()


def test_featureset_named_prefers_a_file_of_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "classic").write_text('[[targets]]\nname = "fwd_4"\n')

    assert featureset_named("classic").targets == (default_featureset().targets[2],)


def test_featureset_named_unknown_name_lists_the_sets() -> None:
    with pytest.raises(InvalidInputError) as info:
        featureset_named("slow")

    assert str(info.value) == (
        "no feature-set file 'slow' and no built-in set of that name: give a TOML file or "
        "one of default, classic."
    )


def test_toml_names_a_default_expression_feature_and_refuses_parameters_for_it() -> None:
    entries = [{"name": "trade_imb"}, {"name": "trade_imb_ema32"}]

    featureset = parse_featureset({"features": entries}, "f.toml")

    by_name = {d.name: d for d in default_featureset().features}
    assert featureset.features == (by_name["trade_imb"], by_name["trade_imb_ema32"])
    with pytest.raises(InvalidInputError, match="is a default expression feature"):
        parse_featureset({"features": [{"name": "trade_imb_ema32", "span": 8}]}, "f.toml")
