"""Small inputs cut from the two-roll market: a few trading days, and definition records with
crafted facts (what a damaged or foreign definitions file says)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import databento_dbn as dbn
import zstandard

from tests.conftest import SynthMarket

#: Trading days of the subsets: enough for one walk-forward fold of 20 + 10 days.
N_DAYS = 32


def day_files(market: SynthMarket, n_days: int = N_DAYS, start: int = 0) -> list[Path]:
    """`n_days` MBP-10 files of `market` from its `start`-th (the first: 0; the last: -1)."""
    files = sorted(market.folder.glob("*.mbp-10.dbn.zst"))
    first = start if start >= 0 else len(files) + start - n_days + 1
    return files[first : first + n_days]


def definition_records(market: SynthMarket) -> tuple[dbn.Metadata, list[dbn.InstrumentDefMsg]]:
    """The metadata and records of the market's definition file."""
    (path,) = market.folder.glob("*.definition.dbn.zst")
    with zstandard.ZstdDecompressor().stream_reader(path.read_bytes()) as reader:
        data = reader.read()
    decoder = dbn.DBNDecoder()
    decoder.write(data)
    meta, *records = decoder.decode()
    assert isinstance(meta, dbn.Metadata)
    return meta, [r for r in records if isinstance(r, dbn.InstrumentDefMsg)]


def expiration_ns(day: dt.date) -> int:
    """A definition's expiration at 08:30 Chicago (14:30 UTC in winter) of `day`."""
    return int(dt.datetime(day.year, day.month, day.day, 14, 30, tzinfo=dt.UTC).timestamp()) * 10**9


def subset(
    market: SynthMarket,
    out: Path,
    n_days: int = N_DAYS,
    only: str | None = None,
    start: int = 0,
    **futures: int,
) -> Path:
    """A folder with links to `n_days` files of `market` (from the `start`-th, as
    :func:`day_files`) and its definition file, each future's record (`only` that
    contract's, when given) with the fields `futures` set (raw DBN values: prices in 1e-9)."""
    out.mkdir(parents=True)
    for path in day_files(market, n_days, start):
        (out / path.name).symlink_to(path)
    meta, records = definition_records(market)
    for record in records:
        if str(record.instrument_class) == "F" and only in (None, record.raw_symbol):
            for name, value in futures.items():
                setattr(record, name, value)
    data = meta.encode() + b"".join(bytes(r) for r in records)
    name = "glbx-mdp3-defs.definition.dbn.zst"
    (out / name).write_bytes(zstandard.ZstdCompressor().compress(data))
    return out
