"""SynthConfig validation: bad values raise InvalidInputError naming the field."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from fxstore.config import SynthConfig
from fxstore.errors import InvalidInputError

pytestmark = pytest.mark.quick

START, END = dt.date(2024, 3, 1), dt.date(2024, 3, 22)

VALID = [
    {},
    {"events_per_day": 1_000, "seed": 0, "signal_strength": 1.0},
    {"signal_strength": 0, "root": "NQ", "split": "utc-day"},
    {"root": "6E", "tick_size": 0.00005},
    {"start": END, "end": END},
]

INVALID = [
    ({"start": "2024-03-01"}, "`start` must be a date"),
    ({"start": dt.datetime(2024, 3, 1)}, "`start` must be a date"),
    ({"end": None}, "`end` must be a date"),
    ({"start": dt.date(1999, 12, 31)}, "`start` must be between"),
    ({"end": dt.date(2100, 1, 1)}, "`end` must be between"),
    ({"start": END, "end": START}, "`end` must be on or after `start`"),
    ({"events_per_day": 5}, "`events_per_day` must be >= 1000, was 5."),
    ({"events_per_day": 2_000.0}, "`events_per_day` must be a whole number"),
    ({"events_per_day": True}, "`events_per_day` must be a whole number"),
    ({"seed": -1}, "`seed` must be >= 0"),
    ({"signal_strength": 1.5}, "`signal_strength` must be in [0, 1], was 1.5."),
    ({"signal_strength": -0.1}, "`signal_strength` must be in [0, 1]"),
    ({"signal_strength": float("nan")}, "`signal_strength` must be a finite number"),
    ({"root": ""}, "`root` must be 1-4 upper-case"),
    ({"root": "es"}, "`root` must be 1-4 upper-case"),
    ({"root": "ES.FUT"}, "`root` must be 1-4 upper-case"),
    ({"root": "12"}, "`root` must be 1-4 upper-case"),
    ({"split": "daily"}, "`split` must be 'trading-day' or 'utc-day'"),
    ({"tick_size": 0.0}, "`tick_size` must be in"),
    ({"tick_size": 1e-10}, "`tick_size` must be in"),
    ({"tick_size": 0.1234567891}, "`tick_size` must be a multiple of 1e-9"),
    ({"daily_volatility": 0.0}, "`daily_volatility` must be in"),
    ({"carry_points_per_quarter": -1.0}, "`carry_points_per_quarter` must be in"),
    ({"compression_level": 0}, "`compression_level` must be >= 1"),
    ({"signal_half_life_events": -3}, "`signal_half_life_events` must be >= 0"),
]


@pytest.mark.parametrize("overrides", VALID)
def test_synth_config_valid_values_accepted(overrides: dict[str, Any]) -> None:
    config = SynthConfig(**{"start": START, "end": END, **overrides})
    assert config.parent_symbol == f"{config.root}.FUT"


@pytest.mark.parametrize(("overrides", "message"), INVALID)
def test_synth_config_invalid_value_raises_naming_field(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError) as err:
        SynthConfig(**{"start": START, "end": END, **overrides})
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_synth_config_defaults_derive_tick_and_half_life() -> None:
    config = SynthConfig(start=START, end=END)
    assert (config.events_per_day, config.seed, config.signal_strength) == (200_000, 7, 0.0)
    assert (config.root, config.split) == ("ES", "trading-day")
    assert config.tick_fixed == 250_000_000
    assert config.signal_half_life == 20_000
    assert SynthConfig(start=START, end=END, signal_half_life_events=50).signal_half_life == 50
