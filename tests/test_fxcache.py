"""The fxcache on-disk format: shard writing and reading, checksums, periods, manifests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fxstore.errors import InvalidInputError, SchemaError, SymbolNotFoundError
from fxstore.fxcache import (
    FORMAT,
    LEADING_COLUMNS,
    CacheChoice,
    FxCacheManifest,
    choose_folder,
    column_dtypes,
    find_folder,
    read_entry,
    read_manifest,
    read_shard,
    split_shards,
    write_shard,
)
from fxstore.store import (
    atomic_write_json,
    bars_dir,
    commit_bar_version,
    fxcache_dir,
    manifest_path,
    stage_bar_version,
)

pytestmark = pytest.mark.quick

DAY_2024_01_31 = 19753  # days since 1970-01-01
SYMBOL = "ES.FUT"
_SERIES = ("mbp10_front_month", "dib-b100")


def _table(rows: int = 5) -> pa.Table:
    return pa.table(
        {
            "ts_close": np.arange(rows, dtype=np.int64) * 10 + 1_000,
            "trading_day": np.full(rows, DAY_2024_01_31, dtype=np.int32),
            "is_roll": np.zeros(rows, dtype=np.uint8),
            "session_start": np.zeros(rows, dtype=np.uint8),
            "mkt_close": np.linspace(4700.0, 4701.0, rows),
            "mkt_half_spread": np.full(rows, 0.125),
            "f_x": np.arange(rows, dtype=np.float32) / 3,
        }
    )


def test_write_shard_round_trips_exactly_and_reports_entry(tmp_path: Path) -> None:
    table = _table()
    path = tmp_path / "2024-01.arrow"

    entry = write_shard(path, table, {b"k": b"v"})
    back = read_shard(path, entry.sha256)

    assert back.equals(table)
    assert back.schema.metadata == {b"k": b"v"}
    assert (entry.rows, entry.ts_start, entry.ts_end) == (5, 1_000, 1_040)
    assert entry.first_trading_day == entry.last_trading_day == DAY_2024_01_31
    assert entry.bytes == path.stat().st_size
    assert [p.name for p in tmp_path.iterdir()] == ["2024-01.arrow"]  # no temp file left


def test_write_shard_of_chunked_table_writes_one_batch(tmp_path: Path) -> None:
    table = pa.concat_tables([_table(3), _table(4)])

    write_shard(tmp_path / "s.arrow", table, {})

    reader = pa.ipc.open_file(pa.memory_map(str(tmp_path / "s.arrow")))
    assert reader.num_record_batches == 1 and reader.get_batch(0).num_rows == 7


def test_read_shard_checksum_mismatch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "2024-01.arrow"
    entry = write_shard(path, _table(), {})
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size
    path.write_bytes(bytes(data))

    with pytest.raises(InvalidInputError, match=r"2024-01\.arrow: SHA-256 is .* refusing to read"):
        read_shard(path, entry.sha256)


def test_read_shard_missing_or_not_arrow_raises(tmp_path: Path) -> None:
    (tmp_path / "junk.arrow").write_bytes(b"not arrow at all")

    with pytest.raises(InvalidInputError, match="missing"):
        read_shard(tmp_path / "nope.arrow")
    with pytest.raises(SchemaError, match="not an Arrow IPC file"):
        read_shard(tmp_path / "junk.arrow")


@pytest.mark.parametrize(
    ("shard_by", "expected"),
    [
        ("month", [("2024-01.arrow", 0, 2), ("2024-02.arrow", 2, 4), ("2025-01.arrow", 4, 5)]),
        ("year", [("2024.arrow", 0, 4), ("2025.arrow", 4, 5)]),
        (
            "day",
            [
                ("2024-01-30.arrow", 0, 1),
                ("2024-01-31.arrow", 1, 2),
                ("2024-02-01.arrow", 2, 4),
                ("2025-01-02.arrow", 4, 5),
            ],
        ),
    ],
)
def test_split_shards_cuts_on_calendar_periods(
    shard_by: str, expected: list[tuple[str, int, int]]
) -> None:
    days = np.array([19752, 19753, 19754, 19754, 20090], dtype=np.int32)

    assert split_shards(days, shard_by) == expected  # type: ignore[arg-type]


def test_split_shards_unknown_period_raises() -> None:
    with pytest.raises(InvalidInputError, match="`shard_by` must be 'month', 'year' or 'day'"):
        split_shards(np.zeros(1, dtype=np.int32), "week")  # type: ignore[arg-type]


def test_read_manifest_missing_and_wrong_format_raise(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"no manifest\.json: the cache is incomplete"):
        read_manifest(tmp_path, "ES.FUT")
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "fxcache/0"}))
    with pytest.raises(SchemaError, match="format is 'fxcache/0', expected 'fxcache/1'"):
        read_manifest(tmp_path, "ES.FUT")


@settings(max_examples=25, deadline=None)
@given(
    values=st.lists(
        st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=40
    )
)
def test_shard_round_trips_float32_exactly(
    tmp_path_factory: pytest.TempPathFactory, values: list[float]
) -> None:
    table = _table(len(values)).set_column(6, "f_x", pa.array(np.array(values, dtype=np.float32)))
    path = tmp_path_factory.mktemp("rt") / "s.arrow"

    entry = write_shard(path, table, {})

    back = read_shard(path, entry.sha256).column("f_x").to_numpy()
    assert back.tobytes() == np.array(values, dtype=np.float32).tobytes()


def _write_cache(root: Path, key: str = "k0", **changes: object) -> Path:
    """One cache of one shard (`_table()`) under `root`, its manifest updated by `changes`."""
    folder = fxcache_dir(root, SYMBOL, key)
    entry = write_shard(folder / "2024-01.arrow", _table(), {})
    manifest = {
        "format": FORMAT,
        "symbol": SYMBOL,
        "columns": {
            "flags": ["is_roll", "session_start"],
            "market": ["mkt_close", "mkt_half_spread"],
            "features": ["f_x"],
            "targets": [],
        },
        "n_rows": entry.rows,
        "bars_per_day": 5.0,
        "shards": [entry.to_json()],
    } | changes
    atomic_write_json(manifest_path(folder), manifest)
    return folder


def _manifest(root: Path) -> FxCacheManifest:
    return read_manifest(fxcache_dir(root, SYMBOL, "k0"), SYMBOL)


def test_column_dtypes_are_the_leading_columns_then_float32_features_and_targets() -> None:
    dtypes = column_dtypes(("f_a",), ("target_b",))

    assert [(n, str(d)) for n, d in dtypes.items()] == [
        ("ts_close", "int64"), ("trading_day", "int32"), ("is_roll", "uint8"),
        ("session_start", "uint8"), ("mkt_close", "float64"), ("mkt_half_spread", "float64"),
        ("f_a", "float32"), ("target_b", "float32"),
    ]  # fmt: skip
    assert tuple(dtypes.items())[:6] == LEADING_COLUMNS


def test_read_manifest_and_read_entry_round_trip(tmp_path: Path) -> None:
    _write_cache(tmp_path)

    manifest = _manifest(tmp_path)
    table = read_entry(manifest, manifest.shards[0])

    assert (manifest.symbol, manifest.key, manifest.n_rows) == (SYMBOL, "k0", 5)
    assert manifest.column_names == tuple(_table().column_names)
    assert table.equals(_table())
    assert manifest.shard_path(manifest.shards[0]) == manifest.folder / "2024-01.arrow"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"symbol": "NQ.FUT"}, r"the manifest is of symbol 'NQ\.FUT', expected 'ES\.FUT'"),
        ({"n_rows": None}, r"field `n_rows` must be a whole number, was None"),
        ({"shards": []}, r"shards must be non-empty and in time order"),
        ({"shards": [{"file": "2024-01.arrow"}]}, r"a shard entry is malformed"),
        (
            {"columns": {"flags": ["is_roll"], "market": [], "features": [], "targets": []}},
            r"columns\.flags must be \['is_roll', 'session_start'\], was \['is_roll'\]",
        ),
        (
            {"columns": {"flags": ["is_roll", "session_start"], "market": ["mkt_close",
             "mkt_half_spread"], "features": ["x"], "targets": []}},
            r"columns\.features must be names starting 'f_'",
        ),
    ],
)  # fmt: skip
def test_read_manifest_malformed_raises_schema_error(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    _write_cache(tmp_path, **changes)

    with pytest.raises(SchemaError, match=message):
        _manifest(tmp_path)


@pytest.mark.parametrize("name", ["../../outside.arrow", "/tmp/outside.arrow"])
def test_read_manifest_shard_file_outside_the_folder_is_refused(tmp_path: Path, name: str) -> None:
    folder = _write_cache(tmp_path)
    data = json.loads(manifest_path(folder).read_text())
    data["shards"][0]["file"] = name
    manifest_path(folder).write_text(json.dumps(data))

    with pytest.raises(SchemaError) as info:
        _manifest(tmp_path)

    assert str(info.value) == (
        f"{manifest_path(folder)}: file entry {name!r} is not a file inside {folder}; refusing "
        "to read it (the manifest is damaged or was edited): re-run with --force."
    )


def test_read_entry_rows_differing_from_the_manifest_raise(tmp_path: Path) -> None:
    folder = _write_cache(tmp_path)
    manifest = _manifest(tmp_path)
    write_shard(folder / "2024-01.arrow", _table(4), {})

    with pytest.raises(SchemaError, match=r"2024-01\.arrow: holds 4 rows, the manifest says 5"):
        read_entry(manifest, manifest.shards[0], verify=False)


def test_find_folder_picks_the_only_cache_or_the_named_one(tmp_path: Path) -> None:
    _write_cache(tmp_path)
    assert find_folder(tmp_path, SYMBOL) == fxcache_dir(tmp_path, SYMBOL, "k0")
    _write_cache(tmp_path, key="k1")

    assert find_folder(tmp_path, SYMBOL, "k1") == fxcache_dir(tmp_path, SYMBOL, "k1")
    with pytest.raises(InvalidInputError, match=r"\(k0, k1\) and none is built from the cur"):
        find_folder(tmp_path, SYMBOL)
    with pytest.raises(SymbolNotFoundError, match=r"'NQ\.FUT' in .*; known: ES\.FUT\. Run"):
        find_folder(tmp_path, "NQ.FUT")


def _bar_version(root: Path, payload: bytes) -> dict[str, object]:
    """Commit a build of the series `_SERIES` of `root`; the `source` a cache of it records."""
    series = bars_dir(root, SYMBOL, *_SERIES)
    folder = stage_bar_version(series)
    atomic_write_json(manifest_path(folder), {"days": [], "payload": payload.decode()})
    version = commit_bar_version(series, folder)
    keys = dict(zip(("instrument_key", "bar_key"), _SERIES, strict=True))
    return keys | {"bar_version": version.version, "manifest_sha256": version.manifest_sha256}


def test_choose_folder_several_caches_takes_the_one_of_the_current_bars(tmp_path: Path) -> None:
    _write_cache(tmp_path, "k0", source=_bar_version(tmp_path, b"first"))
    _write_cache(tmp_path, "k1", source=_bar_version(tmp_path, b"second"))

    choice = choose_folder(tmp_path, SYMBOL)

    assert choice == CacheChoice(
        fxcache_dir(tmp_path, SYMBOL, "k1"), "k1", "built from the current bars, v0002"
    )


def test_choose_folder_two_caches_of_the_current_bars_names_the_option(tmp_path: Path) -> None:
    source = _bar_version(tmp_path, b"first")
    _write_cache(tmp_path, "k0", source=source)
    _write_cache(tmp_path, "k1", source=source)

    with pytest.raises(InvalidInputError) as err:
        choose_folder(tmp_path, SYMBOL)

    assert str(err.value) == (
        "'ES.FUT' has 2 fxcaches (k0, k1) and 2 of them are built from the current bars "
        "(k0, k1): pick one with --featureset KEY (`fxstore ls` lists them)."
    )


def test_choose_folder_unknown_featureset_names_the_option(tmp_path: Path) -> None:
    _write_cache(tmp_path, "k0")

    with pytest.raises(InvalidInputError) as err:
        choose_folder(tmp_path, SYMBOL, "nope")

    assert str(err.value) == (
        "`--featureset` of 'ES.FUT' must be one of k0, was 'nope' (`fxstore ls` lists them)."
    )
