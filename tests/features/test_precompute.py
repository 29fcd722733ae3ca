"""precompute end to end: bar store -> fxcache shards and manifest; skip, force, lock, errors."""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from fxstore.config import FeatureConfig
from fxstore.errors import InvalidInputError, SchemaError, SymbolNotFoundError
from fxstore.features.compute import compute_features
from fxstore.features.definitions import FeatureDef, FeatureSet, Settings, default_featureset
from fxstore.features.precompute import (
    contract_tick_size,
    precompute,
    read_bars,
    resolve_bars,
)
from fxstore.store import file_sha256, fxcache_dir, key_lock, manifest_path
from tests.faults._edit import edit_and_recommit
from tests.features.conftest import INGEST

SMALL = FeatureSet(
    (FeatureDef("ret_2", "log_return", {"horizon": 2}), FeatureDef("imb", "book_imbalance")),
    (FeatureDef("fwd_2", "forward_return", {"horizon": 2}),),
    Settings(vol_window=20),
)
MANIFEST_KEYS = {
    "format", "symbol", "featureset", "columns", "source", "bars_per_day", "n_bars", "n_rows",
    "warmup_rows_dropped", "tail_rows_dropped", "normalisation", "max_target_horizon_bars",
    "shard_by", "shards", "fxstore_version",
}  # fmt: skip


def _manifest(out_dir: Path) -> dict[str, object]:
    return json.loads((out_dir / "manifest.json").read_text())


def _cache_dir(cached_store: Path) -> Path:
    (folder,) = (cached_store / "fxcache" / "ES.FUT").iterdir()
    return folder


def test_precompute_writes_monthly_shards_and_a_complete_manifest(cached_store: Path) -> None:
    out_dir = _cache_dir(cached_store)
    manifest = _manifest(out_dir)

    assert set(manifest) == MANIFEST_KEYS
    assert manifest["format"] == "fxcache/1"
    assert sorted(p.name for p in out_dir.glob("*.arrow")) == [
        f"2024-{m:02d}.arrow" for m in (3, 4, 5, 6)
    ]  # the 200 warm-up bars take all of February
    shards = manifest["shards"]
    assert [s["file"] for s in shards] == sorted(s["file"] for s in shards)
    assert sum(s["rows"] for s in shards) == manifest["n_rows"]
    assert all(a["ts_end"] < b["ts_start"] for a, b in itertools.pairwise(shards))
    assert all(s["sha256"] == file_sha256(out_dir / s["file"]) for s in shards)
    assert manifest["n_rows"] == manifest["n_bars"] - 200 - 16
    assert manifest["warmup_rows_dropped"] == 200 and manifest["tail_rows_dropped"] == 16
    # 90 trading days: Good Friday 2024 is a short session
    assert manifest["bars_per_day"] == pytest.approx(manifest["n_bars"] / 90)
    assert manifest["max_target_horizon_bars"] == 16


def test_manifest_records_featureset_source_and_normalisation(cached_store: Path) -> None:
    out_dir = _cache_dir(cached_store)
    manifest = _manifest(out_dir)
    featureset = manifest["featureset"]
    source = manifest["source"]

    bars_dir = cached_store / source["bars_dir"]
    version_manifest = bars_dir / "v0001" / "manifest.json"
    bars = {
        "instrument_key": "mbp10_front_month",
        "bar_key": INGEST.bars.key,
        "bars_sha256": file_sha256(version_manifest),
    }
    definition = default_featureset().with_tick_size(0.25).definition(**bars)
    assert featureset == {"hash": out_dir.name, **json.loads(json.dumps(definition))}
    assert out_dir.name == default_featureset().with_tick_size(0.25).hash(**bars)
    assert source["bar_key"] == INGEST.bars.key and source["bar_version"] == 1
    assert source["manifest_sha256"] == file_sha256(version_manifest)
    norm = manifest["normalisation"]
    assert norm["vol_normaliser"]["window_bars"] == 200
    assert set(norm["columns"]) == {
        *manifest["columns"]["features"],
        *manifest["columns"]["targets"],
    }
    assert manifest["columns"]["market"] == ["mkt_close", "mkt_half_spread"]
    assert manifest["columns"]["flags"] == ["is_roll", "session_start"]


def test_shards_are_single_batch_uncompressed_without_nulls(cached_store: Path) -> None:
    out_dir = _cache_dir(cached_store)
    manifest = _manifest(out_dir)
    names = ["ts_close", "trading_day", "is_roll", "session_start", "mkt_close", "mkt_half_spread",
             *manifest["columns"]["features"], *manifest["columns"]["targets"]]  # fmt: skip

    for entry in manifest["shards"]:
        reader = pa.ipc.open_file(pa.memory_map(str(out_dir / entry["file"])))
        batch = reader.get_batch(0)
        assert reader.num_record_batches == 1
        assert batch.schema.names == names
        assert [str(t) for t in batch.schema.types[:6]] == [
            "int64", "int32", "uint8", "uint8", "double", "double"
        ]  # fmt: skip
        assert {str(t) for t in batch.schema.types[6:]} == {"float"}
        assert all(c.null_count == 0 and c.buffers()[0] is None for c in batch.columns)
        row_bytes = 8 + 4 + 1 + 1 + 8 + 8 + 4 * (len(names) - 6)
        assert entry["bytes"] >= entry["rows"] * row_bytes  # raw, not compressed


def test_cache_holds_exactly_the_computed_features(cached_store: Path) -> None:
    source = resolve_bars(cached_store, FeatureConfig())
    frame = compute_features(read_bars(source), default_featureset().with_tick_size(0.25))
    shards = sorted(_cache_dir(cached_store).glob("*.arrow"))

    table = pa.concat_tables(pa.ipc.open_file(pa.memory_map(str(p))).read_all() for p in shards)

    assert table.equals(frame.to_table().replace_schema_metadata(table.schema.metadata))


def test_ts_close_strictly_increasing_and_rolls_flagged_with_zero_return(
    cached_store: Path,
) -> None:
    shards = sorted(_cache_dir(cached_store).glob("*.arrow"))
    table = ds.dataset(shards, format="ipc").to_table()
    ts = table.column("ts_close").to_numpy()
    rolls = np.flatnonzero(table.column("is_roll").to_numpy())
    close = table.column("mkt_close").to_numpy()

    assert (np.diff(ts) > 0).all()
    assert len(rolls) == 1  # 2024-06-18; the March roll falls in the warm-up
    assert abs(close[rolls[0]] - close[rolls[0] - 1]) > 5.0  # the raw close jumps ...
    assert table.column("f_ret_1")[int(rolls[0])].as_py() == 0.0  # ... the return does not
    assert table.column("target_fwd_1")[int(rolls[0]) - 1].as_py() == 0.0


def test_precompute_unchanged_skips_and_force_rewrites(store: Path) -> None:
    first = precompute(FeatureConfig(features=SMALL), store)
    stamps = {p: p.stat().st_mtime_ns for p in first.out_dir.iterdir()}

    again = precompute(FeatureConfig(features=SMALL), store)
    forced = precompute(FeatureConfig(features=SMALL, force=True), store)

    assert not first.up_to_date and again.up_to_date and not forced.up_to_date
    assert again == dataclasses.replace(first, elapsed_s=again.elapsed_s, up_to_date=True)
    assert {p: p.stat().st_mtime_ns for p in stamps} != stamps


def test_precompute_new_featureset_writes_new_key_and_keeps_old(store: Path) -> None:
    old = precompute(FeatureConfig(features=SMALL), store)
    old_bytes = {p.name: p.read_bytes() for p in old.out_dir.iterdir()}
    changed = dataclasses.replace(SMALL, settings=Settings(vol_window=21))

    new = precompute(FeatureConfig(features=changed), store)

    assert new.key != old.key and not new.up_to_date
    assert {p.name: p.read_bytes() for p in old.out_dir.iterdir()} == old_bytes


def test_precompute_changed_bars_writes_a_new_key_and_keeps_the_old_cache(store: Path) -> None:
    first = precompute(FeatureConfig(features=SMALL), store)
    old_bytes = {p.name: p.read_bytes() for p in first.out_dir.iterdir()}
    bars_manifest = resolve_bars(store, FeatureConfig()).folder / "manifest.json"
    # as if ingest had stopped five days earlier (and committed so)
    edit_and_recommit(bars_manifest, lambda m: m.update(days=m["days"][:-5]))  # type: ignore[index]

    second = precompute(FeatureConfig(features=SMALL), store)

    assert second.key != first.key and not second.up_to_date
    assert second.n_bars < first.n_bars
    assert {p.name: p.read_bytes() for p in first.out_dir.iterdir()} == old_bytes


def test_precompute_shard_by_year_replaces_month_shards(store: Path) -> None:
    precompute(FeatureConfig(features=SMALL), store)

    summary = precompute(FeatureConfig(features=SMALL, shard_by="year"), store)

    assert [p.name for p in summary.out_dir.glob("*.arrow")] == ["2024.arrow"]
    assert not summary.up_to_date


def test_precompute_shard_by_day_names_each_trading_day(store: Path) -> None:
    summary = precompute(FeatureConfig(features=SMALL, shard_by="day"), store)

    names = sorted(p.stem for p in summary.out_dir.glob("*.arrow"))
    assert len(names) == summary.n_shards > 80
    assert names[-1] == "2024-06-28"


def test_precompute_waits_for_another_writer(store: Path) -> None:
    first = precompute(FeatureConfig(features=SMALL), store)
    manifest = first.out_dir / "manifest.json"
    before = manifest.stat().st_mtime_ns
    worker = threading.Thread(
        target=precompute, args=(FeatureConfig(features=SMALL, force=True), store)
    )

    with key_lock(first.out_dir):
        worker.start()
        time.sleep(1.0)  # ample for a forced run of 1,207 bars
        assert worker.is_alive()
        assert manifest.stat().st_mtime_ns == before
    worker.join(timeout=30)

    assert manifest.stat().st_mtime_ns != before


def test_precompute_changed_day_file_is_refused(store: Path) -> None:
    day = sorted(resolve_bars(store, FeatureConfig()).folder.glob("*.parquet"))[3]
    day.write_bytes(day.read_bytes() + b"\0")

    with pytest.raises(InvalidInputError, match=rf"{day.name}: missing or changed since ingest"):
        precompute(FeatureConfig(features=SMALL), store)


def test_read_bars_day_file_outside_the_series_folder_is_refused(store: Path) -> None:
    source = resolve_bars(store, FeatureConfig())
    days = [dict(d) for d in source.manifest["days"]]
    first = next(d for d in days if "file" in d)
    outside = store / "bars" / "outside.parquet"  # the real day file: only the path is wrong
    outside.write_bytes((source.folder / first["file"]).read_bytes())
    first["file"] = "../../../outside.parquet"
    crafted = dataclasses.replace(source, manifest=source.manifest | {"days": days})

    with pytest.raises(SchemaError) as info:
        read_bars(crafted)

    assert str(info.value) == (
        f"{manifest_path(source.folder)}: file entry '../../../outside.parquet' is not a file "
        f"inside {source.folder}; refusing to read it (the manifest is damaged or was edited): "
        "re-run with --force."
    )


@pytest.mark.parametrize(
    ("config", "error", "message"),
    [
        (
            FeatureConfig(symbol="NQ.FUT"),
            SymbolNotFoundError,
            "No bars for symbol 'NQ.FUT' .*known: ES.FUT",
        ),
        (FeatureConfig(instrument_key="mbp10"), SymbolNotFoundError, "known: mbp10_front_month"),
        (
            FeatureConfig(bar_key="dib-b1-0"),
            SymbolNotFoundError,
            "No bars mbp10_front_month/dib-b1-0",
        ),
    ],
)
def test_precompute_unknown_bars_raise_listing_known(
    store: Path, config: FeatureConfig, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        precompute(config, store)


def test_precompute_two_bar_keys_needs_a_choice(store: Path) -> None:
    folder = resolve_bars(store, FeatureConfig()).folder.parent  # the series, not its version
    (folder.parent / "dib-b50-00000000").mkdir()
    (folder.parent / "dib-b50-00000000" / "manifest.json").write_text("{}")

    with pytest.raises(InvalidInputError, match=r"has 2 bar series .* pick one with --bar-key"):
        precompute(FeatureConfig(features=SMALL), store)
    assert precompute(FeatureConfig(features=SMALL, bar_key=folder.name), store).n_rows > 0


def test_precompute_without_manifest_rewrites_incomplete_cache(store: Path) -> None:
    first = precompute(FeatureConfig(features=SMALL), store)
    (first.out_dir / "manifest.json").unlink()  # as after a run killed mid-write

    second = precompute(FeatureConfig(features=SMALL), store)

    assert not second.up_to_date and (second.out_dir / "manifest.json").is_file()
    assert fxcache_dir(store, "ES.FUT", second.key) == second.out_dir


def test_precompute_of_bars_from_a_truncated_input_records_and_warns_everywhere(
    store: Path,
) -> None:
    from fxstore.errors import FxStoreWarning
    from fxstore.features.catalog import format_info
    from fxstore.features.reader import FeatureStore
    from fxstore.train.env.data import open_cache

    bars_manifest = next((store / "bars").rglob("v0001/manifest.json"))
    cut = {"dropped_bytes": 268, "records_kept": 5_000, "last_trading_day": "2024-03-04"}
    # as ingest records a download that stopped short
    edit_and_recommit(bars_manifest, lambda m: m["inputs"][3].update(truncated=cut))  # type: ignore[index]
    name = json.loads(bars_manifest.read_text())["inputs"][3]["name"]

    with pytest.warns(FxStoreWarning, match=rf"1 truncated input file\(s\) \({name}\).*2024-03-04"):
        summary = precompute(FeatureConfig(), store)
    with pytest.warns(FxStoreWarning, match="truncated"):
        again = precompute(FeatureConfig(), store)  # every later run says it again
    with pytest.warns(FxStoreWarning, match="2024-03-04 are incomplete"):
        open_cache(store, "ES.FUT", summary.key, "cpu")  # and training

    manifest = json.loads(manifest_path(summary.out_dir).read_text())
    assert manifest["source"]["truncated_inputs"] == [{"name": name, **cut}]
    assert summary.n_truncated_inputs == 1 and again.up_to_date
    assert "built from 1 truncated input(s)" in summary.format_text()
    info = format_info(FeatureStore(store).manifest("ES.FUT", summary.key))
    assert "warning:  its bars: built from 1 truncated input file(s)" in info


def test_precompute_carries_the_records_passed_over_into_the_cache_and_its_info(
    store: Path,
) -> None:
    from fxstore.features.catalog import format_info
    from fxstore.features.reader import FeatureStore

    bars_manifest = next((store / "bars").rglob("v0001/manifest.json"))
    # as ingest counts records of inputs that are neither MBP-10 nor symbol mappings
    edit_and_recommit(bars_manifest, lambda m: m.update(n_records_passed_over=3))

    summary = precompute(FeatureConfig(features=SMALL), store)

    manifest = json.loads(manifest_path(summary.out_dir).read_text())
    assert manifest["source"]["n_records_passed_over"] == 3
    info = format_info(FeatureStore(store).manifest("ES.FUT", summary.key))
    assert "  inputs:   3 records passed over, in no bar (not MBP-10" in info


def test_precompute_of_complete_inputs_records_none(cached_store: Path) -> None:
    manifest = json.loads(next((cached_store / "fxcache").rglob("manifest.json")).read_text())

    assert manifest["source"]["truncated_inputs"] == []


def test_precompute_tick_size_from_contract_facts_keeps_the_explicit_es_hash(store: Path) -> None:
    explicit = dataclasses.replace(SMALL, settings=Settings(tick_size=0.25, vol_window=20))

    from_facts = precompute(FeatureConfig(features=SMALL), store)

    assert precompute(FeatureConfig(features=explicit), store).key == from_facts.key


def test_precompute_explicit_tick_size_overrides_the_contract_facts(store: Path) -> None:
    other = dataclasses.replace(SMALL, settings=Settings(tick_size=0.5, vol_window=20))

    assert (
        precompute(FeatureConfig(features=other), store).key
        != precompute(FeatureConfig(features=SMALL), store).key
    )


@pytest.mark.parametrize(
    ("contracts", "found"),
    [
        ({}, "no contract gives one"),
        ({"ESU4-ESZ4": {"multiplier": 50.0}}, "no contract gives one"),
        (
            {"ESH4": {"tick_size": 0.25, "instrument_class": "F"}, "X": {"tick_size": 0.5}},
            None,
        ),
        ({"A": {"tick_size": 0.25}, "B": {"tick_size": 0.5}}, "its contracts give [0.25, 0.5]"),
    ],
)
def test_contract_tick_size_from_outrights_or_error(
    contracts: dict[str, object], found: str | None
) -> None:
    manifest = {"contracts": contracts}

    if found is None:
        assert contract_tick_size(manifest, "m.json") == 0.25
    else:
        with pytest.raises(InvalidInputError) as err:
            contract_tick_size(manifest, "m.json")
        assert str(err.value) == (
            f"m.json: the bars' tick size is not known ({found}); set [settings] tick_size "
            "in a feature-set file (--features FILE.toml)."
        )
