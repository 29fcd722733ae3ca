"""Read the synthetic market's files back without fxstore's reader (a separate, tiny decoder)."""

from __future__ import annotations

import datetime as dt
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt
import zstandard

from fxstore.ingest.dbn.format import MBP10_DTYPE, DbnMetadata, decode_metadata


def read_dbn(path: Path) -> tuple[DbnMetadata, npt.NDArray[np.void]]:
    """Decode one .dbn.zst file into its metadata and an MBP10_DTYPE record array."""
    with open(path, "rb") as fh:
        raw = zstandard.ZstdDecompressor().stream_reader(fh).read()
    assert raw[:3] == b"DBN"
    (length,) = struct.unpack_from("<I", raw, 4)
    meta = decode_metadata(raw[3], raw[8 : 8 + length], path.name)
    body = raw[8 + length :]
    assert len(body) % MBP10_DTYPE.itemsize == 0
    return meta, np.frombuffer(body, dtype=MBP10_DTYPE)


def file_day(path: Path) -> dt.date:
    """The date in a 'glbx-mdp3-YYYYMMDD.mbp-10.dbn.zst' file name."""
    return dt.datetime.strptime(path.name.split("-")[2].split(".")[0], "%Y%m%d").date()
