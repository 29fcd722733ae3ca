from __future__ import annotations

import pytest

from fxstore.market.master import ROOTS
from fxstore.market.plausible import GENERIC_LIMIT, PLAUSIBLE, plausible_range

pytestmark = pytest.mark.quick


def test_plausible_ranges_cover_every_root_of_the_built_in_table() -> None:
    assert set(PLAUSIBLE) == set(ROOTS)


@pytest.mark.parametrize(
    ("symbol", "inside", "outside"),
    [
        ("ESH4", 4_810.0, 5.58e9),
        ("CLK0", -37.63, 5_000.0),  # crude settled negative in April 2020
        ("6JM4", 0.0067, 1.2),
        ("ESH4-ESM4", -55.0, -8.57e9),  # spreads: around zero
    ],
)
def test_plausible_range_holds_real_prices_and_not_absurd_ones(
    symbol: str, inside: float, outside: float
) -> None:
    lo, hi, source = plausible_range(symbol)

    assert source == "builtin" and lo <= inside <= hi and not lo <= outside <= hi


def test_plausible_range_of_an_unknown_root_is_generic_and_says_so() -> None:
    assert plausible_range("XYZH4") == (-GENERIC_LIMIT, GENERIC_LIMIT, "generic")
