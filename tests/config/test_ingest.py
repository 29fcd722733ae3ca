from __future__ import annotations

import pytest

from fxstore.config import IngestConfig, InstrumentSelection, RollConfig
from fxstore.errors import InvalidInputError

pytestmark = pytest.mark.quick


@pytest.mark.parametrize(
    ("text", "expected", "key"),
    [
        ("all", InstrumentSelection("all"), "mbp10"),
        ("id=5482", InstrumentSelection("id", 5482), "mbp10_instr5482"),
        ("front-month", InstrumentSelection("front-month"), "mbp10_front_month"),
        ("Front-Month", InstrumentSelection("front-month"), "mbp10_front_month"),
    ],
)
def test_instrument_selection_parse_valid_gives_selection_and_key(
    text: str, expected: InstrumentSelection, key: str
) -> None:
    selection = InstrumentSelection.parse(text)
    assert selection == expected
    assert selection.key == key


@pytest.mark.parametrize("text", ["", "id=", "id=-3", "id=99999999999", "front", "ids=4"])
def test_instrument_selection_parse_invalid_raises_naming_option(text: str) -> None:
    with pytest.raises(InvalidInputError, match="--instrument-mode"):
        InstrumentSelection.parse(text)


@pytest.mark.parametrize(
    ("mode", "instrument_id"), [("id", None), ("all", 5), ("front-month", 5), ("some", None)]
)
def test_instrument_selection_inconsistent_fields_raise(
    mode: str, instrument_id: int | None
) -> None:
    with pytest.raises(InvalidInputError, match=r"`(mode|instrument_id)`"):
        InstrumentSelection(mode, instrument_id)  # type: ignore[arg-type]


def test_ingest_config_refuses_unparsed_text_naming_the_parser() -> None:
    with pytest.raises(InvalidInputError, match=r"InstrumentSelection\.parse"):
        IngestConfig(instrument_mode="all")  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["all", "id=5482", "front-month"])
def test_ingest_config_records_the_selection_as_the_option_text(text: str) -> None:
    config = IngestConfig(instrument_mode=InstrumentSelection.parse(text))

    assert config.to_json()["instrument_mode"] == text


@pytest.mark.parametrize(
    ("depth", "message"),
    [
        (0, "`--depth` must be >= 1, was 0."),
        (1.5, "`--depth` must be a whole number, was 1.5."),
        (13, "`--depth` must be at most 12 (a contract that far out barely trades), was 13."),
    ],
)
def test_roll_config_invalid_depth_raises_naming_the_option(depth: float, message: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        RollConfig(depth=depth)  # type: ignore[arg-type]
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("depth", "store_symbol", "recorded"), [(1, "ES.FUT", None), (2, "ES.FUT.2", 2)]
)
def test_ingest_config_depth_names_its_store_symbol_and_is_recorded_above_one(
    depth: int, store_symbol: str, recorded: int | None
) -> None:
    config = IngestConfig(roll=RollConfig(depth=depth))

    assert config.store_symbol == store_symbol
    assert config.instrument_key == "mbp10_front_month"
    roll = config.to_json().get("roll")
    assert (roll or {}).get("depth") == recorded  # type: ignore[attr-defined]


def test_ingest_config_depth_outside_front_month_mode_raises() -> None:
    with pytest.raises(InvalidInputError, match="front-month only, was all"):
        IngestConfig(instrument_mode=InstrumentSelection("all"), roll=RollConfig(depth=2))
