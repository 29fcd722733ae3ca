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
import tomllib
from importlib import resources
from pathlib import Path
from typing import Final, TypeVar

from fxstore.config import AgentConfig, EnvConfig, TrainConfig, WalkForwardConfig
from fxstore.errors import FxStoreError, InvalidInputError

__all__ = ["PROFILES", "config_from_json", "load_profile"]

PROFILES: Final = ("smoke", "default", "production")
_SECTIONS: Final[dict[str, type]] = {
    "env": EnvConfig,
    "agent": AgentConfig,
    "walkforward": WalkForwardConfig,
}
_C = TypeVar("_C")


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
    try:
        return cls(**values)
    except FxStoreError as err:
        raise InvalidInputError(f"{where}: {section}: {err}") from err
    except TypeError as err:
        raise InvalidInputError(f"{where}: {section}: {err}") from err


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


def load_profile(profile: str) -> TrainConfig:
    """The TrainConfig of a built-in profile name or of a TOML file path.

    Raises
    ------
    InvalidInputError
        No such profile or file, bad TOML, an unknown key or an invalid value.
    """
    if profile in PROFILES:
        text = resources.files(__name__).joinpath(f"{profile}.toml").read_text()
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
