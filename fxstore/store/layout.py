"""Where things live under a store root: the folders of synth markets, bar series, fxcaches
and runs, their listings, and an fxcache built beside the one it replaces (switched in one
rename). Keys are validated (:func:`~fxstore.store.files.validate_key`) so no symbol name can
leave the root.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import shutil
from pathlib import Path
from typing import Final

from fxstore.errors import InvalidInputError
from fxstore.store.files import LOCK, MANIFEST, fsync_dir, os_errors, validate_key

logger = logging.getLogger(__name__)


def synth_dir(root: Path, symbol: str) -> Path:
    """Folder of the built-in synthetic market of parent `symbol` (e.g. "ES.FUT")."""
    return root / "synth" / validate_key(symbol, "symbol")


def bars_relpath(symbol: str, instrument_key: str, bar_key: str) -> str:
    """``bars/<SYMBOL>/<instrument-key>/<bar-key>``: a bar series' folder relative to the root."""
    return bars_dir(Path(), symbol, instrument_key, bar_key).as_posix()


def bars_dir(root: Path, symbol: str, instrument_key: str, bar_key: str) -> Path:
    """Folder of one bar series: ``bars/<SYMBOL>/<instrument-key>/<bar-key>``."""
    return (
        root
        / "bars"
        / validate_key(symbol, "symbol")
        / validate_key(instrument_key, "instrument-key")
        / validate_key(bar_key, "bar-key")
    )


def fxcache_dir(root: Path, symbol: str, key: str) -> Path:
    """Folder of one feature cache: ``fxcache/<SYMBOL>/<featureset-hash>``."""
    return root / "fxcache" / validate_key(symbol, "symbol") / validate_key(key, "fxcache key")


def list_fxcache_symbols(root: Path) -> list[str]:
    """Symbols with at least one complete fxcache (a folder holding its manifest), sorted."""
    manifests = (root / "fxcache").glob(f"*/*/{MANIFEST}")
    return sorted({p.parent.parent.name for p in manifests if not is_fxcache_stage(p.parent)})


def list_fxcache_keys(root: Path, symbol: str) -> list[str]:
    """Feature-set hashes of `symbol` with a complete fxcache, most recently written first.

    Ordered by the manifest's modification time (newest first), ties by name. A build's
    staging folder (:func:`stage_fxcache`) is no cache.
    """
    base = root / "fxcache" / validate_key(symbol, "symbol")
    found = [p for p in base.glob(f"*/{MANIFEST}") if not is_fxcache_stage(p.parent)]
    manifests = sorted(found, key=lambda p: (-p.stat().st_mtime_ns, p))
    return [p.parent.name for p in manifests]


# --- an fxcache built beside the one it replaces ------------------------------------------------

_STAGE: Final = ".build"
_REPLACED: Final = ".old"
#: renameat2's flag that swaps two paths atomically (Linux 3.15+), and "relative to the cwd".
_RENAME_EXCHANGE: Final = 2
_AT_FDCWD: Final = -100


def is_fxcache_stage(folder: Path) -> bool:
    """Whether `folder` is an fxcache build's staging or replaced folder (``.<key>.build``,
    ``.<key>.old``), not a cache."""
    return folder.name.startswith(".") and folder.name.endswith((_STAGE, _REPLACED))


def _stage_names(folder: Path) -> tuple[Path, Path]:
    return (
        folder.with_name(f".{folder.name}{_STAGE}"),
        folder.with_name(f".{folder.name}{_REPLACED}"),
    )


def stage_fxcache(folder: Path) -> Path:
    """A fresh, empty folder beside fxcache `folder` for its next build (``.<key>.build``).

    What a killed build left is removed first; a switch killed between its two renames (where
    the file system cannot swap folders at once) is finished backwards, so `folder` holds the
    cache it held before. Hold `folder`'s :func:`key_lock`.
    """
    stage, replaced = _stage_names(folder)
    with os_errors(stage, "create"):
        if replaced.is_dir() and not folder.exists():
            os.rename(replaced, folder)  # the previous cache, whole
        for leftover in (stage, replaced):
            if leftover.exists():
                shutil.rmtree(leftover)
        stage.mkdir(parents=True)
    return stage


def discard_fxcache_stage(stage: Path) -> None:
    """Delete a build's staging folder (the cache it was to replace stays as it was)."""
    if not is_fxcache_stage(stage):
        raise InvalidInputError(f"{stage} is no fxcache staging folder; not deleting it.")
    with os_errors(stage, "delete"):
        shutil.rmtree(stage, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders `a` and `b` in one step (Linux renameat2); False where the system or
    file system cannot."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def commit_fxcache(stage: Path, folder: Path) -> None:
    """Make the finished build in `stage` (its manifest written last) fxcache `folder`.

    A reader sees the old cache or the new one, never a mix nor none: the two folders are
    swapped in one rename (Linux), then the old one is deleted. Where the file system cannot
    swap, the old folder is renamed aside first, and :func:`stage_fxcache` puts it back if the
    process dies between the two renames. Hold `folder`'s :func:`key_lock`: its lock file is
    linked into the new folder first, so every process locks the same file after the switch.
    """
    _, replaced = _stage_names(folder)
    with os_errors(folder, "replace"):
        if (folder / LOCK).exists():
            os.link(folder / LOCK, stage / LOCK)
        if not folder.exists():
            os.rename(stage, folder)
        elif _exchange(stage, folder):
            shutil.rmtree(stage)  # the old cache, now under the staging name
        else:
            os.rename(folder, replaced)
            os.rename(stage, folder)
            shutil.rmtree(replaced)
    fsync_dir(folder.parent)


def runs_dir(root: Path) -> Path:
    """The folder holding every run: ``runs/``."""
    return root / "runs"


def run_dir(root: Path, run_id: str) -> Path:
    """Folder of one run (a backtest or a training run): ``runs/<run-id>``."""
    return runs_dir(root) / validate_key(run_id, "run id")


def fold_dir(run: Path, index: int) -> Path:
    """Folder of walk-forward fold `index` inside the run folder `run`: ``fold<NN>``."""
    return run / f"fold{index:02d}"


def list_runs(root: Path, marker: str) -> list[str]:
    """Ids of the runs whose folder holds the file `marker` (e.g. "config.json"), sorted."""
    return sorted(p.name for p in runs_dir(root).glob("*") if (p / marker).is_file())


def existing_run_dir(root: Path, run_id: str, marker: str, remedy: str) -> Path:
    """The folder of run `run_id`, which must hold the file `marker` (e.g. "config.json").

    Raises
    ------
    InvalidInputError
        `run_id` is empty or not a key (a path separator, '..'), or names no run: the
        message lists the latest runs there are, then `remedy` (what to do).
    """
    if not run_id:
        raise InvalidInputError("the run id must name a run under runs/, was ''.")
    folder = run_dir(root, run_id)  # only [A-Za-z0-9._-]: it cannot leave runs/
    if not (folder / marker).is_file():
        known = list_runs(root, marker)
        listed = ", ".join(known[-5:]) if known else "none"
        raise InvalidInputError(
            f"no run {run_id!r} in {runs_dir(root)} (the latest: {listed}); {remedy}"
        )
    return folder


def create_run_dir(root: Path, kind: str) -> Path:
    """Make a fresh ``runs/<UTC time>-<kind>[-N]``; mkdir makes it unique across processes."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    with os_errors(runs_dir(root), "create a run folder in"):
        runs_dir(root).mkdir(parents=True, exist_ok=True)
        for n in range(1, 10_000):
            path = run_dir(root, f"{stamp}-{kind}" if n == 1 else f"{stamp}-{kind}-{n}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return path
    raise InvalidInputError(f"no free run id {stamp}-{kind}-N in {runs_dir(root)}; retry later.")


def list_bar_series(root: Path, symbol: str | None = None) -> list[tuple[str, str, str]]:
    """``(symbol, instrument-key, bar-key)`` of every bar series with a manifest, sorted.

    Only `symbol`'s when it is given. A series without ``manifest.json`` (an ingest that
    never finished) is not listed.
    """
    base = root / "bars"
    pattern = f"{validate_key(symbol, 'symbol')}/*/*/{MANIFEST}" if symbol else f"*/*/*/{MANIFEST}"
    found = []
    for manifest in base.glob(pattern):
        bar_dir = manifest.parent
        found.append((bar_dir.parent.parent.name, bar_dir.parent.name, bar_dir.name))
    return sorted(found)
