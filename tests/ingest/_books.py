"""MBP-10 records built in code for the bar tests: hand-written events and random days.

Independent of :mod:`fxstore.synth` on purpose: these books only need to be valid
``MBP10_DTYPE`` arrays with known contents, not a realistic market.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fxstore.ingest.dbn.format import (
    F_BAD_TS_RECV,
    F_LAST,
    F_MAYBE_BAD_BOOK,
    MBP10_DTYPE,
    N_LEVELS,
    RTYPE_MBP10,
    UNDEF_PRICE,
)

TICK = 0.25
#: 2024-03-04 17:00 America/Chicago (the open of trading day 2024-03-05), ns UTC.
T0 = 1_709_593_200_000_000_000
SECOND = 1_000_000_000
INSTRUMENT_ID = 7
Records = npt.NDArray[np.void]


def to_fixed(price: float) -> int:
    """Index points to int64 fixed point (1e-9); NaN to UNDEF_PRICE."""
    return UNDEF_PRICE if math.isnan(price) else round(price * 1e9)


@dataclass(frozen=True)
class Event:
    """One record: `ts` ns after T0; `last` sets F_LAST; `flags` adds other flag bits."""

    ts: int
    action: str = "A"
    side: str = "B"
    price: float = 5000.0
    size: int = 1
    last: bool = True
    flags: int = 0


def trade(ts: int, side: str, price: float, size: int = 1, *, last: bool = True) -> Event:
    """A trade record ('T') with aggressor `side` ('B', 'A' or 'N')."""
    return Event(ts, "T", side, price, size, last)


def quote(ts: int, *, last: bool = True, flags: int = 0) -> Event:
    """A book update ('A' on the bid) that leaves the static book unchanged."""
    return Event(ts, "A", "B", 4999.75, 1, last, flags)


def make_records(events: Sequence[Event], *, bid: float = 4999.75, ask: float = 5000.0) -> Records:
    """Records for `events` over a static book: level k at `bid` - k ticks / `ask` + k ticks,
    sizes 10 + k (bid) and 20 + k (ask), counts 1 + k (bid) and 2 + k (ask)."""
    out = np.zeros(len(events), dtype=MBP10_DTYPE)
    out["length"] = MBP10_DTYPE.itemsize // 4
    out["rtype"] = RTYPE_MBP10
    out["instrument_id"] = INSTRUMENT_ID
    for i, event in enumerate(events):
        row = out[i : i + 1]
        row["ts_recv"] = row["ts_event"] = T0 + event.ts
        row["action"], row["side"] = event.action.encode(), event.side.encode()
        row["price"], row["size"] = to_fixed(event.price), event.size
        row["flags"] = (F_LAST if event.last else 0) | event.flags
        row["sequence"] = i + 1
    for k in range(N_LEVELS):
        out[f"bid_px_{k:02d}"] = to_fixed(bid - k * TICK)
        out[f"ask_px_{k:02d}"] = to_fixed(ask + k * TICK)
        out[f"bid_sz_{k:02d}"], out[f"ask_sz_{k:02d}"] = 10 + k, 20 + k
        out[f"bid_ct_{k:02d}"], out[f"ask_ct_{k:02d}"] = 1 + k, 2 + k
    return out


def set_level(
    records: Records, i: int, side: str, level: int, price: float, size: int, count: int = 1
) -> None:
    """Set one book level of record `i` in place; NaN `price` empties it (size and count 0)."""
    empty = math.isnan(price)
    records[f"{side}_px_{level:02d}"][i] = to_fixed(price)
    records[f"{side}_sz_{level:02d}"][i] = 0 if empty else size
    records[f"{side}_ct_{level:02d}"][i] = 0 if empty else count


def random_day(
    rng: np.random.Generator,
    n_packets: int,
    *,
    p_trade: float = 0.3,
    p_unsigned: float = 0.1,
    p_flag: float = 0.01,
    gap_ns: int = 2 * SECOND,
) -> Records:
    """A random day: packets of 1-4 records sharing one ts_recv, F_LAST on each packet's last.

    Trades are a fraction `p_trade` of the records, `p_unsigned` of them with side 'N'; the
    best bid walks in ticks, the ask is 1-2 ticks above it (equal to it, locked, in 2% of the
    records); levels are empty from a random depth on; F_BAD_TS_RECV and F_MAYBE_BAD_BOOK
    are set on a fraction `p_flag` of the records each.
    """
    per_packet = rng.integers(1, 5, n_packets)
    n = int(per_packet.sum())
    packet = np.repeat(np.arange(n_packets), per_packet)
    is_last = np.r_[packet[1:] != packet[:-1], True] if n else np.zeros(0, bool)
    ts_packet = T0 + np.cumsum(rng.integers(1, gap_ns, n_packets))
    best_bid = 5000.0 + TICK * np.cumsum(rng.integers(-1, 2, n))
    spread = TICK * np.where(rng.random(n) < 0.02, 0, rng.integers(1, 3, n))
    is_trade = rng.random(n) < p_trade
    trade_px = np.where(rng.random(n) < 0.5, best_bid, best_bid + spread)
    sides = np.where(rng.random(n) < p_unsigned, "N", np.where(rng.random(n) < 0.5, "B", "A"))
    events = [
        Event(
            int(ts_packet[packet[i]] - T0),
            "T" if is_trade[i] else str(rng.choice(["A", "C", "M"])),
            str(sides[i]) if is_trade[i] else str(rng.choice(["B", "A"])),
            float(trade_px[i] if is_trade[i] else best_bid[i] - TICK * rng.integers(0, 10)),
            int(rng.integers(1, 30)),
            bool(is_last[i]),
            int(
                F_BAD_TS_RECV * (rng.random() < p_flag) | F_MAYBE_BAD_BOOK * (rng.random() < p_flag)
            ),
        )
        for i in range(n)
    ]
    records = make_records(events)
    _randomise_book(rng, records, best_bid, best_bid + spread)
    return records


def _randomise_book(
    rng: np.random.Generator, records: Records, best_bid: np.ndarray, best_ask: np.ndarray
) -> None:
    n = records.shape[0]
    for side, best, step in (("bid", best_bid, -TICK), ("ask", best_ask, TICK)):
        depth = np.where(rng.random(n) < 0.8, N_LEVELS, rng.integers(0, N_LEVELS, n))
        for k in range(N_LEVELS):
            empty = k >= depth
            records[f"{side}_px_{k:02d}"] = np.where(
                empty, UNDEF_PRICE, np.round((best + k * step) * 1e9).astype(np.int64)
            )
            records[f"{side}_sz_{k:02d}"] = np.where(empty, 0, rng.integers(1, 200, n))
            records[f"{side}_ct_{k:02d}"] = np.where(empty, 0, rng.integers(1, 20, n))


def trade_records(
    ts_ns: npt.NDArray[np.int64],
    sign: npt.NDArray[np.int8],
    size: npt.NDArray[np.int64],
    price: npt.NDArray[np.float64] | None = None,
) -> Records:
    """Trades only, each its own packet (F_LAST), built without a Python loop.

    `ts_ns` is ns after T0; `sign` +1 gives side 'B', -1 side 'A', 0 side 'N'; `price` in
    index points defaults to 5000. The book levels are left empty.
    """
    out = np.zeros(ts_ns.shape[0], dtype=MBP10_DTYPE)
    out["ts_recv"] = T0 + ts_ns
    out["instrument_id"] = INSTRUMENT_ID
    out["action"] = b"T"
    out["side"] = np.where(sign > 0, b"B", np.where(sign < 0, b"A", b"N"))
    out["price"] = np.round((5000.0 if price is None else price) * 1e9).astype(np.int64)
    out["size"] = size
    out["flags"] = F_LAST
    for side in ("bid", "ask"):
        for k in range(N_LEVELS):
            out[f"{side}_px_{k:02d}"] = UNDEF_PRICE
    return out
