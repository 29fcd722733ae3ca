"""The inputs of the roll rules beyond previous-day volume: open interest and calendar anchors.

* ``open-interest``: CME publishes each contract's open interest of a trade date during the
  next one (Databento ``statistics`` records, ``stat_type`` OPEN_INTEREST). The choice for
  trading day D takes, per contract, the latest value received *before D's session opens*
  (ts_recv < 17:00 Chicago on D-1), so it never uses a number that was not out yet.
* ``calendar``: a contract stops being the front month `offset` trading days before its
  *anchor*: the first notice day of a deliverable product whose notices precede the last
  trading day (COMEX metals, CBOT Treasuries), else the last trading day. The anchor comes
  from the instrument master (a definition record's expiration, else fxstore's table of CME
  roots); a contract with neither is an error naming ``--definitions``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import databento_dbn
import numpy as np
import numpy.typing as npt

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.market.contracts import Contract
from fxstore.market.master import InstrumentMaster, first_notice_day, root_spec

__all__ = [
    "CalendarAnchor",
    "OpenInterest",
    "calendar_anchor",
    "read_open_interest",
]

_OPEN_INTEREST: Final = int(databento_dbn.StatType.OPEN_INTEREST)


@dataclass(frozen=True, slots=True, eq=False)
class OpenInterest:
    """Open interest as published: one row per statistics record, sorted by ts_recv.

    Compared and hashed by identity (it holds arrays), so the plan holding it stays hashable.
    """

    instrument_id: npt.NDArray[np.uint32]
    #: When the value was received, int64 ns UTC.
    ts_recv: npt.NDArray[np.int64]
    #: Open contracts.
    quantity: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.ts_recv.size)

    def as_of(self, ts_ns: int) -> dict[int, int]:
        """instrument_id → the latest open interest received strictly before `ts_ns`."""
        n = int(np.searchsorted(self.ts_recv, np.int64(ts_ns), side="left"))
        out: dict[int, int] = {}
        for key, value in zip(
            self.instrument_id[:n].tolist(), self.quantity[:n].tolist(), strict=True
        ):
            out[key] = value  # rows in ts_recv order: the last one wins
        return out


def _decode(path: Path) -> list[object]:
    import zstandard

    try:
        data = path.read_bytes()
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot read the file ({err.strerror}).") from err
    if data[:4] == b"\x28\xb5\x2f\xfd":
        try:
            with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as rd:
                data = rd.read()
        except zstandard.ZstdError as err:
            raise SchemaError(f"{path}: the Zstandard data is corrupt ({err}).") from err
    decoder = databento_dbn.DBNDecoder(
        upgrade_policy=databento_dbn.VersionUpgradePolicy.UPGRADE_TO_V3  # type: ignore[arg-type]
    )
    try:
        decoder.write(data)
        records: list[object] = list(decoder.decode())
    except ValueError as err:
        raise SchemaError(f"{path}: not a readable DBN file ({err}).") from err
    meta = records[0] if records else None
    schema = meta.schema if isinstance(meta, databento_dbn.Metadata) else None
    if schema != databento_dbn.Schema.STATISTICS:
        name = "unknown" if schema is None else str(schema)
        raise SchemaError(
            f"{path}: the file holds schema {name!r}, not 'statistics'; pass Databento "
            "statistics records (schema='statistics') with --statistics."
        )
    return records[1:]


def read_open_interest(paths: Sequence[Path]) -> OpenInterest:
    """The open-interest records of Databento statistics files.

    Raises
    ------
    InvalidInputError
        A file that cannot be read.
    SchemaError
        A file that is not DBN of schema statistics.
    """
    rows: list[tuple[int, int, int]] = []
    for path in map(Path, paths):
        for rec in _decode(path):
            if isinstance(rec, databento_dbn.StatMsg) and int(rec.stat_type) == _OPEN_INTEREST:
                rows.append((int(rec.ts_recv), int(rec.instrument_id), int(rec.quantity)))
    rows.sort()
    return OpenInterest(
        instrument_id=np.array([r[1] for r in rows], dtype=np.uint32),
        ts_recv=np.array([r[0] for r in rows], dtype=np.int64),
        quantity=np.array([r[2] for r in rows], dtype=np.int64),
    )


@dataclass(frozen=True, slots=True)
class CalendarAnchor:
    """The day a contract's calendar roll counts back from."""

    day: dt.date
    #: "first notice day" or "last trading day".
    kind: str


def calendar_anchor(
    master: InstrumentMaster, root: str, contract: Contract, on: dt.date
) -> CalendarAnchor:
    """The calendar-roll anchor of `contract`: its first notice day where that precedes its
    last trading day (built-in table), else its last trading day (definition or table).

    Raises
    ------
    InvalidInputError
        No expiry is known for the contract: neither a definition record nor fxstore's table.
    """
    try:
        facts = master.facts(contract.symbol, on)
    except InvalidInputError as err:
        raise InvalidInputError(
            f"`--roll calendar` needs the last trading day of {contract.symbol}: fxstore's "
            f"table does not hold root {root!r}; pass Databento definition records with "
            "--definitions PATH."
        ) from err
    if facts.expiration is None:
        raise InvalidInputError(
            f"`--roll calendar` needs the last trading day of {contract.symbol}: its "
            "definition record leaves the expiration unset; pass --definitions PATH with "
            "records that carry it."
        )
    try:
        notice = first_notice_day(root_spec(root), contract.year, contract.month)
    except InvalidInputError:  # a root only definitions know: no notice-day rule
        notice = None
    if notice is not None and notice <= facts.expiration:
        return CalendarAnchor(notice, "first notice day")
    return CalendarAnchor(facts.expiration, "last trading day")
