"""Stores and inputs in object storage: ``--store s3://bucket/prefix`` and ``s3://`` DBN inputs.

:func:`open_store` turns a ``--store`` value into the local root a command works on: a local
path as it is, an ``s3://`` URL as a local mirror of its committed part (pulled before,
pushed with conditional commits after: :mod:`fxstore.remote.mirror`). :func:`fetch_inputs`
downloads ``s3://`` DBN files or batch-download folders into the cache folder once, keeping
the objects' modification times so a re-run finds its inputs unchanged.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path

from fxstore.errors import RunInterruptedError, StoreAccessError
from fxstore.remote.mirror import AREAS, Mirror, mirror_lock, mirror_name, safe_local
from fxstore.remote.s3 import CommitConflictError, S3Bucket, StoreUrl, parse_url
from fxstore.store import atomic_path, os_errors, validate_path

__all__ = [
    "CommitConflictError",
    "default_cache_dir",
    "fetch_inputs",
    "is_url",
    "open_store",
    "store_options",
]

#: The mirrors open in this process: local root → the options that name its store.
_OPEN: dict[Path, tuple[str, ...]] = {}


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
) -> Iterator[Path]:
    """Yield the local root to run a command on for the store `store`.

    A local path (or ``file://`` URL) is yielded as it is. For ``s3://bucket/prefix`` the
    yielded root is the mirror under `cache_dir` (default :func:`default_cache_dir`), pulled
    first; when the body returns, what it committed there is pushed with conditional commits.
    An error in the body pushes nothing (a training run stopped on request pushes its run).
    Only the store `areas` (``bars``, ``fxcache``, ``runs``, ``synth``) are pulled and pushed.

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
        mirror = Mirror(bucket, root, areas)
        mirror.pull()
        _OPEN[root] = options
        try:
            yield root
        except RunInterruptedError:
            mirror.push(commits=False)
            raise
        finally:
            _OPEN.pop(root, None)
        mirror.push()


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
