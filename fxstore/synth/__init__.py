"""The built-in synthetic market: Databento-style GLBX.MDP3 MBP-10 DBN files for a root.

It is fxstore's embedded default data and the test bed of every later stage: quarterly
outrights and a calendar spread rolling on CME's calendar, consistent 10-level books,
CME sessions with U-shaped activity, and an optional planted order-flow signal. Files are
real DBN version 3, zstd-compressed, readable by ``databento.DBNStore.from_file``.

Examples
--------
>>> import datetime as dt
>>> from pathlib import Path
>>> from fxstore.config import SynthConfig
>>> from fxstore.synth import generate_market
>>> cfg = SynthConfig(start=dt.date(2024, 3, 1), end=dt.date(2024, 3, 22))  # doctest: +SKIP
>>> summary = generate_market(cfg, Path("data/synth/ES"))  # doctest: +SKIP
"""

from __future__ import annotations

from fxstore.synth.contracts import Instrument, outright_id, outright_symbol, spread_id
from fxstore.synth.day import DayVolume
from fxstore.synth.market import SynthSummary, generate_market
from fxstore.synth.writer import dbn_file_name

__all__ = [
    "DayVolume",
    "Instrument",
    "SynthSummary",
    "dbn_file_name",
    "generate_market",
    "outright_id",
    "outright_symbol",
    "spread_id",
]
