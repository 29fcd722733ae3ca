"""Fault injection at the OS call: a read-only or forbidden store, a full disk.

Tests run as root in CI, where chmod stops nothing, and mounting a small tmpfs needs
privileges a test must not assume: the faults are raised where the OS would raise them.
"""

from __future__ import annotations

import builtins
import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fxstore.cli import cli

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _error(code: int, path: object) -> OSError:
    return OSError(code, os.strerror(code), str(path))


def deny_writes(monkeypatch: pytest.MonkeyPatch, root: Path, code: int = errno.EROFS) -> None:
    """Make every write below `root` fail with `code` (EROFS: read-only, EACCES: forbidden).

    Reads keep working; mkdir of an existing folder says EEXIST, as the kernel does.
    """
    inside: Callable[[object], bool] = lambda p: Path(os.fsdecode(p)).is_relative_to(root)  # type: ignore[arg-type]  # noqa: E731
    real_open, real_os_open, real_mkdir = builtins.open, os.open, os.mkdir

    def fake_open(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if isinstance(file, str | Path) and inside(file) and set(mode) & set("wax+"):
            raise _error(code, file)
        return real_open(file, mode, *args, **kwargs)  # type: ignore[call-overload]

    def fake_os_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if inside(path) and flags & _WRITE_FLAGS:
            raise _error(code, path)
        return real_os_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    def fake_mkdir(path: object, *args: object, **kwargs: object) -> None:
        if inside(path):
            raise _error(errno.EEXIST if os.path.exists(path) else code, path)  # type: ignore[arg-type]
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    def refuse(*paths: object, **kwargs: object) -> None:
        raise _error(code, paths[0])

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)
    for name in ("unlink", "replace", "rename", "rmdir"):
        real = getattr(os, name)
        monkeypatch.setattr(
            os, name, lambda *a, _real=real, **k: refuse(*a) if inside(a[0]) else _real(*a, **k)
        )


def fail_nth(
    monkeypatch: pytest.MonkeyPatch, owner: object, name: str, n: int, error: OSError
) -> None:
    """Make the `n`-th call of ``owner.name`` (and every later one) raise `error`."""
    real = getattr(owner, name)
    calls = 0

    def failing(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls >= n:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


def disk_full() -> OSError:
    """ENOSPC as pyarrow raises it: an OSError whose errno is only in its text."""
    return OSError(
        "[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device"
    )


def run_cli(*args: str) -> Result:
    """``fxstore ARGS`` in this process, its exceptions turned into its exit status."""
    return CliRunner().invoke(cli, list(args))


def error_line(result: Result) -> str:
    """The one ``Error:`` line a failed command ends with (exit 1, no traceback)."""
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1, result.output
    assert len([line for line in lines if line.startswith("Error:")]) == 1, result.output
    assert "Traceback" not in result.output
    return lines[-1]
