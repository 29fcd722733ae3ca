"""Roll rules on synthetic markets of ES (quarterly, cash), CL (monthly), GC (bimonthly,
deliverable) and ZN (quarterly, deliverable): symbology and daily volume made in code."""

from __future__ import annotations

import datetime as dt
import itertools
import math

import numpy as np
import pyarrow as pa
import pytest

from fxstore.config import RollConfig, parse_roll_months
from fxstore.config.ingest import RollOffsetUnit
from fxstore.errors import InvalidInputError, NoFrontMonthError
from fxstore.ingest.select.activity import DailyActivity
from fxstore.ingest.select.continuous import DatabentoMapping
from fxstore.ingest.select.front_month import FrontMonthSelector, RollEntry, select_front_month
from fxstore.ingest.select.roll_rules import OpenInterest
from fxstore.ingest.select.transitions import Transition, adjusted_column, build_transitions
from fxstore.market.calendar import MONTH_CODES, sessions
from fxstore.market.contracts import parse_outright
from fxstore.market.master import ROOTS, first_notice_day, last_trading_day
from fxstore.synth.contracts import outright_id, outright_symbol

ROOTS_TESTED = ("ES", "CL", "GC", "ZN")
NS_PER_MINUTE = 60 * 1_000_000_000

START, END = dt.date(2024, 1, 2), dt.date(2024, 12, 20)


def _contracts(root: str, day: dt.date, months: str, count: int = 4) -> list[tuple[int, int]]:
    """The next `count` contracts of `root` in `months` not expired on `day`."""
    spec = ROOTS[root]
    out: list[tuple[int, int]] = []
    year, month = day.year, day.month
    while len(out) < count:
        if MONTH_CODES[month - 1] in months and last_trading_day(spec, year, month) >= day:
            out.append((year, month))
        year, month = (year, month + 1) if month < 12 else (year + 1, 1)
    return out


def _market(
    root: str, listed_months: str | None = None
) -> tuple[DailyActivity, dict[dt.date, dict[int, str]], list[dt.date]]:
    """Every trading day of 2024: the next four contracts listed, volume moving from the
    nearest to the next one ten trading days before the nearest's last trading day."""
    spec = ROOTS[root]
    table = sessions(spec.calendar)
    days = table.between(START, END)
    rows: list[tuple[dt.date, int, int]] = []
    symbols: dict[dt.date, dict[int, str]] = {}
    for day in days:
        listed = _contracts(root, day, listed_months or spec.months)
        symbols[day] = {outright_id(root, y, m): outright_symbol(root, y, m) for y, m in listed}
        (y0, m0), (y1, m1) = listed[0], listed[1]
        crossover = table.day_before(last_trading_day(spec, y0, m0), 10)
        k = (
            len(table.between(crossover, day)) - 1
            if day >= crossover
            else -len(table.between(day, crossover))
        )
        nxt = 1.0 / (1.0 + math.exp(-(k + 0.5)))  # the next leads from the crossover on
        rows.append((day, outright_id(root, y0, m0), round(10_000 * (1 - nxt))))
        rows.append((day, outright_id(root, y1, m1), round(10_000 * nxt)))
        for y, m in listed[2:]:
            rows.append((day, outright_id(root, y, m), 50))
    rows.sort(key=lambda r: (r[0], r[1]))
    activity = DailyActivity(
        trading_day=np.array([r[0] for r in rows], dtype="datetime64[D]"),
        instrument_id=np.array([r[1] for r in rows], dtype=np.uint32),
        n_records=np.array([r[2] + 1 for r in rows], dtype=np.int64),
        volume=np.array([r[2] for r in rows], dtype=np.int64),
    )
    return activity, symbols, days


def _schedule(root: str, roll: RollConfig, listed_months: str | None = None) -> list[RollEntry]:
    activity, symbols, _ = _market(root, listed_months)
    selector = FrontMonthSelector(root, roll, table=sessions(ROOTS[root].calendar))
    return select_front_month(activity, symbols, root, selector)


def _rolls(schedule: list[RollEntry]) -> list[tuple[dt.date, str]]:
    return [(e.trading_day, e.contract) for e in schedule if e.is_roll]


def _expected_calendar_rolls(root: str, offset: int, months: str) -> list[tuple[dt.date, str]]:
    """Each contract of `months` hands over `offset` trading days before its anchor."""
    spec = ROOTS[root]
    table = sessions(spec.calendar)
    out = []
    contracts = _contracts(root, START, months, count=20)
    for (y, m), (y1, m1) in itertools.pairwise(contracts):
        ltd = last_trading_day(spec, y, m)
        notice = first_notice_day(spec, y, m)
        anchor = notice if notice is not None and notice <= ltd else ltd
        day = table.day_before(anchor, offset)
        if START < day <= END:
            out.append((day, outright_symbol(root, y1, m1)))
    return out


@pytest.mark.parametrize(
    ("root", "offset", "months"),
    [("ES", 5, "HMUZ"), ("CL", 3, MONTH_CODES), ("GC", 2, "GJMQVZ"), ("ZN", 1, "HMUZ")],
)
def test_calendar_rule_rolls_offset_trading_days_before_the_anchor(
    root: str, offset: int, months: str
) -> None:
    schedule = _schedule(root, RollConfig(rule="calendar", offset=offset))

    assert _rolls(schedule) == _expected_calendar_rolls(root, offset, months)
    assert {e.reason for e in schedule if e.is_roll} == {"calendar"}
    assert all(e.roll_day is not None and e.roll_day > e.trading_day for e in schedule)


def test_calendar_rule_on_deliverables_counts_back_from_first_notice_day() -> None:
    schedule = _schedule("GC", RollConfig(rule="calendar", offset=2))
    june = [e for e in schedule if e.contract == "GCM4"]

    # GCM4: first notice day is the last business day of May (Fri 2024-05-31), which
    # comes before its last trading day (2024-06-26); two trading days before: 05-29.
    assert june[0].anchor == "first notice day 2024-05-31"
    assert june[-1].trading_day == dt.date(2024, 5, 28)
    assert (dt.date(2024, 5, 29), "GCQ4") in _rolls(schedule)


def test_calendar_rule_on_cash_settled_counts_back_from_last_trading_day() -> None:
    schedule = _schedule("ES", RollConfig(rule="calendar", offset=0))

    # offset 0: the next contract is the front from the last trading day itself.
    assert (dt.date(2024, 3, 15), "ESM4") in _rolls(schedule)
    assert schedule[0].anchor == "last trading day 2024-03-15"


@pytest.mark.parametrize(
    ("offset", "unit", "roll_day"),
    [
        (6, "trading", dt.date(2024, 3, 7)),  # six sessions before Fri 03-15
        (6, "calendar", dt.date(2024, 3, 11)),  # Sat 03-09: the next session, Mon 03-11
        (7, "calendar", dt.date(2024, 3, 8)),  # Fri 03-08, a session itself
    ],
)
def test_calendar_rule_offset_in_calendar_days_rolls_on_the_next_session(
    offset: int, unit: RollOffsetUnit, roll_day: dt.date
) -> None:
    schedule = _schedule("ES", RollConfig(rule="calendar", offset=offset, offset_unit=unit))

    assert (roll_day, "ESM4") in _rolls(schedule)
    march = [e for e in schedule if e.contract == "ESH4"]
    assert march[-1].trading_day < roll_day


def test_calendar_day_offset_has_its_own_key_and_only_its_manifests_record_it() -> None:
    by_days = RollConfig(rule="calendar", offset=7, offset_unit="calendar")
    by_sessions = RollConfig(rule="calendar", offset=7)

    assert (by_days.key_suffix, by_sessions.key_suffix) == ("-cal7cd", "-cal7")
    assert by_days.to_json()["offset_unit"] == "calendar"
    assert "offset_unit" not in by_sessions.to_json()  # series built before it keep theirs
    with pytest.raises(InvalidInputError, match="applies to `--roll calendar` only"):
        RollConfig(offset_unit="calendar")


_ES_C0 = DatabentoMapping(
    "ES.c.0",
    "raw_symbol",
    (
        (dt.date(2024, 1, 1), dt.date(2024, 3, 8), "ESH4"),
        (dt.date(2024, 3, 8), dt.date(2024, 6, 14), "ESM4"),
        (dt.date(2024, 6, 14), dt.date(2024, 9, 13), "ESU4"),
        (dt.date(2024, 9, 13), dt.date(2024, 12, 19), "ESZ4"),
        (dt.date(2024, 12, 19), dt.date(2025, 1, 1), "ESH5"),
    ),
)


def test_databento_rule_follows_the_continuous_symbols_contract_per_trading_day() -> None:
    activity, symbols, _ = _market("ES")
    roll = RollConfig(rule="databento")
    selector = FrontMonthSelector(
        "ES", roll, table=sessions(ROOTS["ES"].calendar), continuous=_ES_C0
    )

    schedule = select_front_month(activity, symbols, "ES", selector)

    assert _rolls(schedule) == [
        (dt.date(2024, 3, 8), "ESM4"),
        (dt.date(2024, 6, 14), "ESU4"),
        (dt.date(2024, 9, 13), "ESZ4"),
        (dt.date(2024, 12, 19), "ESH5"),
    ]
    assert {e.reason for e in schedule if e.is_roll} == {"databento"}
    assert all(e.contract == _ES_C0.on(e.trading_day) for e in schedule)


def test_databento_rule_to_a_contract_the_input_does_not_list_is_an_error() -> None:
    activity, symbols, _ = _market("ES")
    mapping = DatabentoMapping("ES.c.0", "raw_symbol", ((START, END, "ESZ9"),))
    selector = FrontMonthSelector(
        "ES", RollConfig(rule="databento"), table=sessions(ROOTS["ES"].calendar), continuous=mapping
    )

    with pytest.raises(NoFrontMonthError, match=r"ES.c.0 maps 2024-01-02 to ESZ9, which is not"):
        select_front_month(activity, symbols, "ES", selector)


@pytest.mark.parametrize("root", ["ES", "CL", "GC", "ZN"])
def test_volume_rule_rolls_the_day_after_the_crossover(root: str) -> None:
    spec = ROOTS[root]
    table = sessions(spec.calendar)
    schedule = _schedule(root, RollConfig())

    rolls = _rolls(schedule)
    # The next contract leads from the crossover (ten trading days before the front's last
    # trading day) on: the schedule switches one session later.
    contracts = _contracts(root, START, spec.months, count=20)
    expected = []
    for (y, m), (y1, m1) in itertools.pairwise(contracts):
        day = table.day_before(last_trading_day(spec, y, m), 9)
        if START < day <= END:
            expected.append((day, outright_symbol(root, y1, m1)))
    assert rolls == expected
    assert {e.reason for e in schedule if e.is_roll} == {"volume"}


@pytest.mark.parametrize(
    ("root", "rule"),
    [(r, rule) for r in ("ES", "CL", "GC", "ZN") for rule in ("volume", "calendar")],
)
def test_every_rule_only_moves_forward(root: str, rule: str) -> None:
    schedule = _schedule(root, RollConfig(rule=rule, offset=2 if rule == "calendar" else 0))  # type: ignore[arg-type]
    contracts = [parse_outright(e.contract, root, e.trading_day) for e in schedule]

    assert all(c is not None for c in contracts)
    assert all(a <= b for a, b in itertools.pairwise(contracts))  # type: ignore[operator]
    assert len({e.contract for e in schedule}) == len(_rolls(schedule)) + 1


def test_roll_months_keeps_the_series_on_liquid_months() -> None:
    # GC lists every month near term; the series holds G, J, M, Q, V, Z only.
    roll = RollConfig(rule="calendar", offset=2, months=parse_roll_months("G,J,M,Q,V,Z"))
    schedule = _schedule("GC", roll, listed_months=MONTH_CODES)

    assert {c[2] for c in {e.contract for e in schedule}} <= set("GJMQVZ")
    assert _rolls(schedule) == _expected_calendar_rolls("GC", 2, "GJMQVZ")


def test_roll_months_restricts_the_volume_rule_too() -> None:
    schedule = _schedule("CL", RollConfig(months="FHKNUX"))

    assert {e.contract[2] for e in schedule} <= set("FHKNUX")
    assert len(_rolls(schedule)) >= 5


def _open_interest(rows: list[tuple[int, int, int]]) -> OpenInterest:
    rows = sorted(rows)
    return OpenInterest(
        instrument_id=np.array([r[1] for r in rows], dtype=np.uint32),
        ts_recv=np.array([r[0] for r in rows], dtype=np.int64),
        quantity=np.array([r[2] for r in rows], dtype=np.int64),
    )


def test_open_interest_rule_uses_only_values_published_before_the_open() -> None:
    table = sessions(ROOTS["ES"].calendar)
    days = table.between(dt.date(2024, 3, 4), dt.date(2024, 3, 8))
    h, m = outright_id("ES", 2024, 3), outright_id("ES", 2024, 6)
    symbols = {d: {h: "ESH4", m: "ESM4"} for d in days}
    opens = [table.bounds(d)[0] for d in days]
    oi = _open_interest(
        [
            (opens[0] - 1, h, 2_000_000),
            (opens[0] - 1, m, 1_000_000),
            # ESM4 leads in a value received one nanosecond after day 2's open: day 3 rolls.
            (opens[2] + 1, m, 2_500_000),
        ]
    )
    selector = FrontMonthSelector("ES", RollConfig(rule="open-interest"), open_interest=oi)
    rows = [(d, i, 100) for d in days for i in (h, m)]
    activity = DailyActivity(
        trading_day=np.array([r[0] for r in rows], dtype="datetime64[D]"),
        instrument_id=np.array([r[1] for r in rows], dtype=np.uint32),
        n_records=np.array([r[2] for r in rows], dtype=np.int64),
        volume=np.array([r[2] for r in rows], dtype=np.int64),
    )

    schedule = select_front_month(activity, symbols, "ES", selector)

    assert [e.contract for e in schedule] == ["ESH4", "ESH4", "ESH4", "ESM4", "ESM4"]
    assert [e.reason for e in schedule] == [
        "first-day",
        "held",
        "held",
        "open-interest",
        "held",
    ]
    assert schedule[3].prior_open_interest == 2_500_000
    assert schedule[0].to_json()["prior_open_interest"] == 2_000_000


def _published_open_interest(root: str, delay_ns: int) -> OpenInterest:
    """Each day's open interest (ten times its volume: the same ranking), received
    `delay_ns` after that day's session closed."""
    activity, _, _ = _market(root)
    table = sessions(ROOTS[root].calendar)
    days = activity.trading_day.astype(object)
    published = [table.bounds(d)[1] + delay_ns for d in days]
    ids, quantity = activity.instrument_id.tolist(), (10 * activity.volume).tolist()
    return _open_interest(list(zip(published, ids, quantity, strict=True)))


def _volume_rule_rolls(root: str) -> list[tuple[dt.date, str]]:
    """Where the volume rule rolls on `_market`: the session after the crossover."""
    spec = ROOTS[root]
    table = sessions(spec.calendar)
    out = []
    for (y, m), (y1, m1) in itertools.pairwise(_contracts(root, START, spec.months, count=20)):
        day = table.day_before(last_trading_day(spec, y, m), 9)
        if START < day <= END:
            out.append((day, outright_symbol(root, y1, m1)))
    return out


@pytest.mark.parametrize("root", ROOTS_TESTED)
def test_open_interest_rule_rolls_on_the_first_session_that_opens_after_the_crossover_is_out(
    root: str,
) -> None:
    table = sessions(ROOTS[root].calendar)
    activity, symbols, days = _market(root)
    # Published 30 minutes after the close: before the next session opens, so the rule
    # rolls one session after the crossover, as the volume rule does.
    early = FrontMonthSelector(
        root,
        RollConfig(rule="open-interest"),
        table=table,
        open_interest=_published_open_interest(root, 30 * NS_PER_MINUTE),
    )
    # Published the next morning: after the next session opened (one session later),
    # unless a weekend or holiday comes first.
    late = FrontMonthSelector(
        root,
        RollConfig(rule="open-interest"),
        table=table,
        open_interest=_published_open_interest(root, 16 * 60 * NS_PER_MINUTE),
    )

    on_time = select_front_month(activity, symbols, root, early)
    next_morning = select_front_month(activity, symbols, root, late)

    expected = _volume_rule_rolls(root)
    assert _rolls(on_time) == expected
    later = []
    for day, contract in expected:
        out = table.bounds(days[days.index(day) - 1])[1] + 16 * 60 * NS_PER_MINUTE
        later.append((next(d for d in days if table.bounds(d)[0] > out), contract))
    assert _rolls(next_morning) == later
    assert {e.reason for e in on_time + next_morning if e.is_roll} == {"open-interest"}
    assert all(e.prior_open_interest is not None for e in on_time[1:])


def _contract_close(root: str, symbol: str, day: dt.date) -> float:
    """A contract's close: a level common to the root's contracts that walks day by day,
    plus a carry that grows with the months to delivery (so every roll has a gap)."""
    contract = parse_outright(symbol, root, day)
    assert contract is not None
    months_out = (contract.year - day.year) * 12 + contract.month - day.month
    level = 100.0 + 10.0 * math.sin(day.toordinal() / 7.0) + 0.05 * (day.toordinal() % 11)
    return level + 1.5 * months_out


def _priced_series(
    root: str, roll: RollConfig
) -> tuple[list[RollEntry], dict[dt.date, dict[int, float]], pa.Table, list[Transition]]:
    """The schedule of `roll` on `_market`, every listed contract's close per day, one bar
    per day of the front month (its close), and the transitions priced from those closes."""
    _, symbols, _ = _market(root)
    schedule = _schedule(root, roll)
    closes = {
        day: {i: _contract_close(root, s, day) for i, s in listed.items()}
        for day, listed in symbols.items()
    }
    bars = pa.table(
        {
            "trading_day": pa.array([e.trading_day for e in schedule], pa.date32()),
            "close": [closes[e.trading_day][e.instrument_id] for e in schedule],
        }
    )
    transitions = build_transitions(schedule, roll, sessions(ROOTS[root].calendar), closes)
    assert len(transitions) >= 3
    return schedule, closes, bars, transitions


def _row_of(schedule: list[RollEntry], transition: Transition) -> int:
    """The schedule's (and bars') row of the transition's first day on the new contract."""
    return next(i for i, e in enumerate(schedule) if e.trading_day == transition.trading_day)


RULES = (RollConfig(), RollConfig(rule="calendar", offset=2))


@pytest.mark.parametrize("direction", ["backward", "forward"])
@pytest.mark.parametrize("roll", RULES, ids=lambda r: r.rule)
@pytest.mark.parametrize("root", ROOTS_TESTED)
def test_difference_adjusted_close_moves_across_each_roll_only_as_the_new_contract_did(
    root: str, roll: RollConfig, direction: str
) -> None:
    schedule, closes, bars, transitions = _priced_series(root, roll)

    adjusted = adjusted_column(bars, "close", transitions, "difference", direction).to_numpy()

    raw = bars.column("close").to_numpy()
    keep = -1 if direction == "backward" else 0  # the contract that keeps its prices
    kept = [e.contract == schedule[keep].contract for e in schedule]
    np.testing.assert_allclose(adjusted[kept], raw[kept])
    for t in transitions:
        k = _row_of(schedule, t)
        assert t.price_day == schedule[k - 1].trading_day
        # gap 0 at the switch: the step is the new contract's own move since the roll's prices
        own_move = closes[t.trading_day][t.to_instrument_id] - t.to_px  # type: ignore[operator]
        assert adjusted[k] - adjusted[k - 1] == pytest.approx(own_move, abs=1e-9)
        assert raw[k] - raw[k - 1] != pytest.approx(own_move, abs=1e-9)  # raw jumps


@pytest.mark.parametrize("direction", ["backward", "forward"])
@pytest.mark.parametrize("roll", RULES, ids=lambda r: r.rule)
@pytest.mark.parametrize("root", ROOTS_TESTED)
def test_ratio_adjusted_returns_equal_raw_returns_within_a_contract(
    root: str, roll: RollConfig, direction: str
) -> None:
    schedule, closes, bars, transitions = _priced_series(root, roll)

    adjusted = adjusted_column(bars, "close", transitions, "ratio", direction).to_numpy()

    raw = bars.column("close").to_numpy()
    same = np.array([a.contract == b.contract for a, b in itertools.pairwise(schedule)])
    assert (~same).sum() == len(transitions)
    np.testing.assert_allclose((adjusted[1:] / adjusted[:-1])[same], (raw[1:] / raw[:-1])[same])
    for t in transitions:  # across a roll: the new contract's own return since the roll
        k = _row_of(schedule, t)
        own = closes[t.trading_day][t.to_instrument_id] / t.to_px  # type: ignore[operator]
        assert adjusted[k] / adjusted[k - 1] == pytest.approx(own, rel=1e-12)


def test_volume_rule_entries_serialise_as_before() -> None:
    schedule = _schedule("ES", RollConfig())

    assert set(schedule[0].to_json()) == {
        "trading_day",
        "contract",
        "instrument_id",
        "prior_volume_share",
        "volume_share",
        "reason",
    }


def test_calendar_rule_without_a_later_contract_raises() -> None:
    day = dt.date(2024, 3, 14)
    selector = FrontMonthSelector("ES", RollConfig(rule="calendar", offset=5))

    with pytest.raises(NoFrontMonthError, match="rolls after it"):
        selector.start_day(day, {1: "ESH4"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rule": "volume", "offset": 3}, "`--roll-offset` applies to `--roll calendar` only"),
        ({"rule": "calendar", "offset": -1}, "`--roll-offset` must be >= 0"),
        ({"rule": "weekly"}, "`--roll` must be one of"),
        ({"adjust": "log"}, "`--adjust` must be one of"),
        ({"direction": "sideways"}, "`--adjust-direction` must be one of"),
    ],
)
def test_roll_config_rejects_bad_settings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        RollConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["GJMQVA", "GG", "march"])
def test_parse_roll_months_rejects_what_is_not_month_codes(text: str) -> None:
    with pytest.raises(InvalidInputError, match="distinct CME month codes"):
        parse_roll_months(text)


@pytest.mark.parametrize(
    ("roll", "suffix"),
    [
        (RollConfig(), ""),
        (RollConfig(adjust="ratio"), ""),
        (RollConfig(rule="open-interest"), "-oi"),
        (RollConfig(rule="calendar", offset=5, months="GJMQVZ"), "-cal5-GJMQVZ"),
        (RollConfig(months="HMUZ"), "-vol-HMUZ"),
    ],
)
def test_roll_config_key_suffix_names_the_rule(roll: RollConfig, suffix: str) -> None:
    assert roll.key_suffix == suffix
