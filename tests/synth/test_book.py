"""The synthetic books: kernel hand cases, then invariants over every generated record."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.ingest.dbn.format import F_LAST, F_MBP, MBP10_DTYPE, N_LEVELS, UNDEF_PRICE
from fxstore.market.calendar import session_bounds_ns
from fxstore.synth.book import (
    ASK,
    BID,
    Books,
    emit,
    init_book,
    insert_level,
    new_books,
    record_views,
    remove_level,
)
from tests.synth.conftest import Market
from tests.synth.dbn_io import file_day

pytestmark = pytest.mark.quick

TICK = 250_000_000
KEY = np.uint64(12345)


def _book(depth: int, best_bid: int = 100) -> Books:
    books = new_books(np.array([depth]))
    init_book(books, 0, best_bid, KEY, np.zeros(1, dtype=np.int64))
    return books


def _levels(r: npt.NDArray[np.void], side: str, what: str) -> npt.NDArray[np.int64]:
    """(n, 10) array of one book field: side 'bid'/'ask', what 'px'/'sz'/'ct'."""
    return np.stack([r[f"{side}_{what}_{lv:02d}"].astype(np.int64) for lv in range(N_LEVELS)], 1)


# --- kernels, hand-checked -----------------------------------------------------------


def test_init_book_full_depth_has_one_tick_spread_and_ordered_levels() -> None:
    books = _book(10)
    bid, ask = books.px[0, BID], books.px[0, ASK]
    assert (bid[0], ask[0]) == (100, 101)
    assert np.all(np.diff(bid) < 0) and np.all(np.diff(ask) > 0)
    assert np.all(books.ct[0] >= 1) and np.all(books.ct[0] <= books.sz[0])


def test_insert_level_on_full_side_drops_tenth_level() -> None:
    books = _book(10)
    old = books.px[0, ASK].copy()
    insert_level(books, 0, ASK, 0, 100, 5, 2)  # improve the ask to 100 (bid is at 100: test only)
    assert books.nlev[0, ASK] == 10
    assert books.px[0, ASK, 0] == 100 and books.sz[0, ASK, 0] == 5 and books.ct[0, ASK, 0] == 2
    np.testing.assert_array_equal(books.px[0, ASK, 1:], old[:-1])


def test_remove_level_on_full_side_reveals_deeper_level() -> None:
    books = _book(10)
    old = books.px[0, BID].copy()
    remove_level(books, 0, BID, 0, KEY, np.zeros(1, dtype=np.int64))
    assert books.nlev[0, BID] == 10
    np.testing.assert_array_equal(books.px[0, BID, :9], old[1:])
    assert books.px[0, BID, 9] in (old[9] - 1, old[9] - 2)


def test_remove_level_on_thin_side_shrinks_it() -> None:
    books = _book(5)
    old = books.px[0, ASK, :5].copy()
    remove_level(books, 0, ASK, 2, KEY, np.zeros(1, dtype=np.int64))
    assert books.nlev[0, ASK] == 4
    np.testing.assert_array_equal(books.px[0, ASK, :4], np.delete(old, 2))


def test_emit_thin_book_writes_undef_beyond_last_level() -> None:
    books = _book(5)
    buf = np.zeros(1, dtype=MBP10_DTYPE)
    header = np.array([42, 1_000, 2_000, 500, 7, TICK], dtype=np.int64)
    emit(record_views(buf), 0, books, 0, header, ord("A"), ord("B"), 3, 98, 4, F_MBP)
    rec = buf[0]
    assert (rec["length"], rec["rtype"], rec["publisher_id"], rec["instrument_id"]) == (
        92,
        10,
        1,
        42,
    )
    assert (rec["ts_event"], rec["ts_recv"], rec["ts_in_delta"], rec["sequence"]) == (
        1000,
        2000,
        500,
        7,
    )
    assert (rec["action"], rec["side"], rec["depth"], rec["flags"]) == (b"A", b"B", 3, F_MBP)
    assert rec["price"] == 98 * TICK and rec["size"] == 4
    assert rec["bid_px_00"] == 100 * TICK and rec["ask_px_00"] == 101 * TICK
    assert rec["bid_px_05"] == UNDEF_PRICE and rec["bid_sz_05"] == 0 and rec["ask_ct_09"] == 0


# --- invariants over every record of the roll market -----------------------------------


@pytest.fixture(scope="module")
def recs(roll_market: Market) -> npt.NDArray[np.void]:
    return roll_market.records


def test_records_header_fields_are_glbx_mbp10(recs: npt.NDArray[np.void]) -> None:
    assert np.all(recs["length"] == 92) and np.all(recs["rtype"] == 0x0A)
    assert np.all(recs["publisher_id"] == 1)
    assert set(np.unique(recs["action"])) == {b"A", b"C", b"M", b"T"}
    assert np.all(recs["depth"] < N_LEVELS)


def test_records_book_never_crossed_or_locked(recs: npt.NDArray[np.void]) -> None:
    bid, ask = recs["bid_px_00"], recs["ask_px_00"]
    both = (bid != UNDEF_PRICE) & (ask != UNDEF_PRICE)
    assert both.mean() > 0.99
    assert np.all(bid[both] < ask[both])


def test_records_prices_on_tick_grid_spreads_on_a_fifth_of_it(
    recs: npt.NDArray[np.void],
) -> None:
    is_spread = recs["instrument_id"] >= 1_000_000  # spread ids (see synth.contracts)
    for rows, tick in ((~is_spread, TICK), (is_spread, TICK // 5)):
        assert np.all(recs["price"][rows] % tick == 0)
        for side in ("bid", "ask"):
            px = _levels(recs[rows], side, "px")
            assert np.all(px[px != UNDEF_PRICE] % tick == 0)
    spread_px = recs["bid_px_00"][is_spread]
    assert np.any(spread_px % TICK != 0)  # the finer tick is used, not only 0.25 multiples


@pytest.mark.parametrize("side", ["bid", "ask"])
def test_records_levels_strictly_ordered_and_empty_levels_undefined(
    recs: npt.NDArray[np.void], side: str
) -> None:
    px, sz, ct = (_levels(recs, side, what) for what in ("px", "sz", "ct"))
    empty = px == UNDEF_PRICE
    np.testing.assert_array_equal(empty, sz == 0)
    np.testing.assert_array_equal(empty, ct == 0)
    assert not np.any(empty[:, :-1] & ~empty[:, 1:]), "a filled level behind an empty one"
    assert empty.any(), "thin books (spreads, deferred) must show empty levels"
    both = ~empty[:, :-1] & ~empty[:, 1:]
    step = np.diff(px, axis=1)
    assert np.all(step[both] < 0) if side == "bid" else np.all(step[both] > 0)
    assert np.all((ct >= 1)[~empty]) and np.all((ct <= sz)[~empty])


def test_records_packets_end_with_f_last(roll_market: Market) -> None:
    for path, _, recs in roll_market.files:
        last = (recs["flags"] & F_LAST) != 0
        assert last[-1], path.name
        inner = np.flatnonzero(~last)  # records continued by the next one in the same packet
        assert np.all(recs["instrument_id"][inner + 1] == recs["instrument_id"][inner])
        assert np.all(recs["ts_event"][inner + 1] == recs["ts_event"][inner])


def test_records_ts_recv_strictly_increasing_and_after_ts_event(roll_market: Market) -> None:
    for path, _, recs in roll_market.files:
        ts_recv, ts_event = recs["ts_recv"].astype(np.int64), recs["ts_event"].astype(np.int64)
        assert np.all(np.diff(ts_recv) > 0), path.name
        assert np.all(recs["ts_in_delta"] > 0)
        assert np.all(ts_recv - ts_event >= recs["ts_in_delta"])
        assert np.all(ts_recv - ts_event < 1_000_000)  # under a millisecond


def test_records_sequence_steps_by_one_over_the_channel(roll_market: Market) -> None:
    for _, _, recs in roll_market.files:  # one file per trading day, several instruments
        seq = recs["sequence"].astype(np.int64)
        assert seq[0] == 1 and np.all(np.diff(seq) == 1)
        assert len(np.unique(recs["instrument_id"])) > 1


def test_records_trade_at_opposite_best_then_fill_record(recs: npt.NDArray[np.void]) -> None:
    t = np.flatnonzero(recs["action"] == b"T")
    side = recs["side"][t]
    assert set(np.unique(side)) == {b"A", b"B"}
    buy = side == b"B"
    best = np.where(buy, recs["ask_px_00"][t], recs["bid_px_00"][t])
    best_size = np.where(buy, recs["ask_sz_00"][t], recs["bid_sz_00"][t])
    np.testing.assert_array_equal(recs["price"][t], best)
    assert np.all(recs["size"][t] <= best_size) and np.all(recs["size"][t] >= 1)
    assert not np.any(recs["flags"][t] & F_LAST), "a trade shares its packet with the fill"
    fill = t + 1
    assert set(np.unique(recs["action"][fill])) <= {b"C", b"M"}
    np.testing.assert_array_equal(recs["side"][fill], np.where(buy, b"A", b"B"))
    np.testing.assert_array_equal(recs["price"][fill], recs["price"][t])
    np.testing.assert_array_equal(recs["size"][fill], recs["size"][t])


def test_records_trade_leaves_book_unchanged(roll_market: Market) -> None:
    names = [n for n in MBP10_DTYPE.names or () if n.startswith(("bid_", "ask_"))]
    for path, _, recs in roll_market.files:
        recs = recs[recs["ts_recv"] >= session_bounds_ns(file_day(path))[0]]  # not the pre-open
        by_inst = recs[np.argsort(recs["instrument_id"], kind="stable")]
        t = np.flatnonzero(by_inst["action"] == b"T")
        t = t[(t > 0) & (by_inst["instrument_id"][t - 1] == by_inst["instrument_id"][t])]
        for name in names:
            np.testing.assert_array_equal(by_inst[name][t], by_inst[name][t - 1], err_msg=name)


@pytest.mark.parametrize("action", [b"A", b"M"])
def test_records_add_and_modify_show_their_level(recs: npt.NDArray[np.void], action: bytes) -> None:
    rows = recs[recs["action"] == action]
    for side_byte, side in ((b"B", "bid"), (b"A", "ask")):
        sel = rows[rows["side"] == side_byte]
        px = _levels(sel, side, "px")
        at_depth = px[np.arange(len(sel)), sel["depth"]]
        np.testing.assert_array_equal(at_depth, sel["price"])
