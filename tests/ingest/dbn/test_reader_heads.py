"""Opening DBN files from their first bytes (objects in storage, read by a byte range)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from fxstore.config import SynthConfig
from fxstore.errors import SchemaError
from fxstore.ingest.dbn import reader
from fxstore.ingest.dbn.reader import DbnSource, open_dbn, open_dbn_heads
from tests.ingest.dbn.test_reader import PEER, PEER_MBP10


def _open_heads(paths: list[Path], reads: list[tuple[str, int]]) -> DbnSource:
    def read_head(path: Path, n_bytes: int) -> bytes:
        reads.append((path.name, n_bytes))
        with path.open("rb") as fh:
            return fh.read(n_bytes)

    return open_dbn_heads({p: p.stat().st_size for p in paths}, read_head)


@pytest.mark.parametrize("name", PEER_MBP10)
@pytest.mark.parametrize("head_bytes", [64, 1 << 18])
def test_open_dbn_heads_of_peer_file_equals_open_dbn(
    name: str, head_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "_HEAD_BYTES", head_bytes)
    reads: list[tuple[str, int]] = []

    source = _open_heads([PEER / name], reads)

    whole = open_dbn(PEER / name)
    assert source.files == whole.files
    assert source.symbology.latest_symbols() == whole.symbology.latest_symbols()
    assert reads[0] == (name, min(head_bytes, (PEER / name).stat().st_size))


def test_open_dbn_heads_reads_only_the_head_of_a_market(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fxstore.synth import generate_market

    config = SynthConfig(
        start=dt.date(2024, 3, 4), end=dt.date(2024, 3, 8), events_per_day=20_000, seed=5
    )
    generate_market(config, tmp_path)
    paths = sorted(tmp_path.glob("*.dbn.zst"))
    monkeypatch.setattr(reader, "_HEAD_BYTES", 4096)
    reads: list[tuple[str, int]] = []

    source = _open_heads(paths, reads)

    whole = open_dbn(paths)
    assert source.files == whole.files
    assert source.definitions == whole.definitions
    assert source.symbology.latest_symbols() == whole.symbology.latest_symbols()
    sizes = {p.name: p.stat().st_size for p in paths}
    assert sum(n for _, n in reads) < sum(sizes.values()) / 4  # the heads, not the files


def test_open_dbn_heads_of_a_file_that_is_no_dbn_says_so() -> None:
    path = Path(__file__)

    with pytest.raises(SchemaError, match="not a DBN file"):
        _open_heads([path], [])
