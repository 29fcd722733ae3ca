from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from fxstore.errors import InvalidInputError, SchemaError
from fxstore.market.contracts import Contract
from fxstore.market.master import (
    ROOTS,
    InstrumentMaster,
    contract_expiry,
    last_trading_day,
    read_definitions,
    root_spec,
)

pytestmark = pytest.mark.quick

PEER = Path(__file__).parents[1] / "data" / "peer-dbn"
ES_FUT = PEER / "GLBX.MDP3.definition-es-fut.dbn.zst"
ES_SPREADS = PEER / "GLBX.MDP3.definition-es-futspread.dbn.zst"


def test_read_definitions_real_esm3_gives_its_published_facts() -> None:
    (facts,) = read_definitions([ES_FUT])

    assert (facts.raw_symbol, facts.instrument_id, facts.instrument_class) == ("ESM3", 95414, "F")
    assert (facts.multiplier, facts.tick_size) == (50.0, 0.25)
    assert facts.expiration == dt.date(2023, 6, 16)
    assert facts.source == "definition"


def test_read_definitions_real_calendar_spreads_tick_a_twentieth() -> None:
    facts = {f.raw_symbol: f for f in read_definitions([ES_SPREADS])}

    assert sorted(facts) == ["ESH5-ESM5", "ESM4-ESU4"]
    assert {f.tick_size for f in facts.values()} == {0.05}
    assert {f.instrument_class for f in facts.values()} == {"S"}
    assert {f.multiplier for f in facts.values()} == {None}  # the spread record leaves it unset


def test_read_definitions_of_mbp10_file_raises_naming_the_schema() -> None:
    with pytest.raises(
        SchemaError, match=r"v3.dbn.zst: the file holds schema 'mbp-10', not 'definition'"
    ):
        read_definitions([PEER / "test_data.mbp-10.v3.dbn.zst"])


def test_master_prefers_definitions_over_the_table() -> None:
    master = InstrumentMaster.from_files([ES_FUT])

    assert master.facts("ESM3", dt.date(2023, 4, 3)).source == "definition"
    assert master.facts("ESU3", dt.date(2023, 4, 3)).source == "builtin"


def test_master_builtin_outright_has_the_table_facts_and_rule_expiry() -> None:
    facts = InstrumentMaster().facts("MNQZ4", dt.date(2024, 10, 1))

    assert (facts.multiplier, facts.tick_size, facts.expiration) == (
        2.0,
        0.25,
        dt.date(2024, 12, 20),
    )


def test_master_unknown_root_raises_naming_definitions() -> None:
    with pytest.raises(InvalidInputError, match=r"root 'XYZ'.*--definitions PATH"):
        InstrumentMaster().facts("XYZH4", dt.date(2024, 1, 2))


def test_root_spec_covers_the_roots_people_trade() -> None:
    wanted = [
        "ES",
        "MES",
        "NQ",
        "MNQ",
        "RTY",
        "M2K",
        "YM",
        "MYM",
        "CL",
        "MCL",
        "NG",
        "GC",
        "MGC",
        "SI",
        "HG",
        "ZN",
        "ZB",
        "ZF",
        "ZT",
        "6E",
        "6J",
        "6B",
    ]

    assert set(wanted) <= set(ROOTS)
    assert root_spec("ZN").tick_value == 15.625  # a half of a 32nd of $1,000 per point


# Last trading days of the December 2024 contracts, as CME published them.
@pytest.mark.parametrize(
    ("root", "expiry"),
    [
        ("ES", dt.date(2024, 12, 20)),
        ("CL", dt.date(2024, 11, 20)),
        ("MCL", dt.date(2024, 11, 19)),
        ("NG", dt.date(2024, 11, 26)),
        ("GC", dt.date(2024, 12, 27)),
        ("ZN", dt.date(2024, 12, 19)),
        ("ZF", dt.date(2024, 12, 31)),
        ("6E", dt.date(2024, 12, 16)),
    ],
)
def test_last_trading_day_december_2024_matches_cme(root: str, expiry: dt.date) -> None:
    assert last_trading_day(ROOTS[root], 2024, 12) == expiry


def test_contract_expiry_unknown_root_is_the_month_before_delivery() -> None:
    assert contract_expiry("ABC", Contract(2024, 3, "ABCH4")) == dt.date(2024, 2, 29)
