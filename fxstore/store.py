"""Where things live: store root, validated keys, atomic writes and lock files.

This is the only module that knows the on-disk layout (DESIGN.md, "Store layout")::

    <root>/bars/<SYMBOL>/<instrument-key>/<bar-key>/<YYYY-MM-DD>.parquet + manifest.json
    <root>/fxcache/<SYMBOL>/<featureset-hash>/<shard>.arrow             + manifest.json
    <root>/runs/<run-id>/[fold<NN>/]
    <root>/synth/<SYMBOL>/                                               built-in market (DBN)

Keys are validated (``[A-Za-z0-9._-]+``, never ``.`` or ``..``) so no symbol name can escape
the root, and a file name read from a manifest is resolved inside the manifest's folder
(:func:`resolve_manifest_file`). Writes go to a temporary name in the destination folder, are
fsynced and renamed into place: a killed run leaves no partial file visible.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Final

from fxstore.errors import InvalidInputError, SchemaError

__all__ = [
    "DEFAULT_ROOT",
    "MANIFEST",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_stream",
    "bars_dir",
    "bars_relpath",
    "create_run_dir",
    "file_sha256",
    "fold_dir",
    "fsync_dir",
    "fxcache_dir",
    "key_lock",
    "list_bar_series",
    "list_fxcache_keys",
    "list_fxcache_symbols",
    "list_runs",
    "manifest_path",
    "read_json",
    "resolve_manifest_file",
    "run_dir",
    "runs_dir",
    "synth_dir",
    "validate_key",
]

logger = logging.getLogger(__name__)

DEFAULT_ROOT: Final = Path("data")
#: The manifest of a bar series or an fxcache folder, written last (its presence marks it complete).
MANIFEST: Final = "manifest.json"
_KEY_RE: Final = re.compile(r"[A-Za-z0-9._-]+")


def validate_key(value: str, param: str) -> str:
    """Return `value` if it is a safe path component of the store, else raise InvalidInputError.

    Examples
    --------
    >>> validate_key("ES.FUT", "symbol")
    'ES.FUT'
    """
    if not _KEY_RE.fullmatch(value) or value in (".", ".."):
        raise InvalidInputError(
            f"`{param}` may hold only letters, digits, '.', '_' and '-' (and is not '.' or '..'), "
            f"was {value!r}."
        )
    return value


def fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable (fsync the directory entry)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is fsynced and renamed to `path`.

    On any exception the temporary file is removed and `path` is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_stream(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Create `path` atomically from what `write` writes into the open binary file."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        write(fh)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(path: Path, obj: object) -> None:
    """Write `obj` as indented, key-sorted JSON to `path` atomically."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def read_json(path: Path) -> dict[str, object]:
    """Read a JSON object written by fxstore (a manifest); InvalidInputError if unreadable."""
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise InvalidInputError(
            f"{path}: cannot read it as JSON ({err}); delete it and re-run with --force."
        ) from err
    if not isinstance(obj, dict):
        raise InvalidInputError(
            f"{path}: expected a JSON object; delete it and re-run with --force."
        )
    return obj


def file_sha256(path: Path, block: int = 1 << 20) -> str:
    """Hex SHA-256 of the file at `path`, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while data := fh.read(block):
            digest.update(data)
    return digest.hexdigest()


@contextlib.contextmanager
def key_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (its ``.lock`` file) while writing there.

    Two writers on one key are serialised: the second waits. The lock is an OS file lock,
    released when the process ends, so a killed run never leaves a stale lock behind.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.warning("waiting for another fxstore process writing %s", folder)
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def manifest_path(folder: Path) -> Path:
    """The manifest file of a bar series or fxcache `folder`."""
    return folder / MANIFEST


def resolve_manifest_file(manifest: Path, name: str) -> Path:
    """The path of file `name`, read from `manifest`, inside the manifest's folder.

    `name` is relative to the folder holding `manifest` (a shard or a day file). The check
    is lexical: a symlink inside the folder is followed as it is.

    Raises
    ------
    SchemaError
        `name` is empty, absolute, or leads out of the folder (``../x.arrow``): the manifest
        is damaged or was edited by hand.

    Examples
    --------
    >>> resolve_manifest_file(Path("fxcache/ES.FUT/k/manifest.json"), "2024-01.arrow")
    PosixPath('fxcache/ES.FUT/k/2024-01.arrow')
    """
    normal = os.path.normpath(name) if name else ""
    if (
        not normal
        or "\0" in name
        or os.path.isabs(name)
        or normal in (os.curdir, os.pardir)
        or normal.startswith(os.pardir + os.sep)
    ):
        raise SchemaError(
            f"{manifest}: file entry {name!r} is not a file inside {manifest.parent}; refusing "
            "to read it (the manifest is damaged or was edited): re-run with --force."
        )
    return manifest.parent / name


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
    return sorted({p.parent.parent.name for p in (root / "fxcache").glob(f"*/*/{MANIFEST}")})


def list_fxcache_keys(root: Path, symbol: str) -> list[str]:
    """Feature-set hashes of `symbol` with a complete fxcache, most recently written first.

    Ordered by the manifest's modification time (newest first), ties by name.
    """
    base = root / "fxcache" / validate_key(symbol, "symbol")
    manifests = sorted(base.glob(f"*/{MANIFEST}"), key=lambda p: (-p.stat().st_mtime_ns, p))
    return [p.parent.name for p in manifests]


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


def create_run_dir(root: Path, kind: str) -> Path:
    """Make a fresh ``runs/<UTC time>-<kind>[-N]``; mkdir makes it unique across processes."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
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
