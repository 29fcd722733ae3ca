"""The fetch request, its parts, and the API wrapper's pure helpers."""

from __future__ import annotations

import datetime as dt

import pytest

from fxstore.errors import InvalidInputError
from fxstore.fetch import FetchRequest, RetryPolicy
from fxstore.fetch.api import _option_named

pytestmark = pytest.mark.quick

DAY = dt.date(2024, 1, 2)


def _request(**changes: object) -> FetchRequest:
    fields: dict[str, object] = {"symbols": ("ES.FUT",), "start": DAY, "end": DAY}
    return FetchRequest(**(fields | changes))  # type: ignore[arg-type]


def test_parts_main_schema_first_then_definitions_and_statistics() -> None:
    parts = _request(with_definitions=True, with_statistics=True).parts()

    assert [p.schema for p in parts] == ["mbp-10", "definition", "statistics"]
    assert parts[0].end_exclusive == dt.date(2024, 1, 3)
    assert len({p.key for p in parts}) == 3


def test_part_key_is_stable_for_equal_requests() -> None:
    assert _request().parts()[0].key == _request().parts()[0].key
    assert _request().parts()[0].key != _request(end=dt.date(2024, 1, 3)).parts()[0].key


INVALID = [
    ({"symbols": ()}, "`--symbol` is empty"),
    ({"end": dt.date(2024, 1, 1)}, "`--end` 2024-01-01 is before `--start` 2024-01-02"),
    ({"schema": "mbp-11"}, "`--schema` must be one of"),
    ({"stype_in": "smart"}, "`--stype-in` must be one of"),
    ({"dataset": "../x"}, "`dataset` may hold only"),
    ({"symbols": ("ES;rm",)}, "`--symbol` 'ES;rm' is not a Databento symbol"),
    ({"symbols": tuple(f"S{i}" for i in range(2001))}, "at most 2,000"),
    ({"max_cost_usd": -1.0}, "`max-cost` must be >"),
]


@pytest.mark.parametrize(("changes", "message"), INVALID)
def test_request_invalid_field_raises(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(")):
        _request(**changes)


@pytest.mark.parametrize(
    ("detail", "option"),
    [
        ("data_start_before_available_start: The dataset ...", "--start"),
        ("data_end_after_available_end: ...", "--end"),
        ("symbology_invalid_symbol: Invalid symbols 'ESX'", "--symbol"),
        ("Unknown dataset 'GLBX.X'", "--dataset"),
        ("invalid stype_in for this dataset", "--stype-in"),
        ("something else entirely", "the request"),
    ],
)
def test_option_named_finds_the_argument_a_422_is_about(detail: str, option: str) -> None:
    assert _option_named(detail) == option


def test_retry_policy_doubles_up_to_its_cap_and_honours_retry_after() -> None:
    policy = RetryPolicy(backoff_s=1.0, max_backoff_s=5.0)

    assert [policy.wait_s(n, None) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert policy.wait_s(1, "3") == 3.0
