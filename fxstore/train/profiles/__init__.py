"""Training profiles: TOML files that fill a :class:`~fxstore.config.TrainConfig`.

A profile is either a built-in name (``smoke``: a minute on a laptop CPU; ``default``; and
``production``: hours on a GPU) or a path to a TOML file of the same shape: top-level keys
are :class:`~fxstore.config.TrainConfig` fields, and the tables ``[env]``, ``[agent]`` and
``[walkforward]`` fill :class:`~fxstore.config.EnvConfig`, :class:`~fxstore.config.AgentConfig`
and :class:`~fxstore.config.WalkForwardConfig`. Keys left out keep their defaults. A run's
``config.json`` has the same shape, so a run is re-read with :func:`config_from_json`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tomllib
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from fxstore.config import AgentConfig, EnvConfig, TrainConfig, WalkForwardConfig
from fxstore.errors import FxStoreError, InvalidInputError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["PROFILES", "config_from_json", "load_profile", "profile_sha256", "replace_settings"]

PROFILES: Final = ("smoke", "default", "production")
_SECTIONS: Final[dict[str, type]] = {
    "env": EnvConfig,
    "agent": AgentConfig,
    "walkforward": WalkForwardConfig,
}
_C = TypeVar("_C")
_D = TypeVar("_D", bound="DataclassInstance")


def _build(cls: type[_C], data: object, where: str, section: str) -> _C:
    """Instantiate dataclass `cls` from a table, refusing unknown keys with one clear line."""
    if not isinstance(data, dict):
        raise InvalidInputError(f"{where}: {section} must be a table, was {data!r}.")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise InvalidInputError(
            f"{where}: unknown key {unknown[0]!r} in {section}; known: {', '.join(fields)}."
        )
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return _checked(lambda: cls(**values), where, section)


def _checked(make: Callable[[], _C], where: str, section: str) -> _C:
    """`make()`, with a bad setting raised as one line naming `where` and `section`."""
    try:
        return make()
    except FxStoreError as err:
        raise InvalidInputError(f"{where}: {section}: {err}") from err
    except TypeError as err:
        raise InvalidInputError(f"{where}: {section}: {err}") from err


def replace_settings(config: _D, changes: Mapping[str, object], *, where: str, section: str) -> _D:
    """`config` (a TrainConfig or one of its sections) with `changes` in place, checked again.

    Raises
    ------
    InvalidInputError
        A bad value, as "<where>: <section>: <what is wrong>" (e.g. "the command line:
        [agent]: `hidden` must be > 0, was 0."), like a bad value in a profile file.
    """
    return _checked(lambda: dataclasses.replace(config, **changes), where, section)


def config_from_json(data: object, *, where: str) -> TrainConfig:
    """A TrainConfig from profile-shaped data (parsed TOML or a run's ``config.json``)."""
    if not isinstance(data, dict):
        raise InvalidInputError(f"{where}: expected a table of train settings, was {data!r}.")
    top = {k: v for k, v in data.items() if k not in _SECTIONS}
    parts: dict[str, object] = {
        name: _build(cls, data[name], where, f"[{name}]")
        for name, cls in _SECTIONS.items()
        if name in data
    }
    return _build(TrainConfig, {**top, **parts}, where, "the top level")


def _builtin_text(profile: str) -> str:
    return resources.files(__name__).joinpath(f"{profile}.toml").read_text()


def profile_sha256(profile: str) -> str | None:
    """SHA-256 of built-in `profile`'s TOML text; None for another name (a file's stem: the
    run's ``config.json`` holds every setting it gave)."""
    if profile not in PROFILES:
        return None
    return hashlib.sha256(_builtin_text(profile).encode()).hexdigest()


def load_profile(profile: str) -> TrainConfig:
    """The TrainConfig of a built-in profile name or of a TOML file path.

    Raises
    ------
    InvalidInputError
        No such profile or file, bad TOML, an unknown key or an invalid value.
    """
    if profile in PROFILES:
        text = _builtin_text(profile)
        where = f"profile {profile!r}"
    else:
        path = Path(profile)
        if not path.is_file():
            raise InvalidInputError(
                f"no profile {profile!r}: give one of {', '.join(PROFILES)} or a TOML file path."
            )
        text, where = path.read_text(), str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InvalidInputError(f"{where}: not valid TOML ({err}).") from err
    data.setdefault("profile", profile if profile in PROFILES else Path(profile).stem)
    return config_from_json(data, where=where)
