"""Files of the store, written and read safely: validated keys and paths, atomic writes,
JSON manifests and their fields, checksums, lock files, and every OSError as one line.

Writes go to a temporary name in the destination folder, are fsynced and renamed into place:
a killed run leaves no partial file visible, and the next writer of that folder removes the
temporary file it left (:func:`remove_stale_temps`). A file name read from a manifest is
resolved inside the manifest's folder (:func:`resolve_manifest_file`). Every OSError of these
helpers (disk full, read-only, no permission, name too long, a file where a folder should be)
becomes a :class:`~fxstore.errors.StoreAccessError` that names the path and what to do
(:func:`os_errors`). Files follow the umask (0644 under the usual 022).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Final, TypeVar, cast

from fxstore.errors import InvalidInputError, SchemaError, StoreAccessError

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
def file_lock(lock: Path, folder: Path, waiting_for: str) -> Iterator[None]:
    """Hold an exclusive OS lock on the file `lock` (created with `folder`), logging
    "waiting for another fxstore process `waiting_for`" while another process holds it.

    The lock goes with the process, so a killed one never leaves a stale lock behind.

    Raises
    ------
    StoreAccessError
        The folder or its lock file cannot be created (read-only, no permission, ...).
    """
    with os_errors(lock, "create the lock file"):
        folder.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+b")  # noqa: SIM115 - closed below
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.warning("waiting for another fxstore process %s", waiting_for)
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


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
    with file_lock(folder / LOCK, folder, f"writing {folder}"):
        remove_stale_temps(folder)
        yield


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
