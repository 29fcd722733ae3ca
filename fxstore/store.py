"""Where things live: store root, validated keys, atomic writes and lock files.

This is the only module that knows the on-disk layout (DESIGN.md, "Store layout")::

    <root>/bars/<SYMBOL>/<instrument-key>/<bar-key>/manifest.json        the series: its versions
    <root>/bars/<SYMBOL>/<instrument-key>/<bar-key>/v<NNNN>/<YYYY-MM-DD>.parquet + manifest.json
    <root>/fxcache/<SYMBOL>/<featureset-hash>/<shard>.arrow             + manifest.json
    <root>/runs/<run-id>/[fold<NN>/]
    <root>/synth/<SYMBOL>/                                               built-in market (DBN)

Keys are validated (``[A-Za-z0-9._-]+``, never ``.`` or ``..``) so no symbol name can escape
the root, and a file name read from a manifest is resolved inside the manifest's folder
(:func:`resolve_manifest_file`). Writes go to a temporary name in the destination folder, are
fsynced and renamed into place: a killed run leaves no partial file visible, and the next
writer of that folder removes the temporary file it left (:func:`remove_stale_temps`).

A bar series is versioned (ArcticDB's versions are the model): each build writes its day
files and manifest into a new version folder ``v<NNNN>`` beside the current one and switches
the series to it by rewriting the series manifest (the list of committed versions) in one
atomic rename (:func:`commit_bar_version`). Readers reach a version only through that list,
so a killed build leaves the previous version complete and readable; its folder is resumed
by the next build. A series of fxstore before versions (day files and their manifest directly
in the bar-key folder) reads as version 1 and is moved into ``v0001`` by the next commit.

Every OSError of these helpers (disk full, read-only, no permission, name too long, a file
where a folder should be) becomes a :class:`~fxstore.errors.StoreAccessError` that names the
path and what to do (:func:`os_errors`). Files follow the umask (0644 under the usual 022).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Final, TypeVar, cast

from fxstore.errors import InvalidInputError, SchemaError, StoreAccessError, SymbolNotFoundError

__all__ = [
    "DEFAULT_ROOT",
    "LOCK",
    "MANIFEST",
    "SERIES_FORMAT",
    "BarVersion",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_stream",
    "bar_day_entries",
    "bars_dir",
    "bars_relpath",
    "commit_bar_version",
    "commit_fxcache",
    "create_run_dir",
    "delete_bar_versions",
    "discard_bar_stage",
    "discard_fxcache_stage",
    "file_sha256",
    "find_bar_version",
    "fold_dir",
    "fsync_dir",
    "fxcache_dir",
    "is_fxcache_stage",
    "key_lock",
    "list_bar_series",
    "list_bar_versions",
    "list_fxcache_keys",
    "list_fxcache_symbols",
    "list_orphan_bar_folders",
    "list_runs",
    "list_temps",
    "manifest_field",
    "manifest_path",
    "matches_manifest",
    "os_errors",
    "read_bar_manifest",
    "read_json",
    "remove_stale_temps",
    "resolve_manifest_file",
    "run_dir",
    "runs_dir",
    "stage_bar_version",
    "stage_fxcache",
    "store_access_error",
    "synth_dir",
    "validate_key",
    "validate_path",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T", int, float, str, list, dict)  # type: ignore[type-arg]
_KIND_NAMES: Final = {
    int: "a whole number",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a JSON object",
}

DEFAULT_ROOT: Final = Path("data")
#: The manifest of a bar series or an fxcache folder, written last (its presence marks it complete).
MANIFEST: Final = "manifest.json"
_KEY_RE: Final = re.compile(r"[A-Za-z0-9._-]+")
#: Longest key: a folder name, with room below the file systems' 255-byte limit.
MAX_KEY_LEN: Final = 200
#: The lock file of a series or cache folder.
LOCK: Final = ".lock"
#: A temporary file of an atomic write: ``.<name>.<random>.tmp`` (also mkstemp's older names).
_TEMP_RE: Final = re.compile(r"\..+\.[A-Za-z0-9_]{8}\.tmp")
#: What to do about an OSError, by errno (the message names the path and the errno's meaning).
_ADVICE: Final = {
    errno.ENOSPC: "free space on that disk or use another --store, then re-run (finished work "
    "is kept)",
    errno.EDQUOT: "free space within your disk quota or use another --store, then re-run",
    errno.EROFS: "the file system is read-only; use a writable --store",
    errno.EACCES: "a permission problem: check the owner and mode of the folder (ls -ld) or "
    "use another --store",
    errno.EPERM: "a permission problem: check the owner and mode of the folder (ls -ld) or "
    "use another --store",
    errno.ENAMETOOLONG: "the name is too long for the file system; use a shorter symbol or "
    "--store path",
    errno.ENOTDIR: "a part of that path is a file, not a folder; point --store at a folder",
    errno.EEXIST: "a file is where a folder should be; point --store at a folder",
}
_ERRNO_IN_TEXT: Final = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)


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
    if len(value) > MAX_KEY_LEN:
        raise InvalidInputError(
            f"`{param}` must be at most {MAX_KEY_LEN} characters long, was {len(value)} "
            f"({value[:20]}...)."
        )
    return value


#: Longest name of one path component and of a whole path, in bytes, where the file system
#: cannot be asked (Linux's NAME_MAX and PATH_MAX).
_NAME_MAX: Final = 255
_PATH_MAX: Final = 4096


def _limit(path: Path, name: str, default: int) -> int:
    """`os.pathconf` limit `name` of the deepest existing folder of `path`, else `default`."""
    folder = next((p for p in (path, *path.parents) if _exists(p)), None)
    if folder is None:
        return default
    try:
        return os.pathconf(folder, name)
    except (OSError, ValueError):
        return default


def _exists(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def validate_path(path: Path, what: str) -> Path:
    """Return `path` if the file system can hold its name, else raise InvalidInputError.

    Every component must fit the file system's name limit (255 bytes on Linux) and the
    whole path its path limit, checked before anything is read or created, so a name the
    system would refuse gives one line naming the component, not an OSError deep inside.
    """
    name_max = _limit(path, "PC_NAME_MAX", _NAME_MAX)
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > name_max:
            raise InvalidInputError(
                f"{what} {path}: the name {part[:20]}… is {size} bytes, more than the file "
                f"system's {name_max}; use a shorter name."
            )
    size = len(os.fsencode(path.absolute()))
    path_max = _limit(path, "PC_PATH_MAX", _PATH_MAX)
    if size >= path_max:
        raise InvalidInputError(
            f"{what} {path}: the path is {size} bytes, more than the file system's "
            f"{path_max - 1}; use a shorter path."
        )
    return path


def store_access_error(err: OSError, path: Path, action: str) -> StoreAccessError:
    """The StoreAccessError for `err`, raised while trying to `action` (e.g. "write") `path`.

    The message names the path, what the errno means and what to do (for a file in the way of
    a folder: which file).
    """
    code = err.errno
    if code is None:  # pyarrow's OSErrors carry the errno in their text only
        found = _ERRNO_IN_TEXT.search(str(err))
        code = int(found.group(1)) if found else None
    meaning = os.strerror(code) if code is not None else str(err)
    advice = _ADVICE.get(code or 0, "check that path and re-run")
    if code in (errno.ENOTDIR, errno.EEXIST):
        blocker = next((p for p in (path, *path.parents) if _is_file(p)), None)
        if blocker is not None:
            advice = f"{blocker} is a file, not a folder; point --store at a folder"
    return StoreAccessError(f"cannot {action} {path} ({meaning}): {advice}.")


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long, a loop: not the file in the way
        return False


@contextlib.contextmanager
def os_errors(path: Path, action: str) -> Iterator[None]:
    """Turn an OSError raised inside into a StoreAccessError about `action` on `path`."""
    try:
        yield
    except OSError as err:
        raise store_access_error(err, path, action) from err


def fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable (fsync the directory entry)."""
    with os_errors(folder, "write"):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _create_temp(path: Path) -> Path:
    """Create an empty ``.<name>.<random>.tmp`` beside `path`, with the umask's permissions
    (mkstemp's 0600 would hide a shared store from the team)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, flags, 0o666))
        except FileExistsError:
            continue
        return tmp


def list_temps(folder: Path) -> list[Path]:
    """The temporary files of atomic writes in `folder` (not below it), sorted."""
    return sorted(p for p in folder.glob(".*.tmp") if _TEMP_RE.fullmatch(p.name) and p.is_file())


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete the temporary files a killed write left in `folder` (not below it); return them.

    Call it only while no other process writes into `folder` (holding its :func:`key_lock`).
    """
    stale = list_temps(folder)
    with os_errors(folder, "clean up"):
        for tmp in stale:
            tmp.unlink(missing_ok=True)
    if stale:
        logger.info("removed %d temporary files of a killed run from %s", len(stale), folder)
    return stale


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is fsynced and renamed to `path`.

    On any exception the temporary file is removed and `path` is left as it was; an OSError
    (of the caller's writing too) becomes a StoreAccessError naming `path`.
    """
    with os_errors(path, "write"):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _create_temp(path)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise store_access_error(err, path, "write") from err
    except BaseException:
        with contextlib.suppress(OSError):
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
    """Read a JSON object written by fxstore (a manifest).

    Raises
    ------
    StoreAccessError
        The file cannot be read (missing, no permission, ...).
    InvalidInputError
        It is not a JSON object (damaged or edited by hand).
    """
    with os_errors(path, "read"):
        text = path.read_bytes()
    return _json_object(path, text)


def _json_object(path: Path, text: bytes) -> dict[str, object]:
    """`text`, read from `path`, as a JSON object (errors as :func:`read_json`)."""
    try:
        obj = json.loads(text)
    except ValueError as err:
        raise InvalidInputError(
            f"{path}: cannot read it as JSON ({err}); it is damaged or was edited: re-run the "
            "command that wrote it with --force."
        ) from err
    if not isinstance(obj, dict):
        raise InvalidInputError(
            f"{path}: expected a JSON object; it is damaged or was edited: re-run the command "
            "that wrote it with --force."
        )
    return obj


def manifest_field(data: Mapping[str, object], key: str, kind: type[_T], where: Path) -> _T:
    """`data[key]` of the manifest (or manifest entry) read from `where`, checked to be `kind`.

    An int is never a bool; a float may be written as an int (it is returned as a float).

    Raises
    ------
    SchemaError
        The field is missing or of another type (the message names the file and the field).
    """
    if key not in data:
        raise SchemaError(
            f"{where}: field `{key}` is missing; the manifest is damaged or was edited: re-run "
            "the command that wrote it with --force."
        )
    value = data[key]
    ok = isinstance(value, int | float) if kind is float else isinstance(value, kind)
    if not ok or isinstance(value, bool):
        raise SchemaError(
            f"{where}: field `{key}` must be {_KIND_NAMES[kind]}, was {value!r}; the manifest "
            "is damaged or was edited: re-run the command that wrote it with --force."
        )
    result: object = float(value) if isinstance(value, int | float) and kind is float else value
    return cast(_T, result)


#: The fields of a bar manifest's day entry, and their JSON types ("file" and "sha256" only
#: on a day with bars).
_DAY_FIELDS: Final[dict[str, type]] = {
    "trading_day": str,
    "n_bars": int,
    "n_records": int,
    "n_kept": int,
}
_DAY_FILE_FIELDS: Final[dict[str, type]] = {"file": str, "sha256": str}


def bar_day_entries(manifest: Mapping[str, object], where: Path) -> list[dict[str, object]]:
    """The ``days`` of bar manifest `manifest` (read from `where`), each field checked.

    Every entry is a JSON object with ``trading_day`` (a string), ``n_bars``, ``n_records``
    and ``n_kept`` (whole numbers), and, for a day with bars, ``file`` and ``sha256``
    (strings); trading days are distinct and in order.

    Raises
    ------
    SchemaError
        A field missing or of another type, an entry that is no object, a day listed twice or
        out of order (the message names the file and the field).
    """
    days = manifest_field(manifest, "days", list, where)
    entries: list[dict[str, object]] = []
    for day in days:
        if not isinstance(day, dict):
            raise SchemaError(
                f"{where}: every entry of `days` must be a JSON object, was {day!r}; the "
                "manifest is damaged or was edited: re-run the command that wrote it with --force."
            )
        for name, kind in _DAY_FIELDS.items():
            manifest_field(day, name, kind, where)
        if "file" in day:
            for name, kind in _DAY_FILE_FIELDS.items():
                manifest_field(day, name, kind, where)
        entries.append(day)
    listed = [str(d["trading_day"]) for d in entries]
    if listed != sorted(set(listed)):
        raise SchemaError(
            f"{where}: `days` must list each trading day once, in order; the manifest is "
            "damaged or was edited: re-run the command that wrote it with --force."
        )
    return entries


def file_sha256(path: Path, block: int = 1 << 20) -> str:
    """Hex SHA-256 of the file at `path`, read in blocks."""
    digest = hashlib.sha256()
    with os_errors(path, "read"), open(path, "rb") as fh:
        while data := fh.read(block):
            digest.update(data)
    return digest.hexdigest()


def matches_manifest(path: Path, manifest: Path, sha256: str, size: int | None = None) -> bool:
    """Whether the file `path` is still the one `manifest` recorded (checksum `sha256`).

    Cheap when nothing changed: a file of the recorded `size` (when given) last modified no
    later than the manifest, which is written after every file it lists, is taken as it is.
    A file changed since (edited, copied over, restored) is hashed again: a same-size file
    with other bytes is not trusted.
    """
    with os_errors(path, "read"):
        if not path.is_file():
            return False
        stat = path.stat()
        committed = manifest.stat().st_mtime_ns
    if size is not None and stat.st_size != size:
        return False
    return stat.st_mtime_ns <= committed or file_sha256(path) == sha256


@contextlib.contextmanager
def key_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (its ``.lock`` file) while writing there.

    Two writers on one key are serialised: the second waits. The lock is an OS file lock,
    released when the process ends, so a killed run never leaves a stale lock behind. Once
    held, the temporary files of a killed writer are removed (:func:`remove_stale_temps`).

    Raises
    ------
    StoreAccessError
        The folder or its lock file cannot be created (read-only, no permission, ...).
    """
    lock = folder / LOCK
    with os_errors(lock, "create the lock file"):
        folder.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+b")  # noqa: SIM115 - closed below
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.warning("waiting for another fxstore process writing %s", folder)
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        remove_stale_temps(folder)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def manifest_path(folder: Path) -> Path:
    """The manifest file of a bar series or fxcache `folder`."""
    return folder / MANIFEST


def resolve_manifest_file(manifest: Path, name: str, *, allow_links: bool = False) -> Path:
    """The path of file `name`, read from `manifest`, inside the manifest's folder.

    `name` is relative to the folder holding `manifest` (a shard or a day file). The name is
    checked lexically, and a file that is a symbolic link must lead inside the folder too
    (a file replaced by a link elsewhere is not read); `allow_links` skips that check, for
    ``fxstore verify``, which reports such a link itself.

    Raises
    ------
    SchemaError
        `name` is empty, absolute, or leads out of the folder (``../x.arrow``): the manifest
        is damaged or was edited by hand; or the file is a link out of the folder.

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
    path = manifest.parent / name
    if not allow_links and path.is_symlink() and not _inside(path, manifest.parent):
        raise SchemaError(
            f"{path}: a symbolic link to {os.path.realpath(path)}, outside {manifest.parent}; "
            "refusing to read it (the store's files were replaced): remove the link and re-run "
            "the command that wrote it with --force."
        )
    return path


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path`, its links followed, lies inside `folder` (its links followed too)."""
    real, base = os.path.realpath(path), os.path.realpath(folder)
    return real.startswith(base.rstrip(os.sep) + os.sep)


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


# --- versions of a bar series ---------------------------------------------------------------

#: The ``format`` of a bar series' manifest (its committed versions).
SERIES_FORMAT: Final = "fxstore-bar-series/1"
_DAMAGED: Final = "the manifest is damaged or was edited: re-run `fxstore ingest --force`"


@dataclasses.dataclass(frozen=True, slots=True)
class BarVersion:
    """One committed version of a bar series (ArcticDB's ``VersionedItem``)."""

    #: 1, 2, ...: a later build has a higher number; numbers are never reused.
    version: int
    #: When the build was committed: ns since the epoch, UTC (strictly increasing).
    committed_ns: int
    #: SHA-256 of the version's manifest: the identity of its bars.
    manifest_sha256: str
    #: The folder holding the version's ``manifest.json`` and day files.
    folder: Path
    is_current: bool

    @property
    def manifest(self) -> Path:
        """The version's manifest (the ingest manifest of its day files)."""
        return self.folder / MANIFEST

    @property
    def committed_at(self) -> str:
        """The commit time as ISO 8601 UTC, to the microsecond."""
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)  # exact: no float between
        stamp = epoch + dt.timedelta(microseconds=self.committed_ns // 1000)
        return stamp.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _version_dir(series: Path, version: int) -> Path:
    """``v<NNNN>``: the folder of `version` in the bar-series folder `series`."""
    return series / f"v{version:04d}"


def _series_manifest(series: Path) -> dict[str, object] | None:
    path = manifest_path(series)
    with os_errors(path, "read"):
        if not path.is_file():
            return None
    return read_json(path)


def _legacy_version(series: Path, is_current: bool = True) -> BarVersion:
    """A series of fxstore before versions (day files beside its manifest): version 1."""
    path = manifest_path(series)
    with os_errors(path, "read"):
        committed_ns = path.stat().st_mtime_ns
    return BarVersion(1, committed_ns, file_sha256(path), series, is_current)


def list_bar_versions(series: Path) -> list[BarVersion]:
    """The committed versions of the bar series in folder `series`, oldest first.

    Empty when nothing was ever committed there. A series written before versions existed
    is one version, 1, read where it lies.

    Raises
    ------
    SchemaError
        The series manifest is malformed (the message names the file and the field).
    """
    data = _series_manifest(series)
    if data is None:
        return []
    if "versions" not in data and data.get("format") != SERIES_FORMAT:
        return [_legacy_version(series)]
    where = manifest_path(series)
    current = manifest_field(data, "current", int, where)
    versions = []
    for entry in manifest_field(data, "versions", list, where):
        if not isinstance(entry, dict):
            raise SchemaError(
                f"{where}: every entry of `versions` must be a JSON object; {_DAMAGED}."
            )
        number = manifest_field(entry, "version", int, where)
        versions.append(
            BarVersion(
                number,
                manifest_field(entry, "committed_ns", int, where),
                manifest_field(entry, "manifest_sha256", str, where),
                _version_dir(series, number),
                number == current,
            )
        )
    numbers = [v.version for v in versions]
    if numbers != sorted(set(numbers)) or not numbers or numbers[0] < 1 or current not in numbers:
        raise SchemaError(
            f"{where}: `versions` must be increasing version numbers from 1 that hold "
            f"`current` ({current}), were {numbers}; {_DAMAGED}."
        )
    return versions


def find_bar_version(
    series: Path, *, version: int | None = None, as_of_ns: int | None = None
) -> BarVersion:
    """The version of the bar series `series` to read: the current one by default.

    Parameters
    ----------
    version
        That version number.
    as_of_ns
        The version that was current at this time (ns since the epoch, UTC): the last one
        committed at or before it.

    Raises
    ------
    SymbolNotFoundError
        Nothing committed, no such version or none committed by `as_of_ns` (lists them).
    InvalidInputError
        Both `version` and `as_of_ns` given.
    """
    if version is not None and as_of_ns is not None:
        raise InvalidInputError("give `version` or `as_of`, not both.")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise InvalidInputError(f"`version` must be a whole number (1, 2, ...), was {version!r}.")
    versions = list_bar_versions(series)
    if not versions:
        raise SymbolNotFoundError(f"{series}: no committed bars; run `fxstore ingest` first.")
    known = ", ".join(f"{v.version} ({v.committed_at})" for v in versions)
    if version is not None:
        found = [v for v in versions if v.version == version]
        if not found:
            raise SymbolNotFoundError(f"{series}: no version {version}; it has {known}.")
        return found[0]
    if as_of_ns is not None:
        found = [v for v in versions if _committed_by(v, as_of_ns)]
        if not found:
            raise SymbolNotFoundError(
                f"{series}: no version was committed by the `as_of` time; it has {known}."
            )
        return found[-1]
    return next(v for v in versions if v.is_current)


def read_bar_manifest(version: BarVersion) -> dict[str, object]:
    """The manifest of `version`, checked against the SHA-256 its commit recorded.

    A manifest edited after its commit (a field changed, a day entry added) is refused: its
    bytes are no longer those the series' list of versions names, so nothing it says is
    trusted.

    Raises
    ------
    StoreAccessError
        The manifest cannot be read.
    SchemaError
        Its SHA-256 is not the committed one.
    InvalidInputError
        It is not a JSON object.
    """
    path = version.manifest
    with os_errors(path, "read"):
        data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != version.manifest_sha256:
        raise SchemaError(
            f"{path}: SHA-256 is {digest}, but version {version.version} was committed with "
            f"{version.manifest_sha256} ({manifest_path(version.folder.parent)}): the manifest "
            "was changed after its commit; refusing to trust it. Restore it, or re-run "
            "`fxstore ingest --force` (`fxstore verify` lists what else differs)."
        )
    return _json_object(path, data)


def _committed_by(version: BarVersion, as_of_ns: int) -> bool:
    """Whether `version` was committed at or before `as_of_ns`; an `as_of` that is the commit
    time as shown (to the microsecond, :attr:`BarVersion.committed_at`) counts as at it."""
    shown_ns = version.committed_ns // 1000 * 1000
    return version.committed_ns <= as_of_ns or (as_of_ns % 1000 == 0 and shown_ns == as_of_ns)


def stage_bar_version(series: Path) -> Path:
    """The folder of the next version of `series`, created: where a build writes.

    The folder of a killed build is the same folder (the next number after the current
    version's), so a re-run can resume it; its temporary files are removed. Hold the
    series' :func:`key_lock`.
    """
    versions = list_bar_versions(series)
    folder = _version_dir(series, versions[-1].version + 1 if versions else 1)
    with os_errors(folder, "create"):
        folder.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(folder)
    return folder


def discard_bar_stage(folder: Path) -> None:
    """Delete the uncommitted version folder `folder` (of :func:`stage_bar_version`).

    Raises
    ------
    InvalidInputError
        `folder` is a committed version: it is never deleted here.
    """
    series = folder.parent
    if any(v.folder == folder for v in list_bar_versions(series)) or folder == series:
        raise InvalidInputError(f"{folder} is a committed version of {series}; not deleting it.")
    with os_errors(folder, "delete"):
        if folder.exists():
            shutil.rmtree(folder)


def _write_series(series: Path, versions: Sequence[BarVersion], current: int) -> None:
    """Commit the list of versions: one atomic rename of the series manifest."""
    entries = [
        {
            "version": v.version,
            "committed_ns": v.committed_ns,
            "committed_at": v.committed_at,
            "manifest_sha256": v.manifest_sha256,
        }
        for v in versions
    ]
    data = {"format": SERIES_FORMAT, "current": current, "versions": entries}
    atomic_write_json(manifest_path(series), data)


def _migrate_legacy(series: Path) -> tuple[BarVersion, list[Path]]:
    """Copy a series of fxstore before versions into ``v0001`` (hard links where the file
    system allows); return version 1 there and the old files to delete once committed.

    Its manifest is copied byte for byte, so its SHA-256 (what fxcaches recorded) is kept.
    Until the commit the old layout is untouched: a killed migration is done again.
    """
    legacy = _legacy_version(series, is_current=False)
    data = read_json(legacy.manifest)
    target = _version_dir(series, 1)
    old: list[Path] = []
    with os_errors(target, "write"):
        shutil.rmtree(target, ignore_errors=True)  # a killed migration's half
        target.mkdir()
        days = data.get("days")
        for day in days if isinstance(days, list) else []:
            name = str(day.get("file", "")) if isinstance(day, dict) else ""
            if not name:
                continue
            if os.path.basename(name) != name:
                raise SchemaError(
                    f"{legacy.manifest}: file entry {name!r} is no file name; {_DAMAGED}."
                )
            source = resolve_manifest_file(legacy.manifest, name)
            with contextlib.suppress(FileNotFoundError):  # already missing: v1 stays damaged
                try:
                    os.link(source, target / name)
                except OSError:
                    shutil.copy2(source, target / name)  # keeps the mtime the manifest trusts
                old.append(source)
    atomic_write_bytes(target / MANIFEST, legacy.manifest.read_bytes())
    return dataclasses.replace(legacy, folder=target), old


def commit_bar_version(series: Path, folder: Path) -> BarVersion:
    """Make the finished build in `folder` (its manifest written) the current version.

    One atomic rename of the series manifest: until it, readers see the previous version;
    after it, the new one. A series of fxstore before versions is moved into ``v0001``
    first. Hold the series' :func:`key_lock`.
    """
    versions = list_bar_versions(series)
    old: list[Path] = []
    if versions and versions[0].folder == series:
        migrated, old = _migrate_legacy(series)
        versions = [migrated]
    number = versions[-1].version + 1 if versions else 1
    if folder != _version_dir(series, number):
        raise InvalidInputError(f"{folder} is not the next version of {series}; re-run ingest.")
    now = time.time_ns() // 1000 * 1000  # a whole microsecond: the time shown is the time
    committed_ns = max(now, versions[-1].committed_ns + 1000) if versions else now
    new = BarVersion(number, committed_ns, file_sha256(folder / MANIFEST), folder, True)
    past = [dataclasses.replace(v, is_current=False) for v in versions]
    _write_series(series, [*past, new], number)
    with os_errors(series, "clean up"):
        for path in old:  # the layout before versions: v0001 holds them now
            path.unlink(missing_ok=True)
    logger.info("committed version %d of %s", number, series)
    return new


def list_orphan_bar_folders(series: Path) -> list[Path]:
    """Version folders below the current version that no committed version names (a
    deletion that was killed): nothing references them."""
    versions = list_bar_versions(series)
    if not versions:
        return []
    named = {v.folder for v in versions}
    last = versions[-1].version
    return sorted(
        p
        for p in series.glob("v[0-9][0-9][0-9][0-9]*")
        if p.is_dir() and p.name[1:].isdigit() and int(p.name[1:]) <= last and p not in named
    )


def delete_bar_versions(series: Path, numbers: Sequence[int]) -> list[Path]:
    """Delete versions `numbers` of `series` (never the current one) and orphan folders;
    return the folders deleted. The series manifest drops them first (one atomic commit),
    then their folders go. Hold the series' :func:`key_lock`.

    Raises
    ------
    InvalidInputError
        One of `numbers` is the current version.
    SymbolNotFoundError
        One of `numbers` is no committed version.
    """
    versions = list_bar_versions(series)
    by_number = {v.version: v for v in versions}
    for number in numbers:
        if number not in by_number:
            raise SymbolNotFoundError(f"{series}: no version {number}; it has {sorted(by_number)}.")
        if by_number[number].is_current:
            raise InvalidInputError(f"{series}: version {number} is current; it is never deleted.")
    gone = [by_number[n].folder for n in sorted(set(numbers))]
    if gone:
        current = next(v.version for v in versions if v.is_current)
        _write_series(series, [v for v in versions if v.version not in numbers], current)
    gone += [p for p in list_orphan_bar_folders(series) if p not in gone]
    with os_errors(series, "delete a version in"):
        for folder in gone:
            shutil.rmtree(folder)
    return gone
