"""Tests of the DBN reader: real Databento files, crafted streams, errors, ordering, merging."""

from __future__ import annotations

import datetime as dt
import itertools
import mmap
import shutil
import struct
import warnings
from pathlib import Path

import databento as db
import databento_dbn
import numpy as np
import numpy.typing as npt
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fxstore.errors import (
    FxStoreWarning,
    InvalidInputError,
    SchemaError,
    SymbolNotFoundError,
)
from fxstore.ingest.dbn.format import (
    MBP10_DTYPE,
    SymbolInterval,
    encode_metadata,
    symbol_mapping_dtype,
)
from fxstore.ingest.dbn.reader import (
    DbnSource,
    Mbp10Chunk,
    Symbology,
    SymbolSpan,
    iter_mbp10_chunks,
    open_dbn,
    read_metadata,
    read_symbology,
)
from fxstore.store import file_sha256
from tests.ingest._dbn_files import (
    DAY_NS,
    T0,
    mbp10_records,
    metadata,
    other_record,
    symbol_mapping_record,
    with_ts_out,
    write_dbn,
)

PEER = Path(__file__).parents[2] / "data" / "peer-dbn"
PEER_MBP10 = [
    "test_data.mbp-10.dbn",
    "test_data.mbp-10.v1.dbn.zst",
    "test_data.mbp-10.v2.dbn.zst",
    "test_data.mbp-10.v3.dbn.zst",
    "GLBX.MDP3.test_data.mbp-10.dbn.zst",
]
PEER_OTHER_SCHEMA = [
    ("GLBX.MDP3.test_data.trades.dbn.zst", "trades"),
    ("test_data.trades.v2.dbn.zst", "trades"),
]


def read_all(paths: list[Path] | Path, **kwargs: object) -> list[Mbp10Chunk]:
    return list(open_dbn(paths).iter_chunks(**kwargs))  # type: ignore[arg-type]


def concat(chunks: list[Mbp10Chunk]) -> npt.NDArray[np.void]:
    return np.concatenate([c.records for c in chunks]) if chunks else np.empty(0, MBP10_DTYPE)


# --- real Databento files -------------------------------------------------------------------


@pytest.mark.parametrize("name", PEER_MBP10)
def test_iter_mbp10_chunks_peer_file_equals_databento_every_field(name: str) -> None:
    expected = db.DBNStore.from_file(PEER / name).to_ndarray()

    records = concat(list(iter_mbp10_chunks([PEER / name])))

    assert records.dtype == MBP10_DTYPE
    assert records.size == expected.size > 0
    for field in MBP10_DTYPE.names or ():
        np.testing.assert_array_equal(records[field], expected[field], err_msg=field)


@pytest.mark.parametrize(
    "name", [*PEER_MBP10, *(n for n, _ in PEER_OTHER_SCHEMA), "test_data.definition.v3.dbn.zst"]
)
def test_read_metadata_peer_file_equals_databento(name: str) -> None:
    expected = db.DBNStore.from_file(PEER / name).metadata

    meta = read_metadata(PEER / name)

    assert (meta.version, meta.dataset, meta.schema) == (
        expected.version,
        expected.dataset,
        str(expected.schema),
    )
    assert (meta.start, meta.end, meta.limit, meta.ts_out) == (
        expected.start,
        expected.end,
        expected.limit,
        expected.ts_out,
    )
    assert (meta.stype_in, meta.stype_out) == (str(expected.stype_in), str(expected.stype_out))
    assert list(meta.symbols) == expected.symbols
    assert list(meta.partial) == expected.partial
    assert list(meta.not_found) == expected.not_found
    assert {m.raw_symbol for m in meta.mappings} == set(expected.mappings)
    for raw, intervals in expected.mappings.items():
        ours = [
            {"start_date": m.start_date, "end_date": m.end_date, "symbol": m.symbol}
            for m in meta.mappings
            if m.raw_symbol == raw
        ]
        assert ours == intervals


@pytest.mark.parametrize("name", PEER_MBP10)
def test_symbology_peer_file_maps_5482_to_esh1(name: str) -> None:
    symbology = read_symbology(PEER / name)

    assert symbology.symbol_for(5482, dt.date(2020, 12, 28)) == "ESH1"
    assert symbology.latest_symbols() == {5482: "ESH1"}
    with pytest.raises(SymbolNotFoundError, match="instrument_id 5482 has no symbol"):
        symbology.symbol_for(5482, dt.date(2020, 12, 29))


@pytest.mark.parametrize(("name", "schema"), PEER_OTHER_SCHEMA)
def test_open_dbn_other_schema_refused_naming_it(name: str, schema: str) -> None:
    with pytest.raises(SchemaError, match=rf"{name}: the file holds schema '{schema}'.*mbp-10"):
        open_dbn(PEER / name)


def test_open_dbn_definition_files_are_kept_apart_for_the_master() -> None:
    source = open_dbn([PEER / "GLBX.MDP3.definition-es-fut.dbn.zst", PEER / PEER_MBP10[0]])

    assert [f.path.name for f in source.definitions] == ["GLBX.MDP3.definition-es-fut.dbn.zst"]
    assert [f.path.name for f in source.files] == [PEER_MBP10[0]]


def test_open_dbn_only_definition_files_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"only definition files .*pass the mbp-10 files"):
        open_dbn(PEER / "test_data.definition.v3.dbn.zst")


def test_open_dbn_peer_versions_together_refused_as_the_same_records() -> None:
    """The same two records in DBN versions 1, 2 and 3 would be counted three times."""
    names = [n for n in PEER_MBP10 if n.startswith("test_data.mbp-10.v")]

    with pytest.raises(InvalidInputError, match=r"v\d.dbn.zst and .* hold the same records"):
        open_dbn([PEER / n for n in names])


def test_open_dbn_peer_files_overlapping_on_an_instrument_refused_naming_both() -> None:
    """databento-python's ESH1 sample overlaps databento/dbn's (same instrument, same hour)."""
    files = [PEER / "GLBX.MDP3.test_data.mbp-10.dbn.zst", PEER / "test_data.mbp-10.dbn"]

    with pytest.raises(InvalidInputError, match="overlap in time and share instruments"):
        open_dbn(files)


# --- inputs: paths and folders ----------------------------------------------------------------


def test_open_dbn_batch_folder_reads_dbn_files_only(tmp_path: Path) -> None:
    write_dbn(
        tmp_path / "glbx-mdp3-20201228.mbp-10.dbn.zst", mbp10_records([T0 + 1]), compress=True
    )
    write_dbn(tmp_path / "glbx-mdp3-20201229.mbp-10.dbn", mbp10_records([T0 + DAY_NS]))
    for side_file in ("metadata.json", "manifest.json", "symbology.json", "condition.json"):
        (tmp_path / side_file).write_text("{}")

    source = open_dbn(tmp_path)

    assert [f.path.name for f in source.files] == [
        "glbx-mdp3-20201228.mbp-10.dbn.zst",
        "glbx-mdp3-20201229.mbp-10.dbn",
    ]
    assert [f.is_compressed for f in source.files] == [True, False]
    assert concat(list(source.iter_chunks())).size == 2


def test_open_dbn_compression_detected_from_content_not_name(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "misnamed.dbn", mbp10_records([T0]), compress=True)

    source = open_dbn(path)

    assert source.files[0].is_compressed
    assert concat(list(source.iter_chunks())).size == 1


def test_open_dbn_same_file_twice_read_once(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "a.dbn", mbp10_records([T0, T0 + 1]))

    chunks = read_all([path, tmp_path, Path(str(path))])

    assert concat(chunks).size == 2


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ([], "no input paths given"),
        (["missing.dbn.zst"], "missing.dbn.zst: no such file or folder"),
        (["empty_folder"], r"empty_folder: the folder holds no \*.dbn or \*.dbn.zst files"),
    ],
)
def test_open_dbn_bad_paths_raise_invalid_input(
    tmp_path: Path, paths: list[str], message: str
) -> None:
    (tmp_path / "empty_folder").mkdir()
    (tmp_path / "empty_folder" / "metadata.json").write_text("{}")

    with pytest.raises(InvalidInputError, match=message):
        open_dbn([tmp_path / p for p in paths])


def test_open_dbn_unreadable_file_raises_invalid_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_dbn(tmp_path / "locked.dbn", mbp10_records([T0]))
    real_open = Path.open

    def deny(self: Path, *args: object, **kwargs: object) -> object:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", deny)

    with pytest.raises(InvalidInputError, match=r"locked\.dbn: cannot read the file \(Permission"):
        open_dbn(path)


def test_read_metadata_missing_file_raises_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"nope\.dbn: no such file"):
        read_metadata(tmp_path / "nope.dbn")


@pytest.mark.parametrize("chunk_records", [0, -3, True, 2.5, 1 << 30])
def test_iter_chunks_bad_chunk_records_raises_invalid_input(chunk_records: object) -> None:
    source = open_dbn(PEER / PEER_MBP10[0])

    with pytest.raises(InvalidInputError, match="`chunk_records` must be an int from 1 to"):
        source.iter_chunks(chunk_records=chunk_records)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "instrument_ids",
    [np.array([], np.uint32), np.array([1.5]), np.array([[5482]]), np.array([-1]), [2**33]],
)
def test_iter_chunks_bad_instrument_ids_raises_invalid_input(instrument_ids: object) -> None:
    source = open_dbn(PEER / PEER_MBP10[0])

    with pytest.raises(InvalidInputError, match="`instrument_ids` must"):
        source.iter_chunks(instrument_ids=instrument_ids)  # type: ignore[arg-type]


# --- damaged and foreign files ----------------------------------------------------------------


def test_open_dbn_empty_file_raises_schema_error(tmp_path: Path) -> None:
    (tmp_path / "day.dbn.zst").write_bytes(b"")

    with pytest.raises(SchemaError, match=r"day.dbn.zst: the file is empty \(0 bytes\)"):
        open_dbn(tmp_path / "day.dbn.zst")


def test_open_dbn_not_dbn_names_what_was_found(tmp_path: Path) -> None:
    (tmp_path / "data.dbn").write_bytes(b"PAR1\x15\x04\x15\x10rest")

    with pytest.raises(SchemaError, match=r"data.dbn: not a DBN file: it starts with b'PAR1"):
        open_dbn(tmp_path / "data.dbn")


def test_open_dbn_zstd_of_other_data_raises_schema_error(tmp_path: Path) -> None:
    (tmp_path / "x.dbn.zst").write_bytes(zstandard.ZstdCompressor().compress(b"col1,col2\n1,2\n"))

    with pytest.raises(SchemaError, match=r"x.dbn.zst: Zstandard-compressed but not DBN.*b'col1"):
        open_dbn(tmp_path / "x.dbn.zst")


def test_open_dbn_legacy_dbz_says_convert_with_dbn_cli(tmp_path: Path) -> None:
    payload = b"DBZ\x01" + bytes(60)
    fake = b"\x50\x2a\x4d\x18" + struct.pack("<I", len(payload)) + payload
    (tmp_path / "old.dbz").write_bytes(fake + zstandard.ZstdCompressor().compress(bytes(368)))

    with pytest.raises(SchemaError, match=r"old.dbz: this is the legacy DBZ format.*`dbn` CLI"):
        open_dbn(tmp_path / "old.dbz")


@pytest.mark.parametrize("version", [0, 4, 9])
def test_open_dbn_unsupported_version_raises_schema_error(tmp_path: Path, version: int) -> None:
    data = bytearray(write_dbn(tmp_path / "v.dbn", mbp10_records([T0])).read_bytes())
    data[3] = version
    (tmp_path / "v.dbn").write_bytes(bytes(data))

    with pytest.raises(SchemaError, match=rf"v.dbn: DBN version {version} is not supported"):
        open_dbn(tmp_path / "v.dbn")


def test_open_dbn_truncated_header_raises_schema_error(tmp_path: Path) -> None:
    data = write_dbn(tmp_path / "h.dbn", mbp10_records([T0])).read_bytes()
    (tmp_path / "h.dbn").write_bytes(data[:40])

    with pytest.raises(SchemaError, match=r"h\.dbn: the DBN metadata header is truncated"):
        open_dbn(tmp_path / "h.dbn")


def test_open_dbn_mixed_datasets_names_both_files(tmp_path: Path) -> None:
    nasdaq = write_dbn(
        tmp_path / "xnas.dbn", mbp10_records([T0]), meta=metadata(dataset="XNAS.ITCH")
    )

    with pytest.raises(
        SchemaError,
        match=r"inputs mix datasets: .*test_data.mbp-10.dbn is GLBX.MDP3 but .*xnas.dbn is "
        "XNAS.ITCH",
    ):
        open_dbn([PEER / "test_data.mbp-10.dbn", nasdaq])


def test_open_dbn_mixed_schema_file_refused(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "m.dbn", mbp10_records([T0]), meta=metadata(schema="mbo"))

    with pytest.raises(
        SchemaError, match=r"m\.dbn: the file holds schema 'mbo'; fxstore needs mbp-10"
    ):
        open_dbn(path)


@pytest.mark.parametrize("keep", [10, 100, -9, -1])
def test_open_dbn_zstd_cut_mid_frame_raises_truncated(tmp_path: Path, keep: int) -> None:
    data = (PEER / "test_data.mbp-10.v3.dbn.zst").read_bytes()
    (tmp_path / "cut.dbn.zst").write_bytes(data[:keep])

    with pytest.raises(SchemaError, match=r"cut.dbn.zst: the Zstandard data is truncated"):
        open_dbn(tmp_path / "cut.dbn.zst")


def test_open_dbn_garbage_after_last_frame_raises_corrupt(tmp_path: Path) -> None:
    data = (PEER / "test_data.mbp-10.v3.dbn.zst").read_bytes()
    (tmp_path / "g.dbn.zst").write_bytes(data + b"garbage!")

    with pytest.raises(SchemaError, match=r"g.dbn.zst: the Zstandard data is corrupt: no frame"):
        open_dbn(tmp_path / "g.dbn.zst")


def test_open_dbn_reserved_frame_bit_raises_corrupt(tmp_path: Path) -> None:
    data = bytearray((PEER / "test_data.mbp-10.v3.dbn.zst").read_bytes())
    data[4] |= 0x08  # the frame header descriptor's reserved bit
    (tmp_path / "r.dbn.zst").write_bytes(bytes(data))

    with pytest.raises(SchemaError, match=r"r.dbn.zst: the Zstandard data is corrupt: reserved"):
        open_dbn(tmp_path / "r.dbn.zst")


def test_open_dbn_reserved_block_type_raises_corrupt(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "b.dbn.zst", mbp10_records(T0 + np.arange(50)), compress=True)
    data = bytearray(path.read_bytes())
    first_block = zstandard.frame_header_size(bytes(data))
    data[first_block] |= 0b110  # block type 3 is reserved
    path.write_bytes(bytes(data))

    with pytest.raises(
        SchemaError,
        match=rf"b.dbn.zst: the Zstandard data is corrupt: reserved block type at "
        rf"byte {first_block};",
    ):
        open_dbn(path)


def _skippable_frame(payload: bytes) -> bytes:
    return struct.pack("<II", 0x184D2A5E, len(payload)) + payload


def test_open_dbn_reads_several_frames_and_a_trailing_skippable_frame(tmp_path: Path) -> None:
    records = mbp10_records(T0 + np.arange(300))
    plain = write_dbn(tmp_path / "p.dbn", records).read_bytes()
    cut = len(plain) - 100 * MBP10_DTYPE.itemsize
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    frames = compressor.compress(plain[:cut]) + compressor.compress(plain[cut:])
    (tmp_path / "f.dbn.zst").write_bytes(frames + _skippable_frame(b"skip me"))

    read = concat(read_all(tmp_path / "f.dbn.zst"))

    np.testing.assert_array_equal(read, records)


@pytest.mark.parametrize("name", ["test_data.mbp-10.dbn", "test_data.mbp-10.v3.dbn.zst"])
def test_stats_hold_the_checksum_of_each_file_read_to_its_end(name: str, tmp_path: Path) -> None:
    data = (PEER / name).read_bytes()
    (tmp_path / name).write_bytes(
        data + (_skippable_frame(b"tail") if name.endswith("zst") else b"")
    )
    source = open_dbn(tmp_path / name)
    chunks = source.iter_chunks(chunk_records=2)

    next(chunks)
    assert source.stats.files[0].sha256 is None  # not read to the end yet
    list(chunks)
    assert source.stats.files[0].sha256 == file_sha256(tmp_path / name)


def test_stats_inputs_checksum_files_read_to_the_end_and_hash_the_others_again(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_data.mbp-10.dbn").write_bytes((PEER / "test_data.mbp-10.dbn").read_bytes())
    later = mbp10_records(T0 + 3 * DAY_NS + np.arange(4))
    paths = [
        tmp_path / "test_data.mbp-10.dbn",
        write_dbn(tmp_path / "b.dbn.zst", later, compress=True),
    ]
    source = open_dbn(paths)
    expected = [(p.name, p.stat().st_size, file_sha256(p)) for p in paths]

    assert source.stats.inputs(paths) == expected  # nothing read yet: hashed in a pass
    list(source.iter_chunks(chunk_records=2))
    assert all(f.sha256 is not None for f in source.stats.files)
    assert source.stats.inputs(paths[::-1]) == expected[::-1]  # in the order asked


def test_stats_checksum_covers_a_dropped_partial_record(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "t.dbn", mbp10_records(T0 + np.arange(20)))
    path.write_bytes(path.read_bytes()[:-100])
    source = open_dbn(path)

    with pytest.warns(FxStoreWarning, match="partial record"):
        list(source.iter_chunks())

    assert source.stats.files[0].sha256 == file_sha256(path)


def test_open_dbn_cut_skippable_frame_raises_truncated(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "s.dbn.zst", mbp10_records(T0 + np.arange(50)), compress=True)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes() + _skippable_frame(b"0123456789")[:-3])

    with pytest.raises(
        SchemaError,
        match=rf"s.dbn.zst: the Zstandard data is truncated: the frame starting "
        rf"at byte {size} ",
    ):
        open_dbn(path)


def test_open_dbn_names_the_first_bad_file_in_path_order(tmp_path: Path) -> None:
    good = (PEER / "test_data.mbp-10.v3.dbn.zst").read_bytes()
    for name in "abcdefghij":
        (tmp_path / f"{name}.dbn.zst").write_bytes(good)
    for name in "dh":
        (tmp_path / f"{name}.dbn.zst").write_bytes(good[:-9])

    with pytest.raises(SchemaError, match=r"d\.dbn\.zst: the Zstandard data is truncated"):
        open_dbn(sorted(tmp_path.glob("*.dbn.zst")))


def test_iter_chunks_corrupt_zstd_block_raises_schema_error(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "c.dbn.zst", mbp10_records(T0 + np.arange(200)), compress=True)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # checksummed frame: zstd must notice
    path.write_bytes(bytes(data))

    with pytest.raises(SchemaError, match=r"c.dbn.zst: the Zstandard data is corrupt \("):
        read_all(path)


@pytest.mark.parametrize("compress", [False, True])
def test_iter_chunks_partial_last_record_warns_and_keeps_complete(
    tmp_path: Path, compress: bool
) -> None:
    records = mbp10_records(T0 + np.arange(5))
    data = write_dbn(tmp_path / "t.dbn", records).read_bytes()[:-100]
    if compress:
        data = zstandard.ZstdCompressor().compress(data)
    (tmp_path / "t.dbn").write_bytes(data)
    source = open_dbn(tmp_path / "t.dbn")

    with pytest.warns(FxStoreWarning, match=r"t.dbn: .*partial record: dropped its 268 bytes"):
        got = concat(list(source.iter_chunks(chunk_records=2)))

    np.testing.assert_array_equal(got, records[:4])
    assert source.stats.n_dropped_bytes == 268
    assert source.stats.n_records == 4


@pytest.mark.parametrize("chunk_records", [1, 2, 3, 1000])
def test_iter_chunks_records_out_of_order_names_index_and_timestamps(
    tmp_path: Path, chunk_records: int
) -> None:
    ts = T0 + 10 * np.arange(100)
    ts[81] = ts[80] - 3  # past the records read when opening; inside or across chunks
    path = write_dbn(tmp_path / "o.dbn", mbp10_records(ts))
    source = open_dbn(path)

    with pytest.raises(
        SchemaError,
        match=rf"o.dbn: records are not in ts_recv order: record 81 has ts_recv {ts[81]}, "
        rf"before it record 80 has {ts[80]}",
    ):
        list(source.iter_chunks(chunk_records=chunk_records))


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (bytes(64), "length byte 0 \\(0 bytes\\) is shorter than a record header"),
        (bytes([80, 0x0A]) + bytes(318), "rtype 0x0A \\(MBP-10\\) with length 320 bytes"),
        (bytes([10, 0x16]) + bytes(38), "SymbolMapping \\(rtype 0x16\\) of 40 bytes"),
    ],
)
def test_iter_chunks_bad_record_length_raises_corrupt(
    tmp_path: Path, record: bytes, message: str
) -> None:
    records = mbp10_records([T0, T0 + 1, T0 + 2])
    path = write_dbn(tmp_path / "r.dbn", records[:2], record, records[2:])

    with pytest.raises(SchemaError, match=rf"r.dbn: corrupt record at byte \d+ .*{message}"):
        read_all(path)


def test_iter_chunks_mbp10_length_running_past_the_data_raises_corrupt(tmp_path: Path) -> None:
    # Not a truncated tail: an MBP-10 record is 368 bytes, this length byte claims 800.
    path = write_dbn(tmp_path / "p.dbn", mbp10_records([T0]), bytes([200, 0x0A]) + bytes(50))
    offset = len(encode_metadata(metadata())) + 368

    with pytest.raises(
        SchemaError,
        match=rf"p.dbn: corrupt record at byte {offset} \(after MBP-10 record 1\): rtype 0x0A "
        r"\(MBP-10\) with length 800 bytes, expected 368; the file is damaged",
    ):
        read_all(path)


def test_iter_chunks_header_only_file_yields_nothing(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "h.dbn")

    source = open_dbn(path)

    assert list(source.iter_chunks()) == []
    assert source.files[0].first_ts_recv is None


# --- record streams: other rtypes, ts_out, chunking, filtering ----------------------------------


def test_iter_chunks_symbol_mappings_update_symbology_not_records(tmp_path: Path) -> None:
    records = mbp10_records(T0 + np.arange(6), [11, 11, 22, 22, 11, 22])
    path = write_dbn(
        tmp_path / "live.dbn",
        symbol_mapping_record(11, "ESH1"),
        other_record(),
        records[:3],
        symbol_mapping_record(22, "ESM1", start_ts=T0 + 2),
        records[3:],
        other_record(),
    )
    source = open_dbn(path)
    assert source.symbology.symbol_for(11, T0) == "ESH1"  # leading mappings: known at once

    got = concat(list(source.iter_chunks(chunk_records=4)))

    np.testing.assert_array_equal(got, records)
    assert source.symbology.symbol_for(22, dt.date(2020, 12, 28)) == "ESM1"
    assert source.stats.files[0].n_symbol_mappings == 2
    assert source.stats.files[0].skipped_rtypes == ((0x17, 2),)


def test_symbology_mapping_records_v1_layout_and_id_output_give_raw_symbol() -> None:
    symbology = Symbology()

    v1 = np.frombuffer(symbol_mapping_record(7, "NQZ4", version=1), symbol_mapping_dtype(1))
    reverse = np.frombuffer(
        symbol_mapping_record(8, "8", in_symbol="NQH5"), symbol_mapping_dtype(3)
    )

    symbology.add_mapping_records(v1)
    symbology.add_mapping_records(reverse)

    assert symbology.symbol_for(7, T0) == "NQZ4"
    assert symbology.symbol_for(8, T0) == "NQH5"


def test_read_symbology_reverse_orientation_metadata_maps_ids(tmp_path: Path) -> None:
    day = dt.date(2020, 12, 28)
    meta = metadata(
        stype_in="instrument_id",
        stype_out="raw_symbol",
        mappings=(SymbolInterval("5482", day, day + dt.timedelta(days=1), "ESH1"),),
    )

    symbology = read_symbology(write_dbn(tmp_path / "r.dbn", meta=meta))

    assert symbology.symbol_for(5482, day) == "ESH1"


def test_symbology_reused_id_is_date_aware() -> None:
    symbology = Symbology()
    symbology.add_span(9, SymbolSpan(T0, T0 + DAY_NS, "ESH1"))
    symbology.add_span(9, SymbolSpan(T0 + DAY_NS, T0 + 2 * DAY_NS, "ESM1"))

    assert symbology.symbol_for(9, dt.date(2020, 12, 28)) == "ESH1"
    assert symbology.symbol_for(9, dt.date(2020, 12, 29)) == "ESM1"
    assert symbology.symbol_for(9, T0 + DAY_NS - 1) == "ESH1"
    assert len(symbology.spans(9)) == 2


@pytest.mark.parametrize("compress", [False, True])
def test_iter_chunks_ts_out_file_returns_compact_records(tmp_path: Path, compress: bool) -> None:
    records = mbp10_records(T0 + np.arange(7))
    stream = with_ts_out(records[:3]) + other_record(n_bytes=328) + with_ts_out(records[3:])
    meta = metadata(ts_out=True)
    path = write_dbn(tmp_path / "ts_out.dbn", stream, meta=meta, compress=compress)

    chunks = read_all(path, chunk_records=2)

    got = concat(chunks)
    assert all(c.records.dtype == MBP10_DTYPE and c.records.flags.c_contiguous for c in chunks)
    np.testing.assert_array_equal(got, records)


def test_iter_chunks_ts_out_layout_agrees_with_databento_decoder(tmp_path: Path) -> None:
    records = mbp10_records(T0 + np.arange(3))
    path = write_dbn(tmp_path / "t.dbn", with_ts_out(records), meta=metadata(ts_out=True))
    decoder = databento_dbn.DBNDecoder()
    decoder.write(path.read_bytes())

    theirs = [r for r in decoder.decode() if isinstance(r, databento_dbn.MBP10Msg)]
    ours = concat(read_all(path))

    assert [r.ts_out - r.ts_recv for r in theirs] == [99, 99, 99]  # the helper's ts_out
    assert [(r.ts_recv, r.price, r.sequence, r.levels[0].bid_px) for r in theirs] == [
        (int(o["ts_recv"]), int(o["price"]), int(o["sequence"]), int(o["bid_px_00"])) for o in ours
    ]


def test_iter_chunks_pure_mbp10_chunks_are_zero_copy_views(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "v.dbn", mbp10_records(T0 + np.arange(10)))

    chunks = read_all(path, chunk_records=4)

    assert [c.records.size for c in chunks] == [4, 4, 2]
    assert [c.first_index for c in chunks] == [0, 4, 8]
    assert all(not c.records.flags.owndata and c.records.flags.c_contiguous for c in chunks)


def _mixed_stream_file(tmp_path: Path) -> tuple[Path, npt.NDArray[np.void]]:
    rng = np.random.default_rng(7)
    ts = T0 + np.sort(rng.integers(0, 1000, 60))
    records = mbp10_records(ts, rng.choice([1, 2, 3], 60))
    parts: list[bytes] = []
    for i in range(0, 60, 7):
        parts += [records[i : i + 7].tobytes(), other_record(n_bytes=4 * int(rng.integers(4, 90)))]
    return write_dbn(tmp_path / "mixed.dbn.zst", *parts, compress=True), records


@pytest.mark.parametrize("instrument_ids", [None, np.array([2], np.uint32), np.array([1, 3])])
def test_iter_chunks_chunk_size_does_not_change_records(
    tmp_path: Path, instrument_ids: npt.NDArray[np.uint32] | None
) -> None:
    path, records = _mixed_stream_file(tmp_path)
    expected = (
        records
        if instrument_ids is None
        else records[np.isin(records["instrument_id"], instrument_ids)]
    )

    results = [
        concat(read_all(path, chunk_records=n, instrument_ids=instrument_ids))
        for n in (1, 3, 1 << 16)
    ]

    for got in results:
        np.testing.assert_array_equal(got, expected)


def test_iter_chunks_filter_keeps_ids_and_reports_first_index(tmp_path: Path) -> None:
    records = mbp10_records(T0 + np.arange(6), [1, 2, 2, 1, 3, 2])
    path = write_dbn(tmp_path / "f.dbn", records)
    source = open_dbn(path)

    chunks = list(source.iter_chunks(chunk_records=3, instrument_ids=np.array([2], np.uint32)))

    assert [(c.first_index, c.records["sequence"].tolist()) for c in chunks] == [
        (1, [1, 2]),
        (5, [5]),
    ]
    assert (source.stats.n_records, source.stats.n_kept) == (6, 3)


def test_iter_chunks_many_ids_filter_keeps_exactly_those_ids(tmp_path: Path) -> None:
    records = mbp10_records(T0 + np.arange(20), np.arange(20))
    path = write_dbn(tmp_path / "f.dbn", records)
    wanted = np.array([0, 3, 5, 7, 11, 19, 100], np.uint32)

    got = concat(read_all(path, instrument_ids=wanted))

    assert got["instrument_id"].tolist() == [0, 3, 5, 7, 11, 19]


# --- several files: order and merge ------------------------------------------------------------


def test_iter_chunks_files_in_reverse_come_out_in_ts_recv_order(tmp_path: Path) -> None:
    days = [mbp10_records(T0 + d * DAY_NS + np.arange(5), first_sequence=10 * d) for d in range(3)]
    paths = [write_dbn(tmp_path / f"day{d}.dbn", r) for d, r in enumerate(days)]

    chunks = read_all(list(reversed(paths)), chunk_records=2)

    np.testing.assert_array_equal(concat(chunks), np.concatenate(days))
    assert [(c.path.name, c.first_index) for c in chunks][:4] == [
        ("day0.dbn", 0),
        ("day0.dbn", 2),
        ("day0.dbn", 4),
        ("day1.dbn", 0),
    ]


def test_iter_chunks_overlapping_files_merged_by_ts_recv_then_rank(tmp_path: Path) -> None:
    a = mbp10_records(T0 + np.array([0, 2, 4, 4, 6, 9]), 1, first_sequence=0)
    b = mbp10_records(T0 + np.array([1, 2, 3, 4, 8, 20]), 2, first_sequence=100)
    path_a, path_b = write_dbn(tmp_path / "a.dbn", a), write_dbn(tmp_path / "b.dbn", b)

    chunks = read_all([path_b, path_a], chunk_records=4)

    assert concat(chunks)["sequence"].tolist() == [0, 100, 1, 101, 102, 2, 3, 103, 4, 104, 5, 105]
    for chunk in chunks:  # every chunk is a run of one file, first_index points at records[0]
        source = a if chunk.path == path_a else b
        np.testing.assert_array_equal(
            chunk.records, source[chunk.first_index : chunk.first_index + chunk.records.size]
        )


def test_iter_chunks_tie_at_chunk_end_waits_for_earlier_ranked_file(tmp_path: Path) -> None:
    # a's first chunk ends at ts 5 and its next chunk starts at 5: b's record at 5 must wait.
    a = mbp10_records(T0 + np.array([0, 5, 5]), 1, first_sequence=0)
    b = mbp10_records(T0 + np.array([1, 5]), 2, first_sequence=100)
    paths = [write_dbn(tmp_path / "a.dbn", a), write_dbn(tmp_path / "b.dbn", b)]

    got = concat(read_all(paths, chunk_records=2))

    assert got["sequence"].tolist() == [0, 100, 1, 2, 101]


def _expected_merge(files: list[npt.NDArray[np.void]]) -> npt.NDArray[np.void]:
    """Reference merge: order by (ts_recv, file rank, index); rank by (first ts, name)."""
    ranks = sorted(range(len(files)), key=lambda i: (int(files[i]["ts_recv"][0]), f"{i:03d}"))
    ordered = [files[i] for i in ranks]
    rows = np.concatenate(ordered)
    rank = np.repeat(np.arange(len(ordered)), [f.size for f in ordered])
    index = np.concatenate([np.arange(f.size) for f in ordered])
    return rows[np.lexsort((index, rank, rows["ts_recv"]))]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    gaps=st.lists(st.integers(0, 3), min_size=1, max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=5),
    chunk_records=st.integers(1, 8),
)
def test_iter_chunks_stream_split_into_files_in_time_order_gives_same_records(
    tmp_path_factory: pytest.TempPathFactory, gaps: list[int], cuts: list[int], chunk_records: int
) -> None:
    folder = tmp_path_factory.mktemp("split")
    records = mbp10_records(T0 + np.cumsum(gaps))
    bounds = sorted({min(c, records.size) for c in cuts} | {0, records.size})
    pieces = [records[lo:hi] for lo, hi in itertools.pairwise(bounds) if hi > lo]
    paths = [
        write_dbn(folder / f"{i:03d}.dbn", p, compress=i % 2 == 1) for i, p in enumerate(pieces)
    ]

    got = concat(read_all(paths[::-1], chunk_records=chunk_records))

    np.testing.assert_array_equal(got, records)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    gaps=st.lists(st.integers(0, 2), min_size=2, max_size=60),
    owner=st.lists(st.integers(0, 3), min_size=60, max_size=60),
    chunk_records=st.integers(1, 6),
    keep=st.sampled_from([None, 1, 2]),
)
def test_iter_chunks_interleaved_files_merge_like_a_stable_sort(
    tmp_path_factory: pytest.TempPathFactory,
    gaps: list[int],
    owner: list[int],
    chunk_records: int,
    keep: int | None,
) -> None:
    folder = tmp_path_factory.mktemp("merge")
    records = mbp10_records(T0 + np.cumsum(gaps), np.arange(len(gaps)) % 3)
    owners = np.array(owner[: records.size])
    files = [records[owners == k] for k in range(4) if np.any(owners == k)]
    paths = [write_dbn(folder / f"{i:03d}.dbn", f) for i, f in enumerate(files)]
    wanted = None if keep is None else np.array([keep], np.uint32)

    chunks = read_all(paths, chunk_records=chunk_records, instrument_ids=wanted)

    expected = _expected_merge(files)
    if keep is not None:
        expected = expected[expected["instrument_id"] == keep]
    np.testing.assert_array_equal(concat(chunks), expected)
    for chunk in chunks:  # path and first_index locate records[0] in its file
        assert files[paths.index(chunk.path)][chunk.first_index] == chunk.records[0]


@pytest.mark.parametrize(
    ("name", "version"), [("test_data.mbp-10.v1.dbn.zst", 1), ("test_data.mbp-10.dbn", 2)]
)
def test_open_dbn_each_version_keeps_its_metadata(name: str, version: int) -> None:
    source = open_dbn([PEER / name])

    assert isinstance(source, DbnSource)
    assert source.dataset == "GLBX.MDP3"
    assert [f.metadata.version for f in source.files] == [version]
    assert [f.first_ts_recv for f in source.files] == [1609160400000704060]


def test_iter_chunks_peer_file_copied_into_folder_reads_like_file(tmp_path: Path) -> None:
    shutil.copy(PEER / "GLBX.MDP3.test_data.mbp-10.dbn.zst", tmp_path)

    from_folder = concat(read_all(tmp_path))
    from_file = concat(read_all(PEER / "GLBX.MDP3.test_data.mbp-10.dbn.zst"))

    np.testing.assert_array_equal(from_folder, from_file)


def test_iter_chunks_no_warning_on_clean_file() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chunks = read_all(PEER / "test_data.mbp-10.v3.dbn.zst")

    assert sum(c.records.size for c in chunks) == 2


def test_zstd_check_walks_a_file_window_by_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fxstore.ingest.dbn import zstd as _dbn_zstd

    monkeypatch.setattr(_dbn_zstd, "_WINDOW", 2 * mmap.ALLOCATIONGRANULARITY)
    records = mbp10_records(T0 + np.arange(3000))
    plain = write_dbn(tmp_path / "p.dbn", records).read_bytes()
    compressor = zstandard.ZstdCompressor(level=1, write_checksum=True)
    cuts = range(0, len(plain), 50_000)
    frames = b"".join(compressor.compress(plain[c : c + 50_000]) for c in cuts)
    data = frames + _skippable_frame(bytes(3 * mmap.ALLOCATIONGRANULARITY)) + frames
    (tmp_path / "w.dbn.zst").write_bytes(data)
    (tmp_path / "cut.dbn.zst").write_bytes(data[:-5])
    assert len(data) > 4 * mmap.ALLOCATIONGRANULARITY

    _dbn_zstd.check_zstd_complete(tmp_path / "w.dbn.zst", len(data))
    with pytest.raises(SchemaError, match=r"cut.dbn.zst: the Zstandard data is truncated"):
        _dbn_zstd.check_zstd_complete(tmp_path / "cut.dbn.zst", len(data) - 5)


@pytest.mark.parametrize("at", [0.3, 0.5, 0.7])
def test_iter_chunks_garbled_zstd_block_is_named_corrupt_not_out_of_order(
    tmp_path: Path, at: float
) -> None:
    """zstd notices a garbled block only at the frame's checksum; the records before it
    already come out wrong (often out of ts_recv order): the error must name corruption."""
    rng = np.random.default_rng(3)
    ts = np.cumsum(rng.integers(1, 10**9, 30_000))
    path = write_dbn(
        tmp_path / "day.dbn.zst", mbp10_records(T0 + ts, first_sequence=0), compress=True
    )
    data = bytearray(path.read_bytes())
    pos = int(len(data) * at)
    data[pos : pos + 8] = bytes(b ^ 0xFF for b in data[pos : pos + 8])
    path.write_bytes(bytes(data))

    with pytest.raises(SchemaError, match=r"day\.dbn\.zst: the Zstandard data is corrupt"):
        read_all(path)


def test_open_dbn_truncated_file_of_another_schema_reports_the_schema(tmp_path: Path) -> None:
    """The schema is what to fix first (a truncated download of the right schema comes next)."""
    body = mbp10_records(T0 + np.arange(2_000))  # several zstd blocks: the header decodes
    path = write_dbn(
        tmp_path / "trades.dbn.zst", body, meta=metadata(schema="trades"), compress=True
    )
    path.write_bytes(path.read_bytes()[:-40])  # cut inside the last block

    with pytest.raises(SchemaError, match=r"trades\.dbn\.zst: the file holds schema 'trades'"):
        open_dbn(path)
