"""The ``fxstore`` group: every command registered, with help; one default per shared flag."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from fxstore.cli import cli

pytestmark = pytest.mark.quick

COMMANDS = (
    "backtest",
    "demo",
    "features",
    "fetch",
    "gc",
    "info",
    "ingest",
    "ls",
    "precompute",
    "report",
    "rolls",
    "runs",
    "scan",
    "synth",
    "train",
    "verify",
)


def test_cli_registers_every_command() -> None:
    assert sorted(cli.commands) == list(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_example(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"], catch_exceptions=False)

    assert result.exit_code == 0
    assert "Example" in result.output


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_cli_help_lists_commands(flag: str) -> None:
    result = CliRunner().invoke(cli, [flag], catch_exceptions=False)

    assert result.exit_code == 0
    for command in ("synth", "scan", "demo"):
        assert command in result.output


def test_cli_fresh_process_registers_every_command() -> None:
    # A fresh interpreter, as the console script starts: `python -m fxstore`.
    out = subprocess.run(
        [sys.executable, "-m", "fxstore", "--help"], capture_output=True, text=True, check=True
    ).stdout

    commands = {line.split()[0] for line in out.split("Commands:")[1].splitlines() if line}
    assert commands == set(COMMANDS)


def test_cli_version_prints_the_package_version() -> None:
    from fxstore import __version__

    result = CliRunner().invoke(cli, ["-V"], catch_exceptions=False)

    assert result.output == f"fxstore, version {__version__}\n"


def _defaults_by_flag() -> dict[str, set[str]]:
    defaults: dict[str, set[str]] = {}
    for command in cli.commands.values():
        for param in command.params:
            if isinstance(param, click.Option):
                defaults.setdefault(param.opts[0], set()).add(repr(param.default))
    return defaults


#: Flags whose default differs between commands on purpose, and why.
#: --dry-run: `gc` lists by default (deleting needs --delete); `fetch` buys only after the
#: plan and a confirmation, and --dry-run stops after the plan.
DIFFERENT_DEFAULTS = {"--dry-run": {"gc": True, "fetch": False}}


def test_every_flag_has_one_default_across_commands() -> None:
    defaults = _defaults_by_flag()

    assert {
        flag: d for flag, d in defaults.items() if len(d) > 1 and flag not in DIFFERENT_DEFAULTS
    } == {}
    for flag, by_command in DIFFERENT_DEFAULTS.items():
        for name, default in by_command.items():
            option = next(p for p in cli.commands[name].params if p.opts[0] == flag)
            assert bool(option.default) is default, (name, flag)
    assert defaults["--symbol"] == defaults["--commission"] == {"None"}
