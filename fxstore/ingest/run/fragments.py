"""Fragment files: one trading day's MBP-10 records cut out of one input file.

Written by :func:`fxstore.ingest.run.resplit.split_file` as raw MBP10_DTYPE records (no
header: fxstore makes and reads them, in a scratch folder, within one run) and read back
here as a record source for the day builder.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from fxstore.ingest.dbn.format import MBP10_DTYPE
from fxstore.ingest.dbn.merge import Mbp10Chunk
from fxstore.ingest.dbn.symbology import Symbology
from fxstore.store import os_errors

__all__ = ["FragmentSource"]


class FragmentSource:
    """One trading day's fragments, in file order, as a record source for the day builder."""

    def __init__(self, fragments: Sequence[tuple[Path, Path]], symbology: Symbology) -> None:
        #: (fragment file, the input file it came from)
        self._fragments = tuple(fragments)
        self._symbology = symbology
        self.n_records = 0

    @property
    def symbology(self) -> Symbology:
        return self._symbology

    def iter_chunks(self, *, chunk_records: int) -> Iterator[Mbp10Chunk]:
        """The day's records in file order, at most `chunk_records` at a time."""
        for fragment, origin in self._fragments:
            with os_errors(fragment, "read"):
                if fragment.stat().st_size == 0:
                    continue
                mapped = np.memmap(fragment, dtype=MBP10_DTYPE, mode="r")  # paged in as read
            records: npt.NDArray[np.void] = mapped.view(np.ndarray)
            self.n_records += len(records)
            for start in range(0, len(records), chunk_records):
                yield Mbp10Chunk(records[start : start + chunk_records], origin, start)
