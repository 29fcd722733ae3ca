"""The built-in synthetic market: Databento-style GLBX.MDP3 MBP-10 DBN files for a root.

It is fxstore's embedded default data and the test bed of every later stage: quarterly
outrights and a calendar spread rolling on CME's calendar, consistent 10-level books,
CME sessions with U-shaped activity, and an optional planted order-flow signal. Files are
real DBN version 3, zstd-compressed, readable by ``databento.DBNStore.from_file``.

Each trading day is made from the seed, its date and its opening and next-opening index
levels alone (computed first, serially), so its files can be written by any process:
``generate_market(..., workers=N)`` writes N files at once with the bytes of one process.

Record conventions
------------------
* Instruments: front, next and deferred quarterly outrights ("ESH4") and the front-next
  spread ("ESH4-ESM4", price = front - next, usually negative). Ids: see
  :mod:`fxstore.synth.contracts` (ESH4 -> 432403, ESH4-ESM4 -> 1432403).
* Every record carries the instrument's book after the event in levels 00-09; empty
  levels are UNDEF_PRICE with size and count 0. ``depth`` is the level the event touched.
* A packet is one exchange event; only its last record has F_LAST (128). A trade packet is
  'T' (side = aggressor: 'B' buyer-initiated at the best ask, 'A' seller-initiated at the
  best bid; price and size of the fill; the book before the fill) followed by the fill on
  the resting side: 'M' when the level shrinks, 'C' when it is used up, same price and size.
  A price move is one packet: stale levels traded through ('T' + 'C') or pulled ('C'),
  then 'A' records for the new best bid/ask.
* ``size`` of 'A'/'C'/'M' is the quantity added / removed / changed at the level. Level
  updates ('A', 'C', 'M') carry F_MBP; trades do not.
* ts_recv strictly increases through a file (records of a packet 1 ns apart); all records
  of a packet share ts_event (< ts_recv by 10-45 us) and ts_in_delta (8-22 us).
* ``sequence`` counts 1, 2, 3... per trading day over the channel (every instrument of the
  root shares one, as on CME's MDP channels); publisher_id 1 (GLBX.MDP3).
* The calendar spread ticks in 0.05 (a fifth of its legs' 0.25), as CME's ES spreads do.
* Sessions, holidays and early closes are those of :mod:`fxstore.market.calendar` (CME
  Globex equity hours): no records on a holiday; an early-close session is shorter and
  holds its hours' share of the day's records.
* Each session starts with a pre-open in the maintenance window before its open: one-record
  book packets ('A', F_LAST, no trade) in the 40 minutes before the open, with books up to
  40 ticks away from where the session opens (the day-order purge and pre-open book
  building of CME's 16:00-17:00 window); they belong to the trading day they precede.

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
