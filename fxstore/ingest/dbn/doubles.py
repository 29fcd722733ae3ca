"""Inputs that would count the same records twice, refused when the files are opened.

A .dbn beside its .dbn.zst, a renamed copy, a hard link, or two downloads of the same
product that overlap in time would each feed their records into the ts_recv merge twice:
doubled volume and extra bars on those days, with nothing to show for it. Files that
overlap in time are fine when they hold different instruments (an ES and an NQ download);
files that overlap in time and share an instrument are refused, naming both.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Final

from fxstore.errors import InvalidInputError
from fxstore.ingest.dbn.file import DbnFile
from fxstore.ingest.dbn.symbology import Symbology

__all__ = ["check_no_doubles"]

_NEVER: Final = 2**63 - 1


def _instruments(file: DbnFile) -> frozenset[int]:
    symbology = Symbology()
    symbology.add_metadata(file.metadata)
    return frozenset(symbology.instrument_ids())


def _request(file: DbnFile) -> tuple[object, ...]:
    """What a file's metadata says was asked for (not how it was encoded: DBN version)."""
    meta = file.metadata
    return (meta.dataset, meta.schema, meta.start, meta.end, meta.symbols, meta.stype_in)


def _shares_instruments(a: DbnFile, b: DbnFile) -> bool:
    ids_a, ids_b = _instruments(a), _instruments(b)
    if ids_a and ids_b:
        return not ids_a.isdisjoint(ids_b)
    # no id side in a mapping (or no mappings): the requested symbols are all we know
    return not set(a.metadata.symbols).isdisjoint(b.metadata.symbols)


def _same_file(files: Sequence[DbnFile]) -> None:
    seen: dict[tuple[int, int], DbnFile] = {}
    for file in files:
        try:
            stat = os.stat(file.path)
        except OSError:
            continue  # opened a moment ago; a read error will name it
        key = (stat.st_dev, stat.st_ino)
        if key in seen:
            raise InvalidInputError(
                f"{seen[key].path} and {file.path} are the same file (a hard link): its "
                "records would be read twice; pass one of them."
            )
        seen[key] = file


def check_no_doubles(files: Sequence[DbnFile]) -> None:
    """Raise when two of `files` (sorted by first ts_recv) would give the same records twice.

    Raises
    ------
    InvalidInputError
        Two paths of one file (a hard link); two files of the same request and first record
        (a copy, a .dbn beside its .dbn.zst, or the same data in another DBN version); two
        files that overlap in time and share an instrument.
    """
    _same_file(files)
    active: list[DbnFile] = []  # files whose time span may still reach later files
    for file in files:
        if file.first_ts_recv is None:
            continue
        active = [a for a in active if (a.metadata.end or _NEVER) > file.first_ts_recv]
        for earlier in active:
            if _request(earlier) == _request(file) and earlier.first_record == file.first_record:
                raise InvalidInputError(
                    f"{earlier.path} and {file.path} hold the same records (same request and "
                    "first record: a copy, or a .dbn beside its .dbn.zst); pass one of them."
                )
            if not _shares_instruments(earlier, file):
                continue
            raise InvalidInputError(
                f"{earlier.path} and {file.path} overlap in time and share instruments: their "
                "common records would be counted twice; pass files that do not overlap (one "
                "download per product and period)."
            )
        active.append(file)
