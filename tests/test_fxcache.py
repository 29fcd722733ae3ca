"""The fxcache on-disk format: shard writing and reading, checksums, periods, manifests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.fxcache import read_manifest, read_shard, split_shards, write_shard

DAY_2024_01_31 = 19753  # days since 1970-01-01


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
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "fxcache/0"}))
    with pytest.raises(SchemaError, match="format is 'fxcache/0', expected 'fxcache/1'"):
        read_manifest(tmp_path)


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
