"""Write MBP-10 records as zstd-compressed DBN v3 files, laid out like a Databento download.

Files are named ``glbx-mdp3-YYYYMMDD.mbp-10.dbn.zst`` (the trading day, or the UTC date
when split by UTC day). Each is streamed through one zstd frame into a temporary name in
the same folder, fsynced and renamed into place, so a killed run leaves no partial file.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Final

import numpy as np
import numpy.typing as npt
import zstandard

from fxstore.ingest import (
    WRITE_VERSION,
    DbnMetadata,
    SymbolInterval,
    encode_metadata,
)
from fxstore.market.calendar import NS_PER_DAY
from fxstore.store import fsync_dir
from fxstore.synth.contracts import Instrument

__all__ = ["DATASET", "DbnFileWriter", "dbn_file_name", "mbp10_metadata", "utc_date_of"]

logger = logging.getLogger(__name__)

DATASET: Final = "GLBX.MDP3"


def dbn_file_name(day: dt.date) -> str:
    """Databento's batch file name for `day`: 'glbx-mdp3-20240301.mbp-10.dbn.zst'."""
    return f"glbx-mdp3-{day:%Y%m%d}.mbp-10.dbn.zst"


def utc_date_of(ts_ns: int) -> dt.date:
    """UTC calendar date of a timestamp in ns since the epoch."""
    return dt.date(1970, 1, 1) + dt.timedelta(days=ts_ns // NS_PER_DAY)


def mbp10_metadata(
    parent_symbol: str,
    start_ns: int,
    end_ns: int,
    instruments: list[Instrument],
    first_date: dt.date,
    end_date: dt.date,
) -> DbnMetadata:
    """Metadata of a GLBX.MDP3 MBP-10 file queried by parent symbol.

    Every instrument maps its raw symbol to its instrument_id over UTC dates
    [first_date, end_date), as Databento's symbology does for the file's span.
    """
    unique = {inst.instrument_id: inst for inst in instruments}
    mappings = tuple(
        SymbolInterval(inst.raw_symbol, first_date, end_date, str(inst.instrument_id))
        for inst in sorted(unique.values(), key=lambda inst: inst.raw_symbol)
    )
    return DbnMetadata(
        version=WRITE_VERSION,
        dataset=DATASET,
        schema="mbp-10",
        start=start_ns,
        end=end_ns,
        limit=0,
        stype_in="parent",
        stype_out="instrument_id",
        ts_out=False,
        symbols=(parent_symbol,),
        mappings=mappings,
    )


class DbnFileWriter:
    """Stream one DBN file: metadata, then records; visible only after :meth:`commit`.

    Use as a context manager: leaving the block with an exception removes the temporary
    file; :meth:`commit` must be called for the file to appear.
    """

    def __init__(self, path: Path, metadata: DbnMetadata, level: int) -> None:
        self.path = path
        self.n_records = 0
        # the store's temp name (.NAME.XXXXXXXX.tmp), which its cleanup recognises
        self._tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        self._file: BinaryIO = open(self._tmp, "xb")  # noqa: SIM115 - closed by commit/abort
        try:
            # with a frame checksum, as Databento's encoder writes: a garbled block is named
            compressor = zstandard.ZstdCompressor(level=level, write_checksum=True)
            self._zst = compressor.stream_writer(self._file, closefd=False)
            self._zst.write(encode_metadata(metadata))
        except BaseException:
            self.abort()
            raise

    def write(self, records: npt.NDArray[np.void]) -> None:
        """Append `records` (MBP10_DTYPE, C-contiguous) to the stream."""
        self._zst.write(records.view(np.uint8).data)
        self.n_records += len(records)

    def commit(self) -> Path:
        """Finish the zstd frame, fsync, and rename the file into place (on failure the
        temporary file is removed)."""
        try:
            self._zst.close()  # type: ignore[no-untyped-call]  # ends the frame; keeps the file
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        fsync_dir(self.path.parent)
        logger.info("wrote %s (%d records)", self.path.name, self.n_records)
        return self.path

    def abort(self) -> None:
        """Drop the temporary file."""
        if not self._file.closed:
            self._file.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> DbnFileWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.abort()
