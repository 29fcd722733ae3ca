"""One trading day's bar file: written once, by a worker or in-process, byte-identical.

Both the in-process path and the pool's workers write through :func:`write_day_file`, so a
day's file has the same bytes whoever wrote it. A worker writes each candidate's file under
``.parts/`` beside the store's day files; the parent, which picks the front month in day
order, moves the chosen part into place with one atomic rename and deletes the others, so
the parent never compresses or hashes a day itself.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fxstore import __version__
from fxstore.config import IngestConfig
from fxstore.store import atomic_path, file_sha256

__all__ = [
    "PARTS_DIR",
    "DayFile",
    "bars_metadata",
    "combine_instruments",
    "day_file_name",
    "write_day_file",
]

#: Folder (inside a bar-key folder) where workers leave candidate day files for the parent.
PARTS_DIR: Final = ".parts"
#: Per-day data-quality counts summed from the bars (DESIGN: counted, never dropped).
_QUALITY_SUMS: Final = (
    "n_bad_ts_recv",
    "n_maybe_bad_book",
    "n_crossed",
    "n_tick_rule",
    "n_implausible_px",
)


@dataclass(frozen=True, slots=True)
class DayFile:
    """A written day file: where it is and what the manifest says of it."""

    path: Path
    n_bars: int
    sha256: str
    #: Data-quality counts summed over the bars, and ``close_reasons``: bars by why they
    #: closed (the manifest entry of the day).
    quality: dict[str, int | dict[str, int]]


def bars_metadata(config: IngestConfig) -> dict[bytes, bytes]:
    """The Parquet key-value metadata of every day file of an ingest with `config`: the
    settings that shape its bars. The price adjustment is left out: it changes no bar
    (adjusted prices are derived from the manifest's transitions when bars are read), so a
    day's file has the same bytes whatever ``--adjust`` and ``--adjust-direction``."""
    roll = dataclasses.replace(config.roll, adjust="none", direction="backward")
    shaping = dataclasses.replace(config, roll=roll)
    blob = {"version": __version__, "stage": "ingest", "config": shaping.to_json()}
    return {b"fxstore": json.dumps(blob, sort_keys=True).encode()}


def day_file_name(day: dt.date) -> str:
    """``YYYY-MM-DD.parquet``."""
    return f"{day.isoformat()}.parquet"


def combine_instruments(tables: dict[int, pa.Table]) -> pa.Table | None:
    """One day's bars of several instruments (modes all and id=N), in close-time order."""
    parts = [tables[i] for i in sorted(tables)]
    if not parts:
        return None
    table = pa.concat_tables(parts)
    if len(parts) > 1:
        table = table.sort_by([("ts_close", "ascending"), ("instrument_id", "ascending")])
    return table


def _quality(table: pa.Table) -> dict[str, int | dict[str, int]]:
    sums: dict[str, int | dict[str, int]] = {
        name: int(pc.sum(table[name]).as_py() or 0) for name in _QUALITY_SUMS
    }
    bad_book = int(pc.sum(table["has_maybe_bad_book"]).as_py() or 0)
    implausible = int(pc.sum(pc.greater(table["n_implausible_px"], 0)).as_py() or 0)
    counts = pc.value_counts(table["close_reason"]).to_pylist()
    reasons = {
        str(c["values"]): int(c["counts"]) for c in sorted(counts, key=lambda c: c["values"])
    }
    return sums | {
        "n_bars_maybe_bad_book": bad_book,
        "n_bars_implausible_px": implausible,
        "close_reasons": reasons,
    }


def write_day_file(table: pa.Table, path: Path, metadata: dict[bytes, bytes]) -> DayFile:
    """Write one day's bars to `path` atomically (zstd Parquet) and describe the file."""
    with atomic_path(path) as tmp:
        pq.write_table(table.replace_schema_metadata(metadata), tmp, compression="zstd")
    return DayFile(path, table.num_rows, file_sha256(path), _quality(table))
