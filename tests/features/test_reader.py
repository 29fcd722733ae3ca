"""fxstore.open: the store as a mapping of symbols; reads; polars and DuckDB on the shards."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import fxstore
from fxstore.config import FeatureConfig, RollConfig
from fxstore.errors import InvalidInputError, SchemaError, SymbolNotFoundError
from fxstore.features.catalog import format_info, list_store
from fxstore.features.precompute import precompute
from fxstore.features.reader import FeatureStore
from fxstore.ingest import ingest
from fxstore.store import manifest_path
from tests.conftest import SynthMarket
from tests.features.conftest import INGEST


def _folder(root: Path) -> Path:
    (folder,) = (root / "fxcache" / "ES.FUT").iterdir()
    return folder


def test_open_reads_like_a_mapping_of_symbols(cached_store: Path) -> None:
    store = fxstore.open(cached_store)

    assert list(store) == ["ES.FUT"] and len(store) == 1
    assert "ES.FUT" in store and "NQ.FUT" not in store and "../x" not in store
    assert store["ES.FUT"].featuresets == [_folder(cached_store).name]
    with pytest.raises(KeyError):
        store["NQ.FUT"]


def test_read_returns_every_row_in_order_with_manifest(cached_store: Path) -> None:
    store = fxstore.open(cached_store)
    manifest = store.manifest("ES.FUT")

    table = store.read("ES.FUT")

    assert table.num_rows == manifest.n_rows
    assert table.column_names == list(manifest.column_names)
    assert json.loads(table.schema.metadata[b"fxcache_manifest"]) == dict(manifest.data)
    assert (np.diff(table.column("ts_close").to_numpy()) > 0).all()


def test_read_selects_trading_days_inclusive_and_columns(cached_store: Path) -> None:
    store = fxstore.open(cached_store)["ES.FUT"]

    table = store.read(
        start="2024-04-30", end=dt.date(2024, 5, 2), columns=["f_ret_1", "trading_day"]
    )

    days = table.column("trading_day").to_numpy().astype("datetime64[D]").astype(str)
    assert table.column_names == ["f_ret_1", "trading_day"]
    assert sorted(set(days)) == ["2024-04-30", "2024-05-01", "2024-05-02"]


def test_read_polars_equals_read(cached_store: Path) -> None:
    store = fxstore.open(cached_store)

    frame = store.read_polars("ES.FUT", start="2024-05-01", columns=["ts_close", "target_fwd_4"])

    expected = store.read("ES.FUT", start="2024-05-01", columns=["ts_close", "target_fwd_4"])
    assert isinstance(frame, pl.DataFrame)
    assert frame.to_arrow().equals(expected.replace_schema_metadata(None))


def test_read_range_without_rows_is_empty_with_schema(cached_store: Path) -> None:
    table = fxstore.open(cached_store).read("ES.FUT", start="2030-01-01")

    assert table.num_rows == 0
    assert table.schema.field("f_ret_1").type == pa.float32()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"columns": ["f_nope"]},
            InvalidInputError,
            "no column 'f_nope' in the fxcache of 'ES.FUT'",
        ),
        ({"start": "2024-13-01"}, InvalidInputError, "`start` must be a date YYYY-MM-DD"),
        ({"featureset": "0123456789abcdef"}, SymbolNotFoundError, "No fxcache '0123456789abcdef'"),
    ],
)
def test_read_bad_arguments_raise(
    cached_store: Path, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        fxstore.open(cached_store).read("ES.FUT", **kwargs)  # type: ignore[arg-type]


def test_read_unknown_symbol_lists_known(cached_store: Path) -> None:
    with pytest.raises(
        SymbolNotFoundError, match=r"No fxcache for symbol 'NQ.FUT' .* known: ES.FUT"
    ):
        fxstore.open(cached_store).read("NQ.FUT")


def test_read_damaged_shard_is_refused(cached_store: Path, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(cached_store / "fxcache", root / "fxcache")
    shard = sorted(_folder(root).glob("*.arrow"))[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    store = fxstore.open(root)

    with pytest.raises(InvalidInputError, match=rf"{shard.name}: SHA-256 is .* refusing to read"):
        store.read("ES.FUT")
    assert store.read("ES.FUT", end="2024-03-31").num_rows > 0  # the damaged shard not read


@pytest.mark.parametrize("absolute", [False, True])
def test_read_shard_entry_outside_the_cache_folder_is_refused(
    cached_store: Path, tmp_path: Path, absolute: bool
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(cached_store / "fxcache", root / "fxcache")
    folder = _folder(root)
    outside = root / "outside.arrow"  # a valid shard, checksum and all: only the path is wrong
    shutil.copyfile(sorted(folder.glob("*.arrow"))[0], outside)
    name = str(outside) if absolute else "../../outside.arrow"
    manifest = json.loads(manifest_path(folder).read_text())
    manifest["shards"][0]["file"] = name
    manifest_path(folder).write_text(json.dumps(manifest))

    with pytest.raises(SchemaError) as info:
        fxstore.open(root).read("ES.FUT")

    assert str(info.value) == (
        f"{manifest_path(folder)}: file entry {name!r} is not a file inside {folder}; refusing "
        "to read it (the manifest is damaged or was edited): re-run with --force."
    )


def test_polars_reads_shards_as_they_are(cached_store: Path) -> None:
    shards = sorted(_folder(cached_store).glob("*.arrow"))

    frame = pl.scan_ipc(shards).collect()

    expected = fxstore.open(cached_store).read("ES.FUT")
    assert frame.height == expected.num_rows
    assert frame.schema["f_ret_1"] == pl.Float32 and frame.schema["is_roll"] == pl.UInt8
    assert frame.to_arrow().equals(expected.replace_schema_metadata(None).combine_chunks())


def test_duckdb_queries_shards_as_they_are(cached_store: Path) -> None:
    # DuckDB scans the memory-mapped Arrow IPC files through pyarrow's dataset (its own
    # read_arrow() lives in an extension that must be downloaded).
    connection = duckdb.connect()
    connection.register(
        "shards", ds.dataset(sorted(_folder(cached_store).glob("*.arrow")), format="ipc")
    )
    expected = fxstore.open(cached_store).read("ES.FUT")

    ((rows, rolls, first, mean),) = connection.sql(
        "SELECT count(*), sum(is_roll), min(ts_close), avg(f_ret_1) FROM shards"
    ).fetchall()

    assert rows == expected.num_rows and rolls == 1
    assert first == expected.column("ts_close")[0].as_py()
    assert mean == pytest.approx(
        float(np.mean(expected.column("f_ret_1").to_numpy(), dtype=np.float64))
    )


def test_list_store_and_format_info_describe_bars_and_caches(cached_store: Path) -> None:
    listing = list_store(cached_store)
    manifest = FeatureStore(cached_store).manifest("ES.FUT")

    (bars,) = listing.bars
    (cache,) = listing.caches
    assert (bars.symbol, bars.instrument_key, bars.n_days) == ("ES.FUT", "mbp10_front_month", 90)
    assert (bars.first_day, bars.last_day) == ("2024-02-26", "2024-06-28")
    assert (cache.key, cache.n_rows, cache.n_features, cache.n_targets) == (
        manifest.key,
        manifest.n_rows,
        51,
        5,
    )
    assert json.loads(json.dumps(listing.to_json()))["fxcache"][0]["key"] == manifest.key
    text = format_info(manifest)
    assert f"ES.FUT fxcache {manifest.key}" in text
    assert "f_ofi_all" in text and "ofi_multi(levels=10, window=100)" in text


@pytest.fixture(scope="module")
def adjusted_store(two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Bars ingested with --adjust difference and the default feature set precomputed."""
    root = tmp_path_factory.mktemp("adjusted_store")
    config = dataclasses.replace(INGEST, roll=RollConfig(adjust="difference"))
    ingest(config, [two_roll_market.folder], root)
    precompute(FeatureConfig(), root)
    return root


def test_read_back_adjusted_close_uses_the_roll_gaps_of_the_bars_adj_close(
    adjusted_store: Path,
) -> None:
    store = fxstore.open(adjusted_store)
    table = store["ES.FUT"].read(columns=["trading_day", "mkt_close"], back_adjust=True)
    bars = store.read_bars("ES.FUT", columns=["trading_day", "close", "adj_close"])

    close = table.column("mkt_close").to_numpy().astype(np.float64)
    shift = table.column("mkt_close_adj").to_numpy() - close
    bar_shift = bars.column("adj_close").to_numpy() - bars.column("close").to_numpy()
    bar_day = bars.column("trading_day").to_numpy().astype("datetime64[D]")
    by_day = dict(zip(bar_day, bar_shift, strict=True))  # constant within a trading day
    day = table.column("trading_day").to_numpy().astype("datetime64[D]")
    expected = np.array([by_day[d] for d in day])
    np.testing.assert_allclose(shift, expected, atol=1e-6)
    assert len(set(np.round(expected, 6))) >= 2  # a priced roll within the rows read
    assert expected[-1] == 0.0  # the last contract unchanged


def test_read_back_adjusted_of_bars_without_adjust_says_how_to_price_the_rolls(
    cached_store: Path,
) -> None:
    with pytest.raises(InvalidInputError, match=r"ingested without --adjust.*--adjust difference"):
        fxstore.open(cached_store)["ES.FUT"].read(columns=["mkt_close"], back_adjust=True)


def test_importing_fxstore_imports_neither_cupy_nor_the_engines() -> None:
    code = (
        "import sys, fxstore; store = fxstore.open('.'); "
        "print(sorted(m for m in ('cupy', 'numba', 'pyarrow') if m in sys.modules))"
    )

    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)

    assert out.stdout.strip() == "['pyarrow']"  # FeatureStore reads Arrow; no GPU, no JIT
