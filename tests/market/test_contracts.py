from __future__ import annotations

import datetime as dt

import pytest

from fxstore.errors import InvalidInputError
from fxstore.market.contracts import Contract, parse_outright, root_of_outright, root_of_parent

pytestmark = pytest.mark.quick

JAN_2024 = dt.date(2024, 1, 2)


@pytest.mark.parametrize(
    ("symbol", "root", "on", "year", "month"),
    [
        ("ESH4", "ES", JAN_2024, 2024, 3),
        ("ESZ4", "ES", JAN_2024, 2024, 12),
        ("ESH24", "ES", JAN_2024, 2024, 3),
        ("ESH0", "ES", dt.date(2029, 12, 3), 2030, 3),  # decade wrap
        ("ESZ9", "ES", dt.date(2029, 12, 3), 2029, 12),
        ("6EM5", "6E", dt.date(2025, 4, 1), 2025, 6),
        ("CLF25", "CL", dt.date(2024, 11, 15), 2025, 1),
        ("NQU2024", "NQ", JAN_2024, 2024, 9),
    ],
)
def test_parse_outright_valid_symbols_resolve_year_against_date(
    symbol: str, root: str, on: dt.date, year: int, month: int
) -> None:
    assert parse_outright(symbol, root, on) == Contract(year=year, month=month, symbol=symbol)


@pytest.mark.parametrize(
    ("symbol", "root"),
    [
        ("ESH4-ESM4", "ES"),  # calendar spread
        ("MESH4", "ES"),  # another root sharing a suffix
        ("ESXH4", "ES"),  # another root sharing the prefix
        ("ES", "ES"),
        ("ESA4", "ES"),  # not a month code
        ("ESH", "ES"),
        ("ESH4 C4500", "ES"),  # option
        ("NQH4", "ES"),
    ],
)
def test_parse_outright_non_outrights_return_none(symbol: str, root: str) -> None:
    assert parse_outright(symbol, root, JAN_2024) is None


def test_contract_ordering_is_by_delivery_month() -> None:
    contracts = [
        Contract(2025, 3, "ESH5"),
        Contract(2024, 12, "ESZ4"),
        Contract(2024, 6, "ESM4"),
    ]
    assert [c.symbol for c in sorted(contracts)] == ["ESM4", "ESZ4", "ESH5"]


def test_root_of_parent_strips_fut_suffix() -> None:
    assert root_of_parent("ES.FUT") == "ES"


@pytest.mark.parametrize("bad", ["../ES.FUT", "es.FUT", "", "ES/NQ"])
def test_root_of_parent_invalid_symbol_raises(bad: str) -> None:
    with pytest.raises(InvalidInputError, match="`symbol`"):
        root_of_parent(bad)


@pytest.mark.parametrize(
    ("symbol", "root"),
    [("ESH4", "ES"), ("MESZ24", "MES"), ("6EM5", "6E"), ("CLF2025", "CL"), ("ZNU4", "ZN")],
)
def test_root_of_outright_gives_the_product_root(symbol: str, root: str) -> None:
    assert root_of_outright(symbol) == root


@pytest.mark.parametrize("symbol", ["ESH4-ESM4", "ESH4 C4500", "ES", "ESA4", "UD:1V: VT 0101"])
def test_root_of_outright_of_non_outright_is_none(symbol: str) -> None:
    assert root_of_outright(symbol) is None
