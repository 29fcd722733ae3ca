"""Messages that said the wrong thing, or nothing: warnings of pool workers, a version asked
for by its commit time or as a string, a backtest of a cache older than its bars."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import zstandard
from click.testing import CliRunner

import fxstore
from fxstore.cli import cli
from fxstore.config import BacktestConfig
from fxstore.errors import FxStoreWarning, InvalidInputError
from fxstore.store import list_bar_versions
from fxstore.train.runs.backtest import run_backtest
from tests.conftest import SynthMarket
from tests.faults._edit import commit_edited_version
from tests.faults._market import subset
from tests.faults.test_money import FOLDS


def _series(root: Path) -> Path:
    (folder,) = (root / "bars" / "ES.FUT").glob("*/*")
    return folder


def test_cli_ingest_with_workers_shows_their_warnings_as_the_commands_own(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    folder = subset(two_roll_market, tmp_path / "in", n_days=6)
    linked = sorted(folder.glob("*.mbp-10.dbn.zst"))[2]
    with zstandard.ZstdDecompressor().stream_reader(linked.read_bytes()) as reader:
        data = reader.read()
    linked.unlink()
    linked.with_suffix("").write_bytes(data[:-37])  # a plain .dbn cut inside a record
    args = ["ingest", str(folder), "--store", str(tmp_path / "s"), "--workers", "2", "-q"]

    result = CliRunner().invoke(cli, [*args, "--target-bars-per-day", "20"])

    assert result.exit_code == 0, result.output
    assert "FxStoreWarning" not in result.output
    partial = [line for line in result.output.splitlines() if "partial record" in line]
    assert partial and all(line.startswith("Warning: ") for line in partial)


def test_read_bars_as_of_the_commit_time_shown_finds_that_version(store_copy: Path) -> None:
    (version,) = list_bar_versions(_series(store_copy))

    table = fxstore.open(store_copy).read_bars("ES.FUT", as_of=version.committed_at)

    assert table.num_rows > 0


def test_read_bars_version_given_as_a_string_is_refused(store_copy: Path) -> None:
    with pytest.raises(InvalidInputError) as info:
        fxstore.open(store_copy).read_bars("ES.FUT", version="1")  # type: ignore[arg-type]

    assert str(info.value) == "`version` must be a whole number (1, 2, ...), was '1'."


def test_backtest_of_a_cache_older_than_its_bars_warns(store_copy: Path) -> None:
    manifest = _series(store_copy) / "v0001" / "manifest.json"
    commit_edited_version(manifest, lambda m: m.update(days=m["days"][:-5]))  # type: ignore[index]

    with pytest.warns(FxStoreWarning, match=r"built from version 1 of .*, which has other bars"):
        run_backtest(BacktestConfig(walkforward=FOLDS, plots=False), store_copy)


def test_open_dbn_counts_and_names_a_record_whose_type_byte_changed(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    from fxstore.ingest.dbn.reader import open_dbn

    (first,) = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))[:1]
    with zstandard.ZstdDecompressor().stream_reader(first.read_bytes()) as reader:
        data = bytearray(reader.read())
    start = 8 + int.from_bytes(data[4:8], "little")  # "DBN", version, metadata length
    data[start + 5 * 368 + 1] = 0x0B  # the sixth record's rtype: no longer MBP-10 (0x0A)
    path = tmp_path / first.name.removesuffix(".zst")
    path.write_bytes(bytes(data))
    source = open_dbn([path])

    with pytest.warns(FxStoreWarning, match=r": 1 records are not MBP-10 \(1 of rtype 0x0B;"):
        n_read = sum(len(chunk.records) for chunk in source.iter_chunks())

    (stats,) = source.stats.files
    assert stats.skipped_rtypes == ((0x0B, 1),) and stats.n_records == n_read


def _cut_last_day(folder: Path, end: str = "as it was", limit: int = 0) -> None:
    """Cut the last day file of `folder` to half its records, whole ones (a plain .dbn),
    its metadata's request end moved to just after the last record kept (`end` "kept"),
    and its record limit set to `limit`."""
    from fxstore.ingest.dbn.format import MBP10_DTYPE

    last = sorted(folder.glob("*.mbp-10.dbn.zst"))[-1]
    with zstandard.ZstdDecompressor().stream_reader(last.read_bytes()) as reader:
        data = bytearray(reader.read())
    start = 8 + int.from_bytes(data[4:8], "little")
    n_kept = (len(data) - start) // 368 // 2
    kept = np.frombuffer(bytes(data[start : start + n_kept * 368]), MBP10_DTYPE)
    if end == "kept":  # DBN metadata: dataset (16 bytes), schema (2), start, end, limit (8 each)
        data[34:42] = (int(kept["ts_recv"][-1]) + 1).to_bytes(8, "little")
    data[42:50] = limit.to_bytes(8, "little")
    last.unlink()
    last.with_suffix("").write_bytes(bytes(data[: start + n_kept * 368]))


def test_ingest_of_a_plain_dbn_cut_on_a_record_boundary_warns_and_records_it(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    import json

    from fxstore.ingest.run.pipeline import ingest
    from tests.faults.conftest import INGEST

    folder = subset(two_roll_market, tmp_path / "in", n_days=4)
    _cut_last_day(folder)  # its request still ends at the session's close

    with pytest.warns(FxStoreWarning, match=r"records of 1 trading day\(s\) end well before"):
        summary = ingest(INGEST, [folder], tmp_path / "s")

    days = json.loads((summary.out_dir / "manifest.json").read_text())["days"]
    early = [d["trading_day"] for d in days if "records_end_before_close_s" in d]
    assert early == [days[-1]["trading_day"]]


@pytest.mark.parametrize(
    ("end", "limit"), [("kept", 0), ("as it was", 5_000)], ids=["request-ends", "record-limit"]
)
def test_ingest_of_a_short_request_ending_before_the_close_does_not_warn(
    two_roll_market: SynthMarket, tmp_path: Path, end: str, limit: int
) -> None:
    import json

    from fxstore.ingest.run.pipeline import ingest
    from tests.faults.conftest import INGEST

    folder = subset(two_roll_market, tmp_path / "in", n_days=4)
    _cut_last_day(folder, end, limit)  # as a request for part of the session writes it

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = ingest(INGEST, [folder], tmp_path / "s")

    assert not [w for w in caught if "end well before" in str(w.message)]
    days = json.loads((summary.out_dir / "manifest.json").read_text())["days"]
    assert not [d for d in days if "records_end_before_close_s" in d]


def _records(path: Path) -> int:
    """368-byte records after the metadata of a (zstd) DBN MBP-10 file."""
    data = path.read_bytes()
    if path.suffix == ".zst":
        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            data = reader.read()
    start = 8 + int.from_bytes(data[4:8], "little")
    return (len(data) - start) // 368


@pytest.mark.parametrize("workers", [1, 2])
def test_ingest_counts_a_record_whose_type_byte_changed_in_the_manifest(
    two_roll_market: SynthMarket, tmp_path: Path, workers: int
) -> None:
    import dataclasses
    import json

    from fxstore.ingest.run.pipeline import ingest
    from tests.faults.conftest import INGEST

    folder = subset(two_roll_market, tmp_path / "in", n_days=3)
    second = sorted(folder.glob("*.mbp-10.dbn.zst"))[1]
    with zstandard.ZstdDecompressor().stream_reader(second.read_bytes()) as reader:
        data = bytearray(reader.read())
    start = 8 + int.from_bytes(data[4:8], "little")
    data[start + 5 * 368 + 1] = 0x0B  # the sixth record's rtype: no longer MBP-10 (0x0A)
    second.unlink()
    second.with_suffix("").write_bytes(bytes(data))

    with pytest.warns(FxStoreWarning, match=r": 1 records are not MBP-10"):
        summary = ingest(dataclasses.replace(INGEST, workers=workers), [folder], tmp_path / "s")

    manifest = json.loads((summary.out_dir / "manifest.json").read_text())
    counted = {e["name"]: e["passed_over"] for e in manifest["inputs"] if "passed_over" in e}
    assert counted == {
        second.with_suffix("").name: [
            {
                "rtype": "0x0B",
                "records": 1,
                "reason": "not MBP-10 (0x0A): a damaged record header or another schema's record",
            }
        ]
    }
    assert manifest["n_records_passed_over"] == 1
    # every record read is in a day's n_records (MBP-10) or passed over and counted
    read = sum(d["n_records"] for d in manifest["days"])
    assert read + 1 == sum(_records(p) for p in folder.glob("*.mbp-10.dbn*"))
    listing = CliRunner().invoke(
        cli, ["info", "ES.FUT", "--versions", "--store", str(tmp_path / "s")]
    )
    assert "1 records passed over (not MBP-10)" in listing.output
