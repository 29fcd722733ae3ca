"""Definition records for every instrument the synthetic market lists, written as Databento
delivers them: one ``definition`` DBN file in the batch folder beside the MBP-10 files.

Ingest and scan then read the market's contract facts (multiplier, tick size, expiry, class)
from definition records, as they do on real data, and not from fxstore's built-in table.
Records are encoded with ``databento_dbn`` (Databento's own encoder), DBN version 3.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Final, cast

import databento_dbn as dbn
import zstandard

from fxstore.config import SynthConfig
from fxstore.market.calendar import CHICAGO
from fxstore.market.master import ROOTS
from fxstore.store import atomic_path
from fxstore.synth.contracts import Instrument
from fxstore.synth.day import DayPlan
from fxstore.synth.writer import DATASET

__all__ = ["definition_file_name", "write_definitions"]

_UNDEF_PRICE: Final = 2**63 - 1
_SCALE: Final = 1_000_000_000
# databento_dbn's stubs type its enum members as str; these are the members themselves.
_FUTURE = cast(dbn.InstrumentClass, dbn.InstrumentClass.FUTURE)
_SPREAD = cast(dbn.InstrumentClass, dbn.InstrumentClass.FUTURE_SPREAD)
_ADD = cast(dbn.SecurityUpdateAction, dbn.SecurityUpdateAction.ADD)
_DEFINITION = cast(dbn.Schema, dbn.Schema.DEFINITION)
_PARENT = cast(dbn.SType, dbn.SType.PARENT)
_INSTRUMENT_ID = cast(dbn.SType, dbn.SType.INSTRUMENT_ID)


def definition_file_name(first: dt.date, last: dt.date) -> str:
    """'glbx-mdp3-20240102-20240329.definition.dbn.zst'."""
    return f"glbx-mdp3-{first:%Y%m%d}-{last:%Y%m%d}.definition.dbn.zst"


def _expiration_ns(expiry: dt.date) -> int:
    """CME equity-index futures stop at 08:30 Chicago on their last trading day."""
    moment = dt.datetime(expiry.year, expiry.month, expiry.day, 8, 30, tzinfo=CHICAGO)
    return int(moment.timestamp()) * _SCALE


def _record(config: SynthConfig, instrument: Instrument, listed_ns: int) -> dbn.InstrumentDefMsg:
    spec = ROOTS.get(config.root)
    multiplier = _UNDEF_PRICE
    if spec is not None and not instrument.is_spread:
        multiplier = round(spec.multiplier * _SCALE)
    return dbn.InstrumentDefMsg(
        publisher_id=1,  # GLBX.MDP3
        instrument_id=instrument.instrument_id,
        ts_event=listed_ns,
        ts_recv=listed_ns,
        min_price_increment=instrument.tick_fixed(config.tick_fixed),
        display_factor=_SCALE,
        raw_symbol=instrument.raw_symbol,
        asset=config.root,
        security_type="FUT",
        instrument_class=_SPREAD if instrument.is_spread else _FUTURE,
        security_update_action=_ADD,
        expiration=_expiration_ns(instrument.expiry),
        activation=listed_ns,
        unit_of_measure_qty=multiplier,
        unit_of_measure="IPNT",
        exchange="XCME",
        group=config.root,
        currency="USD",
    )


def write_definitions(config: SynthConfig, plans: Sequence[DayPlan], out_dir: Path) -> Path:
    """Write one definition record per instrument listed on any planned day (first seen
    first, stamped at that day's session open) into `out_dir`; return the file's path."""
    first_seen: dict[int, tuple[Instrument, int]] = {}
    for plan in plans:
        for instrument in plan.instruments:
            first_seen.setdefault(instrument.instrument_id, (instrument, plan.open_ns))
    records = [_record(config, inst, ns) for inst, ns in first_seen.values()]
    metadata = dbn.Metadata(
        dataset=DATASET,
        start=plans[0].open_ns,
        end=plans[-1].close_ns,
        limit=None,
        schema=_DEFINITION,
        stype_in=_PARENT,
        stype_out=_INSTRUMENT_ID,
        symbols=[config.parent_symbol],
        partial=[],
        not_found=[],
        mappings=[],
        ts_out=False,
        version=3,
    )
    data = metadata.encode() + b"".join(bytes(r) for r in records)
    path = out_dir / definition_file_name(plans[0].trading_day, plans[-1].trading_day)
    with atomic_path(path) as tmp:
        tmp.write_bytes(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data))
    return path
