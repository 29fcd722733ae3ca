"""Every option's ``[default: ...]`` in help is what the command uses when it is not given.

Each command runs with no options but its required arguments, its library call replaced by
one that records the configs it gets; every option's shown default is then compared with
the config field of the same name (searched through nested configs), or with the option's
own default where no config holds it. A shown default that is a description, not a value,
names a check in ``DESCRIBED``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.cli._options import FROM_PROFILE
from fxstore.config import BASELINE_POLICIES
from fxstore.train.profiles import load_profile

pytestmark = pytest.mark.quick

#: Arguments each command needs to run at all.
ARGS = {"info": ["ES.FUT"], "ingest": ["in.dbn"], "rolls": ["ES.FUT"], "scan": ["in.dbn"]}
#: The library calls of each command, by module and name, replaced while it runs.
CALLS = {
    "fxstore.cli.data": ("run_synth", "run_ingest", "scan_files", "run_rolls"),
    "fxstore.cli.demo": ("run_synth", "run_ingest", "scan_files", "run_precompute", "run_train"),
    "fxstore.cli.features": ("run_precompute",),
    "fxstore.cli.train": ("run_backtest", "run_train"),
    "fxstore.features.versions": ("gc",),
}
_PROFILE = {"backtest": "default", "train": "default", "demo": "smoke"}
_NOT_FOUND = object()
#: Options no recorded config or argument holds. backtest's config keeps its profile's
#: values, not its name: the options showing "the profile's" check those against it.
_UNRECORDED = {("backtest", "profile")}


def _is_none(value: object, _command: str, _name: str) -> bool:
    return value is None


def _from_profile(value: object, command: str, name: str) -> bool:
    return value == _field(load_profile(_PROFILE[command]), name)


#: Shown defaults that describe rather than state the value, and how to check them.
DESCRIBED: dict[str, Callable[[object, str, str], bool]] = {
    "the only one": _is_none,
    "the only one in it": _is_none,
    "AWS": _is_none,
    "the user's cache folder/fxstore": _is_none,
    "a Ray instance on this machine, for the run": _is_none,
    "all cores; with --executor ray, every CPU of the cluster": lambda v, *_: v == os.cpu_count(),
    "the latest written": _is_none,
    "the default set": _is_none,
    "each contract's own": _is_none,
    "every listed month": _is_none,
    "by root": _is_none,
    "<store>/synth/<symbol>": _is_none,
    "<store>/runs/RUN_ID/report.html": _is_none,
    "from the files' metadata": _is_none,
    "any definition file among PATHS, then fxstore's table of CME roots": lambda v, *_: v == (),
    "as few as hold the longest target horizon": _is_none,
    "none, plain bars need one": _is_none,
    "none, --signal decides": _is_none,
    "none, the tick size is left to precompute": _is_none,
    FROM_PROFILE: _from_profile,
    "ES.FUT unless the profile sets one": lambda v, *_: v == "ES.FUT",
    "all": lambda v, *_: v == BASELINE_POLICIES,
    "all cores": lambda v, *_: v == (os.cpu_count() or 1),
    "rolling": lambda v, *_: v is False,
    "dry-run": lambda v, *_: v is True,
    "from --signal-ic": lambda v, *_: v == 0.0,
    "0.1, unless --signal is given": lambda v, *_: v == 0.1,
}


def _field(config: object, name: str) -> object:
    """Field `name` of a config or of a config nested in it; _NOT_FOUND when none has it."""
    if not dataclasses.is_dataclass(config):
        return _NOT_FOUND
    for f in dataclasses.fields(config):
        if f.name == name:
            return getattr(config, name)
    for f in dataclasses.fields(config):
        found = _field(getattr(config, f.name), name)
        if found is not _NOT_FOUND:
            return found
    return _NOT_FOUND


def _shown_default(option: click.Option, command: click.Command) -> str | None:
    record = option.get_help_record(click.Context(command))
    text = " ".join(record[1].split()) if record else ""
    found = re.findall(r"\[(?:env var: \S+; )?default: (.*?)\]", text)
    return found[-1].rstrip(".") if found else None


def _used(name: str, seen: list[object], option: click.Option) -> object:
    """What the command used for option `name`: a config field, a call's argument, its own."""
    for item in seen:
        value = item.get(name, _NOT_FOUND) if isinstance(item, dict) else _field(item, name)
        if value is not _NOT_FOUND:
            return value
    return option.default


def _as_shown(value: object) -> str:
    if isinstance(value, dt.date | Path):
        return str(value)
    return repr(value) if isinstance(value, str) and not value else str(value)


def _run(command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[object]:
    """Run `command` with no options; the configs and arguments its library calls got."""
    seen: list[object] = []

    def recorder(original: Callable[..., object]) -> Callable[..., object]:
        def record(*args: object, **kwargs: object) -> object:
            arguments = inspect.signature(original).bind(*args, **kwargs).arguments
            seen.extend(a for a in arguments.values() if dataclasses.is_dataclass(a))
            seen.append(arguments)
            return SimpleNamespace(format_text=lambda **_: "", to_json=lambda: {}, key="0" * 16)

        return record

    for module, names in CALLS.items():
        for name in names:
            original = getattr(importlib.import_module(module), name)
            monkeypatch.setattr(f"{module}.{name}", recorder(original))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FXSTORE_HOME", raising=False)
    CliRunner().invoke(cli, [command, *ARGS.get(command, [])], catch_exceptions=True)
    return seen


_RUNS = ("backtest", "demo", "gc", "ingest", "precompute", "scan", "synth", "train")


@pytest.mark.parametrize("command", _RUNS)
def test_every_shown_default_is_what_the_command_uses(
    command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = _run(command, monkeypatch, tmp_path)
    assert seen, f"{command} made none of its library calls"
    cmd = cli.commands[command]

    wrong = {}
    for option in (p for p in cmd.params if isinstance(p, click.Option)):
        assert option.name is not None
        if (command, option.name) in _UNRECORDED:
            continue
        shown = _shown_default(option, cmd)
        used = _used(option.name, seen, option)
        if shown is None:
            filled = used is not None and not option.is_flag and not option.multiple
            if filled and option.name not in ("store_root",):
                wrong[option.name] = f"uses {used!r} but help shows no default"
        elif shown in DESCRIBED:
            if not DESCRIBED[shown](used, command, option.name):
                wrong[option.name] = f"shows {shown!r}, uses {used!r}"
        elif shown != _as_shown(used):
            wrong[option.name] = f"shows {shown!r}, uses {used!r}"

    assert wrong == {}


@pytest.mark.parametrize("command", sorted(set(cli.commands) - set(_RUNS)))
def test_every_shown_default_of_a_plain_command_is_its_option_default(command: str) -> None:
    cmd = cli.commands[command]

    for option in (p for p in cmd.params if isinstance(p, click.Option)):
        shown = _shown_default(option, cmd)
        if shown is not None and shown not in DESCRIBED:
            assert shown == _as_shown(option.default), option.name
