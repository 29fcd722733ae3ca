"""The checks behind every config's ``__post_init__``: one ``validate_*`` helper per kind of value.

Each raises :class:`~fxstore.errors.InvalidInputError` with a message that names the field,
the rule and the value it was given, and returns the value checked (a float for numbers).
"""

from __future__ import annotations

import datetime as dt
import math

from fxstore.errors import InvalidInputError


def validate_number(
    name: str, value: object, *, above: float = -math.inf, integral: bool = False
) -> float:
    """Return `value` as a float, or raise unless it is finite, > `above` (and whole)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"`{name}` must be a finite number, was {value!r}.")
    if value <= above:
        raise InvalidInputError(f"`{name}` must be > {above:g}, was {value!r}.")
    if integral and value != int(value):
        raise InvalidInputError(f"`{name}` must be a whole number, was {value!r}.")
    return float(value)


def validate_at_least(name: str, value: object, low: float, *, integral: bool = False) -> float:
    """Return `value` as a float, or raise unless it is a finite number >= `low` (and whole)."""
    number = validate_number(name, value, integral=integral)
    if number < low:
        raise InvalidInputError(f"`{name}` must be >= {low:g}, was {value!r}.")
    return number


def validate_in_range(
    name: str,
    value: object,
    low: float,
    high: float,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> float:
    """Return `value` as a float, or raise unless it is a finite number in the interval."""
    number = validate_number(name, value)
    if (number < low or (open_low and number == low)) or (
        number > high or (open_high and number == high)
    ):
        interval = f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
        raise InvalidInputError(f"`{name}` must be in {interval}, was {value!r}.")
    return number


def validate_int(name: str, value: object, low: int, high: int) -> int:
    """Return `value`, or raise unless it is an int (not a bool, not a float) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"`{name}` must be a whole number, was {value!r}.")
    if value < low:
        raise InvalidInputError(f"`{name}` must be >= {low}, was {value!r}.")
    if value > high:
        raise InvalidInputError(f"`{name}` must be <= {high}, was {value!r}.")
    return value


def validate_date(name: str, value: object, first: dt.date, last: dt.date) -> dt.date:
    """Return `value`, or raise unless it is a date (not a datetime) in [first, last]."""
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise InvalidInputError(
            f"`{name}` must be a date (datetime.date, e.g. 2024-03-01), was {value!r}."
        )
    if not first <= value <= last:
        raise InvalidInputError(f"`{name}` must be between {first} and {last}, was {value}.")
    return value


def validate_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """Return `value`, or raise unless it is one of `choices` (named "'a', 'b' or 'c'")."""
    if value not in choices:
        quoted = [repr(choice) for choice in choices]
        listed = f"{', '.join(quoted[:-1])} or {quoted[-1]}"
        raise InvalidInputError(f"`{name}` must be {listed}, was {value!r}.")
    return str(value)


def validate_bool(name: str, value: object, *, spelled: str = "True or False") -> bool:
    """Return `value`, or raise unless it is a bool; `spelled` names the two values."""
    if not isinstance(value, bool):
        raise InvalidInputError(f"`{name}` must be {spelled}, was {value!r}.")
    return value
