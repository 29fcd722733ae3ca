"""Stores and inputs in object storage: ``--store s3://bucket/prefix`` and ``s3://`` DBN inputs.

:func:`open_store` turns a ``--store`` value into the local root a command works on: a local
path as it is, an ``s3://`` URL as a local mirror of its committed part (pulled before,
pushed with conditional commits after: :mod:`fxstore.remote.mirror`). :func:`fetch_inputs`
downloads ``s3://`` DBN files or batch-download folders into the cache folder once, keeping
the objects' modification times so a re-run finds its inputs unchanged;
:func:`list_input_objects` only lists them, for Ray tasks that read them where they are
(:mod:`fxstore.ingest.run.objects`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fxstore.errors import RunInterruptedError, StoreAccessError
from fxstore.remote.mirror import AREAS, Mirror, mirror_lock, mirror_name, safe_local
from fxstore.remote.s3 import CommitConflictError, S3Bucket, StoreUrl, parse_url
from fxstore.store import atomic_path, file_sha256, os_errors, validate_path

__all__ = [
    "CommitConflictError",
    "InputObject",
    "bucket_of",
    "commit",
    "default_cache_dir",
    "drop_object",
    "fetch_inputs",
    "in_bucket",
    "in_store",
    "is_url",
    "list_input_objects",
    "location",
    "object_problem",
    "open_reader",
    "open_store",
    "restore_object",
    "store_options",
    "upload",
]

#: The mirrors open in this process: local root → the options that name its store.
_OPEN: dict[Path, tuple[str, ...]] = {}
#: The mirrors open in this process: local root → its mirror.
_MIRRORS: dict[Path, Mirror] = {}


def _mirror_of(path: Path) -> tuple[Mirror, str] | None:
    """The open mirror holding `path` and the store-relative path of it; None when `path`
    is not in the mirror of an s3:// store."""
    for root, mirror in _MIRRORS.items():
        if path == root:
            return mirror, ""
        if root in path.parents:
            return mirror, path.relative_to(root).as_posix()
    return None


def bucket_of(root: Path) -> S3Bucket | None:
    """The bucket of the s3:// store whose mirror is at `root` (None for a local store)."""
    mirror = _MIRRORS.get(root)
    return None if mirror is None else mirror.bucket


def location(path: Path) -> str:
    """How messages name `path` of a store: its ``s3://`` URL when it lies in the mirror of
    an s3:// store (the mirror is a cache, the bucket the store), else the path itself."""
    found = _mirror_of(path)
    return str(path) if found is None else found[0].bucket.url.url(found[1])


def commit(root: Path) -> None:
    """Push what the command committed in the store at `root` now, so that it can report
    success once the store holds it (nothing to do for a local store; the push at the end
    of :func:`open_store` then finds nothing left).

    Raises
    ------
    CommitConflictError
        Another writer committed the same manifest first.
    """
    mirror = _MIRRORS.get(root)
    if mirror is not None:
        mirror.push()


def upload(path: Path) -> None:
    """Write the file `path` of an s3:// store's mirror into the bucket now, unless the bucket
    holds its bytes (nothing to do for a local store). Its object is never replaced: a file
    written once (a fetched file, the record of a purchase).

    Raises
    ------
    CommitConflictError
        The bucket holds other bytes under its name (another writer's).
    """
    found = _mirror_of(path)
    if found is not None:
        found[0].put_once(path)


def in_bucket(path: Path) -> bool:
    """Whether `path` lies in the mirror of an s3:// store (its bucket is the truth of it)."""
    return _mirror_of(path) is not None


def object_problem(path: Path, sha256: object, size: object) -> str | None:
    """What is wrong with the object of the mirror's `path` in the bucket, against the
    `sha256` and `size` (None: not recorded) its manifest records; None when it is intact.

    The size comes from the bucket's listing; the digest from the SHA-256 S3 stored at upload
    (a HEAD request), else from the object's bytes streamed (never from the local copy).
    """
    found = _mirror_of(path)
    if found is None:
        raise ValueError(f"{path} is not in the mirror of an s3:// store")
    mirror, rel = found
    info = mirror.listing.get(rel)
    if info is None:
        return "listed in its manifest but missing in the bucket"
    if isinstance(size, int) and not isinstance(size, bool) and info.size != size:
        return f"is {info.size} bytes in the bucket, its manifest says {size}"
    stored = mirror.bucket.stored_sha256(rel) or mirror.bucket.read_sha256(rel)
    if stored != sha256:
        return "SHA-256 in the bucket differs from its manifest's (damaged or replaced)"
    return None


def drop_object(path: Path) -> None:
    """Delete the object of the mirror's `path` from the bucket, and the local copy (a damaged
    object, before what replaces it is written under its name)."""
    found = _mirror_of(path)
    if found is None:
        raise ValueError(f"{path} is not in the mirror of an s3:// store")
    mirror, rel = found
    mirror.bucket.delete([rel])
    mirror.listing.pop(rel, None)
    with os_errors(path, "delete"):
        path.unlink(missing_ok=True)


def restore_object(path: Path, sha256: object) -> bool:
    """Write the mirror's copy of `path` over its damaged object in the bucket when that copy
    holds the bytes of `sha256` (what its manifest records); return whether it did."""
    found = _mirror_of(path)
    if found is None or not path.is_file():
        return False
    with os_errors(path, "read"):
        if file_sha256(path) != sha256:
            return False
    mirror, rel = found
    mirror.bucket.delete([rel])
    mirror.listing.pop(rel, None)
    mirror.put_once(path)
    return True


def in_store(path: Path, size: int) -> bool:
    """Whether the s3:// store whose mirror holds `path` has an object of `size` bytes at
    its place, as listed when the command started or written by it since (False for a
    local store, whose files are checked where they are)."""
    found = _mirror_of(path)
    if found is None:
        return False
    info = found[0].listing.get(found[1])
    return info is not None and info.size == size


def store_options(root: Path) -> str:
    """The command-line options that name the store at `root`: ``--store ROOT``, or for the
    mirror of an s3:// store its URL (with ``--s3-endpoint`` and ``--cache-dir`` as given)."""
    return " ".join(shlex.quote(a) for a in _OPEN.get(root, ("--store", str(root))))


def is_url(value: str | os.PathLike[str]) -> bool:
    """Whether `value` is a URL (``scheme://...``) rather than a local path."""
    return "://" in str(value)


def _local_of(value: str) -> Path | None:
    """The local path of a ``file://`` URL or a plain path; None for another URL."""
    if value.startswith("file://"):
        return Path(value.removeprefix("file://"))
    return None if is_url(value) else Path(value)


def default_cache_dir() -> Path:
    """Where downloads and store mirrors are kept: the user's cache folder + ``fxstore``
    (``$XDG_CACHE_HOME/fxstore``, ``~/.cache/fxstore`` on Linux; platformdirs elsewhere)."""
    try:
        import platformdirs
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "fxstore"
    return Path(platformdirs.user_cache_dir("fxstore", appauthor=False))


@contextlib.contextmanager
def open_store(
    store: str | os.PathLike[str],
    *,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
    areas: tuple[str, ...] = AREAS,
    lazy: bool = False,
    symbols: tuple[str, ...] | None = None,
) -> Iterator[Path]:
    """Yield the local root to run a command on for the store `store`.

    A local path (or ``file://`` URL) is yielded as it is. For ``s3://bucket/prefix`` the
    yielded root is the mirror under `cache_dir` (default :func:`default_cache_dir`), pulled
    first; when the body returns, what it committed there is pushed with conditional commits.
    An error in the body pushes nothing (a training run stopped on request pushes its run).
    Only the store `areas` (``bars``, ``fxcache``, ``runs``, ``synth``, ``raw``) are pulled and
    pushed; with `lazy` only their manifests are pulled (a command that reads no day file or
    shard); with `symbols` only those symbols' folders of bars, fxcache and synth.

    Raises
    ------
    StoreAccessError
        No credentials, no such bucket, access denied, the endpoint cannot be reached.
    CommitConflictError
        Another writer committed the same manifest first.
    """
    local = _local_of(str(store))
    if local is not None:
        yield validate_path(local, "--store")
        return
    url = parse_url(str(store))
    bucket = S3Bucket(url, endpoint)
    bucket.check()
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    root = cache / "stores" / mirror_name(url.url(), bucket.endpoint)
    options: tuple[str, ...] = ("--store", url.url())
    options += ("--s3-endpoint", endpoint) if endpoint else ()
    options += ("--cache-dir", str(cache_dir)) if cache_dir is not None else ()
    with mirror_lock(root):
        mirror = Mirror(bucket, root, areas, lazy=lazy, symbols=symbols)
        mirror.pull()
        _OPEN[root] = options
        _MIRRORS[root] = mirror
        try:
            yield root
            mirror.push()
        except RunInterruptedError:
            mirror.push(commits=False)
            raise
        finally:
            _OPEN.pop(root, None)
            _MIRRORS.pop(root, None)


#: Makes the local `file` hold the bytes of `sha256` that `manifest` lists: see
#: :func:`open_reader`.
FetchFile = Callable[[Path, str, Path], None]


def open_reader(
    store: str | os.PathLike[str],
    *,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
) -> tuple[Path, FetchFile]:
    """The local mirror of the ``s3://`` store `store` to read from, and how to fetch one file.

    Only the committed manifests of bars and fxcaches are pulled (as a command that reads
    manifests only does); a reader then fetches each day file or shard it reads, and no
    other, with the returned function (`file`, its SHA-256, the manifest listing it): it
    downloads the object unless the mirror holds those bytes and checks the download against
    the SHA-256 (a damaged object is left out with a warning, and the read then says the
    file is missing).

    Raises
    ------
    StoreAccessError
        No credentials, no such bucket, access denied, the endpoint cannot be reached.
    """
    url = parse_url(str(store))
    bucket = S3Bucket(url, endpoint)
    bucket.check()
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    root = cache / "stores" / mirror_name(url.url(), bucket.endpoint)
    mirror = Mirror(bucket, root, ("bars", "fxcache"), lazy=True)
    with mirror_lock(root):
        mirror.pull()

    def fetch(file: Path, sha256: str, manifest: Path) -> None:
        with mirror_lock(root):
            mirror.fetch(file, sha256, manifest)

    return root, fetch


def fetch_inputs(
    values: Sequence[str | os.PathLike[str]],
    *,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
) -> list[Path]:
    """Local paths of the DBN inputs `values`: local paths as they are, ``s3://`` objects
    or prefixes (a Databento batch download kept in a bucket) downloaded into
    ``<cache_dir>/inputs/<bucket>/<key>`` once (again only when size or time changed).

    Raises
    ------
    StoreAccessError
        The bucket cannot be read (see :class:`~fxstore.remote.s3.S3Bucket`), or no object
        is at or under the URL.
    """
    cache = cache_dir if cache_dir is not None else default_cache_dir()
    out = []
    for value in values:
        local = _local_of(str(value))
        if local is not None:
            out.append(local)
            continue
        out.append(_fetch_input(parse_url(str(value)), endpoint, cache / "inputs"))
    return out


def _fetch_input(url: StoreUrl, endpoint: str | None, cache: Path) -> Path:
    parent = StoreUrl(url.bucket, url.prefix.rpartition("/")[0])
    name = url.prefix.rpartition("/")[2]
    bucket = S3Bucket(parent, endpoint)
    one = bucket.head(name) if name else None
    listing = {name: one} if one is not None else bucket.list(name) if name else {}
    if not listing:
        raise StoreAccessError(
            f"no object at or under {url.url()}; check the URL (`aws s3 ls` lists the bucket)."
        )
    base = cache / url.bucket / parent.prefix if parent.prefix else cache / url.bucket
    for rel, info in sorted(listing.items()):
        path = safe_local(base, rel)
        with os_errors(path, "read"):
            if path.is_file():
                stat = path.stat()
                if stat.st_size == info.size and stat.st_mtime_ns == info.mtime_ns:
                    continue
        with atomic_path(path) as tmp:
            bucket.download(rel, tmp)
        os.utime(path, ns=(info.mtime_ns, info.mtime_ns))
    return base / name


#: Names of DBN files among the objects under an input prefix (as in a local folder).
_DBN_SUFFIXES = (".dbn", ".dbn.zst")


@dataclass(frozen=True, slots=True)
class InputObject:
    """A DBN input file kept in object storage, read where it is needed (by a task)."""

    #: ``s3://bucket/key``.
    url: str
    size: int
    #: Last modified, ns since the epoch (what a download's file time would be).
    mtime_ns: int
    #: The S3-compatible endpoint (None: AWS, or ``AWS_ENDPOINT_URL`` where it is read).
    endpoint: str | None

    @property
    def bucket(self) -> str:
        return parse_url(self.url).bucket

    @property
    def key(self) -> str:
        return parse_url(self.url).prefix


def list_input_objects(url: str, *, endpoint: str | None = None) -> list[InputObject]:
    """The DBN input objects at `url`: the object itself, or the ``*.dbn`` / ``*.dbn.zst``
    objects right under it as a prefix (a Databento batch download kept in a bucket; its
    side files are left out, as in a local folder), in key order. Nothing is downloaded.

    Raises
    ------
    StoreAccessError
        The bucket cannot be listed, or no DBN object is at or under `url`.
    """
    parsed = parse_url(url)
    bucket = S3Bucket(StoreUrl(parsed.bucket, ""), endpoint)
    one = bucket.head(parsed.prefix) if parsed.prefix else None
    if one is not None:
        listing = {parsed.prefix: one}
    else:
        base = f"{parsed.prefix}/" if parsed.prefix else ""
        listing = {
            key: info
            for key, info in bucket.list(parsed.prefix).items()
            if "/" not in key[len(base) :] and key.endswith(_DBN_SUFFIXES)
        }
    if not listing:
        raise StoreAccessError(
            f"no DBN object (*.dbn, *.dbn.zst) at or under {parsed.url()}; check the URL "
            "(`aws s3 ls` lists the bucket)."
        )
    return [
        InputObject(StoreUrl(parsed.bucket, key).url(), info.size, info.mtime_ns, bucket.endpoint)
        for key, info in sorted(listing.items())
    ]
