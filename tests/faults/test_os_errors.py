"""OS failures are user errors: one ``Error:`` line (what, where, what to do), exit 1, nothing
partial left; an up-to-date store needs no write at all; files follow the umask."""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from fxstore.errors import InvalidInputError, StoreAccessError
from fxstore.store import atomic_write_bytes, atomic_write_json, key_lock, validate_key
from fxstore.train.agent import memory
from fxstore.train.loop import train
from tests.conftest import SynthMarket
from tests.faults._inject import deny_writes, disk_full, error_line, fail_nth, run_cli
from tests.train._tiny import TINY

_INGEST_FLAGS = ["--target-bars-per-day", "20", "--workers", "1", "-q"]


def _temps(folder: Path) -> list[Path]:
    return sorted(folder.rglob(".*.tmp"))


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


# --- the store's helpers ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "advice"),
    [
        (errno.ENOSPC, "(No space left on device): free space on that disk or use another --store"),
        (errno.EROFS, "(Read-only file system): the file system is read-only; use a writable"),
        (errno.EACCES, "(Permission denied): a permission problem: check the owner and mode"),
        (errno.ENAMETOOLONG, "(File name too long): the name is too long for the file system"),
    ],
)
def test_atomic_write_os_error_is_store_access_error_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, advice: str
) -> None:
    path = tmp_path / "manifest.json"
    path.write_text("old")
    fail_nth(monkeypatch, Path, "write_bytes", 1, OSError(code, os.strerror(code)))

    with pytest.raises(StoreAccessError) as info:
        atomic_write_bytes(path, b"new")

    assert str(info.value).startswith(f"cannot write {path} {advice}")
    assert path.read_text() == "old"
    assert _temps(tmp_path) == []


def test_atomic_write_errno_only_in_the_text_is_understood(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_nth(monkeypatch, Path, "write_bytes", 1, disk_full())

    with pytest.raises(StoreAccessError, match=r"\(No space left on device\): free space"):
        atomic_write_bytes(tmp_path / "x.json", b"{}")


def test_atomic_write_files_follow_the_umask(tmp_path: Path, umask: None) -> None:
    atomic_write_json(tmp_path / "a.json", {})
    os.umask(0o077)
    atomic_write_json(tmp_path / "b.json", {})

    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o600


def test_key_lock_removes_a_killed_writers_temp_files_only(tmp_path: Path) -> None:
    (tmp_path / ".manifest.json.k3x_9q2z.tmp").write_text("torn")
    (tmp_path / ".2024-03-01.parquet.0a1b2c3d.tmp").write_text("torn")
    (tmp_path / ".notes.tmp").write_text("mine")

    with key_lock(tmp_path):
        pass

    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", ".notes.tmp"]


def test_key_lock_on_a_read_only_store_names_the_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deny_writes(monkeypatch, tmp_path)

    with pytest.raises(StoreAccessError) as info, key_lock(tmp_path / "k"):
        pass

    assert str(info.value) == (
        f"cannot create the lock file {tmp_path / 'k' / '.lock'} (Read-only file system): the "
        "file system is read-only; use a writable --store."
    )


def test_validate_key_of_300_characters_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"`symbol` must be at most 200 characters long"):
        validate_key("E" * 300, "symbol")


# --- ingest ------------------------------------------------------------------------------


def test_cli_ingest_disk_full_is_one_error_line_and_a_rerun_finishes(
    two_roll_market: SynthMarket, clean_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_nth(monkeypatch, pq, "write_table", 5, disk_full())
    args = ["ingest", str(two_roll_market.folder), "--store", str(tmp_path), *_INGEST_FLAGS]

    line = error_line(run_cli(*args))
    monkeypatch.undo()
    rerun = run_cli(*args)

    assert line.startswith(f"Error: cannot write {tmp_path / 'bars' / 'ES.FUT'}")
    assert line.endswith(
        ".parquet (No space left on device): free space on that disk or use another --store, "
        "then re-run (finished work is kept)."
    )
    assert rerun.exit_code == 0, rerun.output
    assert "4 resumed" in rerun.output
    assert _temps(tmp_path) == []


def test_cli_ingest_up_to_date_on_a_read_only_store_succeeds(
    two_roll_market: SynthMarket, store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deny_writes(monkeypatch, store_copy)

    result = run_cli(
        "ingest", str(two_roll_market.folder), "--store", str(store_copy), *_INGEST_FLAGS
    )

    assert result.exit_code == 0, result.output
    assert result.output.startswith("Up to date: ")


@pytest.mark.parametrize(
    ("code", "advice"),
    [
        (errno.EROFS, "(Read-only file system): the file system is read-only; use a writable "
         "--store."),
        (errno.EACCES, "(Permission denied): a permission problem: check the owner and mode of "
         "the folder (ls -ld) or use another --store."),
    ],
)  # fmt: skip
def test_cli_ingest_force_on_a_store_it_cannot_write_is_one_error_line(
    two_roll_market: SynthMarket,
    store_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
    advice: str,
) -> None:
    (series,) = (store_copy / "bars" / "ES.FUT").glob("*/*")
    deny_writes(monkeypatch, store_copy, code)

    result = run_cli(
        "ingest", str(two_roll_market.folder), "--store", str(store_copy), "--force", *_INGEST_FLAGS
    )

    assert error_line(result) == f"Error: cannot create the lock file {series / '.lock'} {advice}"


def test_cli_ingest_store_below_a_regular_file_is_one_error_line(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("")
    store = tmp_path / "file" / "store"

    line = error_line(run_cli("ingest", str(two_roll_market.folder), "--store", str(store), "-q"))

    assert line.startswith("Error: cannot create the lock file ")
    assert line.endswith(
        f"(Not a directory): {tmp_path / 'file'} is a file, not a folder; point --store at a "
        "folder."
    )
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_cli_ingest_symbol_of_300_characters_is_one_error_line(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    result = run_cli(
        "ingest", str(two_roll_market.folder), "--store", str(tmp_path), "--symbol", "E" * 300
    )

    assert error_line(result) == (
        "Error: `symbol` must be at most 200 characters long, was 300 (EEEEEEEEEEEEEEEEEEEE...)."
    )
    assert list(tmp_path.iterdir()) == []


_LONG = "s" * 300
_TOO_LONG = (
    f"the name {'s' * 20}… is 300 bytes, more than the file system's 255; use a shorter name."
)


def test_cli_ingest_store_name_too_long_is_one_error_line(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    store = tmp_path / _LONG

    line = error_line(run_cli("ingest", str(two_roll_market.folder), "--store", str(store), "-q"))

    assert line == f"Error: --store {store}: {_TOO_LONG}"


@pytest.mark.parametrize(
    "command",
    [
        ["ingest", "IN"],
        ["precompute"],
        ["backtest"],
        ["train"],
        ["verify"],
        ["ls"],
        ["gc", "--keep", "1"],
    ],
)
def test_cli_store_with_a_long_name_below_a_new_folder_creates_nothing(
    two_roll_market: SynthMarket, tmp_path: Path, command: list[str]
) -> None:
    store = tmp_path / "ln2" / _LONG / "store"
    args = [str(two_roll_market.folder) if a == "IN" else a for a in command]

    line = error_line(run_cli(*args, "--store", str(store)))

    assert line == f"Error: --store {store}: {_TOO_LONG}"
    assert list(tmp_path.iterdir()) == []


def test_cli_ingest_input_with_a_long_name_is_one_error_line(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    path = two_roll_market.folder / f"{_LONG}.dbn"

    line = error_line(run_cli("ingest", str(path), "--store", str(tmp_path / "store"), "-q"))

    assert line == f"Error: input {path}: {_TOO_LONG.replace('300', '304')}"
    assert list(tmp_path.iterdir()) == []


# --- precompute, synth ------------------------------------------------------------------


def test_cli_precompute_force_disk_full_keeps_the_old_cache_whole(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (cache,) = (store_copy / "fxcache" / "ES.FUT").iterdir()
    before = {p.name: p.read_bytes() for p in cache.iterdir() if p.is_file()}
    fail_nth(monkeypatch, os, "fsync", 2, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))

    line = error_line(run_cli("precompute", "--store", str(store_copy), "--force"))

    assert line.startswith(f"Error: cannot write {cache.with_name('.' + cache.name + '.build')}")
    assert "(No space left on device): free space on that disk" in line
    assert {p.name: p.read_bytes() for p in cache.iterdir() if p.is_file()} == before
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]  # no staging folder left
    assert _temps(cache.parent) == []


def test_cli_precompute_up_to_date_on_a_read_only_store_succeeds(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deny_writes(monkeypatch, store_copy, errno.EACCES)

    result = run_cli("precompute", "--store", str(store_copy))

    assert result.exit_code == 0, result.output
    assert "up to date" in result.output.lower()


def test_cli_synth_disk_full_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    real_fsync = os.fsync
    day_files = 0

    def fsync(fd: int) -> None:  # the second day's DBN file finds the disk full
        nonlocal day_files
        if "glbx-mdp3-" in os.readlink(f"/proc/self/fd/{fd}"):
            day_files += 1
            if day_files == 2:
                raise error
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    out = tmp_path / "synth"

    line = error_line(
        run_cli("synth", str(out), "--start", "2024-03-04", "--end", "2024-03-08",
             "--events-per-day", "1000", "--workers", "1", "-q")
    )  # fmt: skip

    # in this process (--workers 1: worker processes do not see the patch), named by its path
    assert line.startswith(f"Error: cannot write {out}/glbx-mdp3-2024030")
    assert line.endswith(
        " (No space left on device): free space on that disk or use another --store, then "
        "re-run (finished work is kept)."
    )
    assert _temps(out) == []


# --- train -------------------------------------------------------------------------------


@pytest.mark.parametrize(("nth", "name"), [(1, "status.json"), (2, "config.json")])
def test_train_first_writes_failing_leave_no_orphan_run_folder(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch, nth: int, name: str
) -> None:
    fail_nth(monkeypatch, Path, "write_bytes", nth, OSError(errno.ENOSPC, "No space"))

    with pytest.raises(StoreAccessError, match=rf"{name} \(No space left on device\)"):
        train(TINY, store_copy)

    assert list((store_copy / "runs").iterdir()) == []


def test_train_disk_full_at_a_checkpoint_keeps_a_resumable_run(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_nth(monkeypatch, np, "savez", 2, OSError(errno.ENOSPC, "No space"))

    with pytest.raises(StoreAccessError, match=r"checkpoint\.npz \(No space left on device\)"):
        train(TINY, store_copy)

    (run,) = (store_copy / "runs").iterdir()
    assert (run / "config.json").is_file()
    assert _temps(run) == []


def test_train_on_a_read_only_store_is_store_access_error_before_any_folder(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deny_writes(monkeypatch, store_copy)

    with pytest.raises(StoreAccessError) as info:
        train(TINY, store_copy)

    assert str(info.value) == (
        f"cannot create a run folder in {store_copy / 'runs'} (Read-only file system): the file "
        "system is read-only; use a writable --store."
    )


@pytest.mark.parametrize(
    ("flag", "line"),
    [
        ("--n-envs", "Error: `n_envs` 100000000 needs about "),
        ("--hidden", "Error: `hidden` 100000000 needs about "),
    ],
)
def test_cli_train_absurd_size_is_refused_before_allocating(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch, flag: str, line: str
) -> None:
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 8 << 30)

    result = run_cli("train", "--store", str(store_copy), "--device", "cpu", flag, "100000000")

    error = error_line(result)
    assert error.startswith(line)
    assert error.endswith(f"more than the 8 GB available; lower {flag}.")
    assert not (store_copy / "runs").exists()


def test_cli_train_resume_empty_is_one_error_line(store_copy: Path) -> None:
    result = run_cli("train", "--store", str(store_copy), "--resume", "")

    assert error_line(result) == "Error: `resume` must be a run id under runs/, was ''."


def test_cli_train_negative_seed_says_at_least_zero(store_copy: Path) -> None:
    result = run_cli("train", "--store", str(store_copy), "--seed", "-1")

    assert error_line(result) == "Error: `--seed` must be >= 0, was -1."


def test_cli_unknown_command_exits_1_with_one_error_line() -> None:
    result = run_cli("ingset")

    assert error_line(result) == (
        "Error: No such command 'ingset'. Did you mean 'ingest'? `fxstore --help` lists the "
        "commands."
    )


def test_store_access_error_message_never_advises_deleting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "m.json").write_text(json.dumps({}))
    fail_nth(monkeypatch, Path, "read_bytes", 1, PermissionError(errno.EACCES, "Permission denied"))
    from fxstore.store import read_json

    with pytest.raises(StoreAccessError) as info:
        read_json(tmp_path / "m.json")

    assert "permission problem" in str(info.value)
    assert "delete" not in str(info.value)
