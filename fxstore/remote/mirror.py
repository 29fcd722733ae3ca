"""A store in an S3 bucket, worked on through a local mirror of its committed part.

fxstore's stages read and write a local store (:mod:`fxstore.store` owns that layout). For a
store at ``s3://bucket/prefix`` a command runs on a local mirror of it, kept under the cache
folder (``--cache-dir``) so every file is downloaded once:

1. **pull**: the committed manifests (a bar series' list of versions, an fxcache's
   manifest) are read with their ETags; every version manifest, day file and shard they list
   is downloaded unless the mirror already holds those bytes, and its SHA-256 is checked
   against the manifest: a changed, damaged or missing object is left out of the mirror with
   a warning (no copy of other bytes is kept), so everything else can still be read, and
   ``fxstore verify`` reports it. Commands that read only manifests (``ls``, ``info``,
   ``rolls``, ``gc``, ``verify``) pull only those (`lazy`). A manifest the bucket no
   longer holds (or never did) is removed from the mirror, so the mirror never calls
   committed what the bucket does not. ``runs/`` and ``synth/`` are copied as they are.
2. the command runs on the mirror, exactly as on a local store (training memory-maps the
   mirror's verified shards).
3. **push**: for each manifest the command committed, the files it lists are uploaded under
   the new version's prefix (``If-None-Match: *``: an object is never replaced), then the
   manifest is committed with a conditional PUT, ``If-Match`` the ETag read at pull (or
   ``If-None-Match: *`` when there was none). Of concurrent writers exactly one commits;
   the others get a :class:`~fxstore.remote.s3.CommitConflictError`. Nothing half-written is
   ever committed: a manifest is written after every object it names, and only if the
   objects under its names hold its bytes.

No lock file is used on S3; on the local side one command at a time uses a mirror (an OS
file lock beside it, released when the process ends).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError
from fxstore.remote.s3 import CommitConflictError, ObjectInfo, S3Bucket, md5_hex
from fxstore.store import (
    LOCK,
    MANIFEST,
    atomic_path,
    atomic_write_bytes,
    file_lock,
    file_sha256,
    is_fxcache_stage,
    list_bar_versions,
    os_errors,
    read_json,
    resolve_manifest_file,
    validate_key,
)

__all__ = ["AREAS", "Mirror", "mirror_lock", "mirror_name", "safe_local"]

logger = logging.getLogger(__name__)

#: Store areas copied file by file (no manifest commits them).
_PLAIN: Final = ("runs", "synth")
#: Store areas whose first folder is a symbol.
_BY_SYMBOL: Final = ("bars", "fxcache", "synth")
#: Every area of a store a mirror may hold.
AREAS: Final = ("bars", "fxcache", "runs", "synth", "raw")
_TEMP_RE: Final = re.compile(r"\..+\.[A-Za-z0-9_]{8}\.tmp")


def safe_local(root: Path, rel: str) -> Path:
    """The local path of the store-relative `rel`, which must stay inside `root`.

    Raises
    ------
    SchemaError
        `rel` (an object key or a name read from a manifest) is absolute, empty in a part or
        holds '.' or '..': it could leave the store root.
    """
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") or "\\" in p for p in parts):
        raise SchemaError(
            f"object {rel!r} of the store would leave the store root; it is not fxstore's: "
            "remove it from the bucket."
        )
    return root.joinpath(*parts)


@contextlib.contextmanager
def mirror_lock(root: Path) -> Iterator[None]:
    """Hold the mirror at `root` for one command (an OS lock on ``<root>.lock``)."""
    with file_lock(root.with_name(root.name + LOCK), root, f"using the cache {root}"):
        yield


class _DamagedError(Exception):
    """A downloaded object does not hold the bytes its manifest records."""


def _is_raw_record(parts: list[str]) -> bool:
    """Whether `parts` is a JSON file of the raw area pulled into a mirror: a purchase record
    (``raw/<DATASET>/.requests/``) or a fetched folder's manifest or Databento side file.
    The data files stay in the bucket until a command reads them; the in-progress folders
    (``.partial``, ``.quarantine``) are never shared."""
    return (
        parts[0] == "raw"
        and len(parts) == 4
        and parts[3].endswith(".json")
        and (parts[2] == ".requests" or not parts[2].startswith("."))
    )


def _is_commit(parts: list[str]) -> bool:
    """Whether the store-relative path `parts` is a manifest that commits (series, fxcache)."""
    return parts[-1] == MANIFEST and (
        (parts[0] == "bars" and len(parts) == 5) or (parts[0] == "fxcache" and len(parts) == 4)
    )


class Mirror:
    """The local mirror of the store in `bucket`, rooted at `root`.

    Only the store areas `areas` (of :data:`AREAS`) are pulled and pushed: what a command
    reads or writes (training needs no bars); the mirror keeps the others as they were.
    With `lazy`, only the manifests are pulled: day files and shards stay in the bucket.
    With `symbols`, only those symbols' series, fxcaches and synthetic files.
    """

    def __init__(
        self,
        bucket: S3Bucket,
        root: Path,
        areas: tuple[str, ...] = AREAS,
        *,
        lazy: bool = False,
        symbols: tuple[str, ...] | None = None,
    ) -> None:
        unknown = set(areas) - set(AREAS)
        if unknown:
            raise InvalidInputError(f"no store area {sorted(unknown)}; they are {AREAS}.")
        self.bucket = bucket
        self.root = root
        self.areas = areas
        #: Commit manifests as pulled: store-relative path → (bytes, ETag).
        self.pulled: dict[str, tuple[bytes, str]] = {}
        self.listing: dict[str, ObjectInfo] = {}
        #: Only the manifests are pulled (a command that reads no day file nor shard: they
        #: are checked in the bucket, or downloaded where read).
        self.lazy = lazy
        #: Objects left out of the mirror as damaged: store-relative path → why.
        self.damaged: dict[str, str] = {}
        #: Objects the last pushes copied inside the bucket rather than uploaded.
        self.copied = 0
        #: Only these symbols' folders of the symbol areas (bars, fxcache, synth) are pulled
        #: and pushed; None: every symbol.
        self.symbols = symbols

    # --- pull ---------------------------------------------------------------------------

    def pull(self) -> None:
        """Bring the mirror to the bucket's committed state (see the module docstring)."""
        self.listing = self.bucket.list()
        self.pulled = {}
        for rel in sorted(self.listing):
            parts = rel.split("/")
            if not self._in_scope(parts):
                continue
            if parts[0] in ("bars", "fxcache") and _is_commit(parts):
                for key in parts[1:-1]:
                    validate_key(key, f"the folder name in {self.bucket.url.url(rel)}")
                data, etag, changed = self._pull_manifest(rel)
                self.pulled[rel] = (data, etag)
                if parts[0] == "bars":
                    self._pull_series(rel, trusted=not changed)
                else:
                    self._pull_fxcache(rel, trusted=not changed)
            elif parts[0] in _PLAIN or _is_raw_record(parts):
                self._pull_plain(rel, self.listing[rel])
        for path in self._local_commits():
            rel = path.relative_to(self.root).as_posix()
            if rel not in self.pulled:  # committed here only (a lost race): not committed
                with os_errors(path, "delete"):
                    path.unlink()

    def _pull_manifest(self, rel: str) -> tuple[bytes, str, bool]:
        """Write the bucket's manifest `rel` into the mirror; return it, its ETag and whether
        the mirror held other bytes (or none)."""
        found = self.bucket.get(rel)
        if found is None:  # deleted since the listing
            raise CommitConflictError(
                f"{self.bucket.url.url(rel)} was deleted while it was read; re-run."
            )
        data, etag = found
        path = safe_local(self.root, rel)
        with os_errors(path, "read"):
            same = path.is_file() and path.read_bytes() == data
        if not same:
            atomic_write_bytes(path, data)
        return data, etag, not same

    def _pull_series(self, rel: str, *, trusted: bool) -> None:
        series = safe_local(self.root, rel).parent
        for version in list_bar_versions(series):
            where = version.manifest
            changed: bool | None = not trusted
            if version.folder != series:  # a legacy series' manifest is the one just pulled
                changed = self._fetch_verified(
                    where, version.manifest_sha256, manifest=series / MANIFEST, trusted=False
                )
            if changed is None or self.lazy:  # damaged; or only manifests are wanted
                continue
            manifest = read_json(where)
            days = manifest.get("days")
            for day in days if isinstance(days, list) else []:
                if isinstance(day, dict) and "file" in day:
                    file = resolve_manifest_file(where, str(day["file"]))
                    sha256 = str(day.get("sha256"))
                    self._fetch_verified(file, sha256, manifest=where, trusted=not changed)

    def _pull_fxcache(self, rel: str, *, trusted: bool) -> None:
        from fxstore.fxcache import ShardEntry

        where = safe_local(self.root, rel)
        if self.lazy:
            return
        shards = read_json(where).get("shards")
        for data in shards if isinstance(shards, list) else []:
            entry = ShardEntry.from_json(data, where)
            file = resolve_manifest_file(where, entry.file)
            self._fetch_verified(file, entry.sha256, manifest=where, trusted=trusted)

    def fetch(self, path: Path, sha256: str, manifest: Path) -> None:
        """Download the file `path` that `manifest` lists unless the mirror holds the bytes
        of `sha256` (a lazy mirror's reader fetches only what it reads); a damaged or
        missing object is left out, with a warning."""
        self._fetch_verified(path, sha256, manifest=manifest, trusted=False)

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _fetch_verified(
        self, path: Path, sha256: str, *, manifest: Path, trusted: bool
    ) -> bool | None:
        """Download `path` unless the mirror holds the bytes of `sha256`; refuse other bytes.
        Return whether it was downloaded; None when the bucket's object is missing or holds
        other bytes (damaged): it is left out of the mirror, with a warning, so that what is
        intact can still be read (``fxstore verify --repair`` rebuilds or drops it).

        A downloaded file gets the modification time of `manifest`, as in the local store's
        rule (:func:`fxstore.store.matches_manifest`): while `manifest` is `trusted` (the
        mirror held its bytes already, so the file was checked against them before), a file
        not modified since is taken without hashing it again; a file changed since is hashed.
        """
        with os_errors(path, "read"):
            stamp = manifest.stat().st_mtime_ns
            if path.is_file():
                if trusted and path.stat().st_mtime_ns <= stamp:
                    return False
                if file_sha256(path) == sha256:  # its time is left: a later change shows
                    return False
        rel = self._rel(path)
        url, listed_by = self.bucket.url.url(rel), self.bucket.url.url(self._rel(manifest))
        if rel not in self.listing:
            self._left_out(path, f"{url} is missing, though {listed_by} lists it")
            return None
        try:
            with atomic_path(path) as tmp:
                self.bucket.download(rel, tmp)
                if file_sha256(tmp) != sha256:
                    raise _DamagedError
        except _DamagedError:
            why = "its bytes do not match the SHA-256 that"
            self._left_out(path, f"{url}: {why} {listed_by} records (changed or damaged)")
            return None
        os.utime(path, ns=(stamp, stamp))
        return True

    def _left_out(self, path: Path, why: str) -> None:
        """Leave the damaged object of `path` out of the mirror (no copy of other bytes is
        kept) and say so once."""
        rel = self._rel(path)
        with os_errors(path, "delete"):
            path.unlink(missing_ok=True)
        if rel not in self.damaged:
            warnings.warn(
                FxStoreWarning(
                    f"{why}; left out, the rest is read: `fxstore verify --repair` (with this "
                    "--store) rebuilds or drops it."
                ),
                stacklevel=2,
            )
        self.damaged[rel] = why

    def _pull_plain(self, rel: str, info: ObjectInfo) -> None:
        path = safe_local(self.root, rel)
        with os_errors(path, "read"):
            if path.is_file():
                stat = path.stat()
                if stat.st_size == info.size and stat.st_mtime_ns == info.mtime_ns:
                    return
        with atomic_path(path) as tmp:
            self.bucket.download(rel, tmp)
        os.utime(path, ns=(info.mtime_ns, info.mtime_ns))

    def _in_scope(self, parts: list[str]) -> bool:
        """Whether the store-relative path `parts` is in the areas (and symbols) worked on."""
        if parts[0] not in self.areas:
            return False
        if self.symbols is None or parts[0] not in _BY_SYMBOL:
            return True
        return len(parts) > 1 and parts[1] in self.symbols

    def _local_commits(self) -> list[Path]:
        """The mirror's commit manifests in the areas (and symbols) it works on."""
        found = [*self.root.glob(f"bars/*/*/*/{MANIFEST}")] if "bars" in self.areas else []
        found += [*self.root.glob(f"fxcache/*/*/{MANIFEST}")] if "fxcache" in self.areas else []
        return sorted(
            p
            for p in found
            if p.is_file()
            and not is_fxcache_stage(p.parent)
            and self._in_scope(self._rel(p).split("/"))
        )

    # --- push ---------------------------------------------------------------------------

    def push(self, *, commits: bool = True) -> int:
        """Upload what the command committed in the mirror; return the objects written.

        Raises
        ------
        CommitConflictError
            Another writer committed the same manifest since the pull, or wrote other bytes
            under one of this commit's names: nothing of this commit is visible.
        """
        self.listing = self.bucket.list()
        written = 0
        for path in self._local_commits() if commits else []:
            rel = self._rel(path)
            with os_errors(path, "read"):
                data = path.read_bytes()
            before = self.pulled.get(rel)
            if before is not None and before[0] == data:
                written += self._restore_missing(path)
                continue
            copies: dict[str, str] = {}
            if rel.startswith("bars/"):
                committed = _version_shas(before[0] if before else b"{}")
                files = self._series_files(path, committed)
                copies = self._committed_days(path.parent, committed)
            else:
                files = [(f, None) for f in self._shard_files(path)]
            for file, sha256 in files:
                if sha256 is None or not self._in_bucket_only(file, sha256):
                    written += self._put_immutable(file, copies=copies)
            etag = self.bucket.put(
                rel,
                data,
                if_none_match=before is None,
                if_match=None if before is None else before[1],
            )
            written += 1
            logger.info("committed %s", self.bucket.url.url(rel))
            if before is not None and rel.startswith("bars/"):
                self._delete_dropped(rel, before[0], data)
            self.pulled[rel] = (data, etag)
        for area in (a for a in _PLAIN if a in self.areas):
            for path in sorted((self.root / area).rglob("*")):
                if (
                    path.is_file()
                    and path.name != LOCK
                    and not _TEMP_RE.fullmatch(path.name)
                    and self._in_scope(self._rel(path).split("/"))
                ):
                    written += self._put_plain(path)
        return written

    def _series_files(
        self, manifest: Path, committed: set[tuple[int, str]]
    ) -> list[tuple[Path, str | None]]:
        """Every file of the versions of the series `manifest` commits that the bucket had not
        committed (`committed`: its (version, manifest SHA-256) pairs), with the SHA-256 its
        manifest records (None for a version's manifest): day files first, each version's
        manifest after its files."""
        files: list[tuple[Path, str | None]] = []
        series = manifest.parent
        for version in list_bar_versions(series):
            if (version.version, version.manifest_sha256) in committed:
                continue  # its files were all uploaded before the bucket committed it
            days = read_json(version.manifest).get("days")
            for day in days if isinstance(days, list) else []:
                if isinstance(day, dict) and "file" in day:
                    file = resolve_manifest_file(version.manifest, str(day["file"]))
                    files.append((file, str(day.get("sha256"))))
            if version.folder != series:
                files.append((version.manifest, None))
        return files

    def _in_bucket_only(self, path: Path, sha256: str) -> bool:
        """Whether the day file `path` is not in the mirror but its object is in the bucket
        with the bytes of `sha256` (put there by the tasks of a cluster that shares no folder
        with this machine: :mod:`fxstore.ingest.run.objects`).

        Raises
        ------
        CommitConflictError
            The bucket holds other bytes under its name.
        """
        rel = self._rel(path)
        with os_errors(path, "read"):
            if path.exists() or rel not in self.listing:
                return False
        if (self.bucket.stored_sha256(rel) or self.bucket.read_sha256(rel)) != sha256:
            raise CommitConflictError(
                f"{self.bucket.url.url(rel)} holds other bytes than the SHA-256 its version's "
                "manifest records (replaced or damaged since this run's tasks wrote it); "
                "nothing of this run was committed: re-run."
            )
        return True

    def _committed_days(self, series: Path, committed: set[tuple[int, str]]) -> dict[str, str]:
        """ETag (the MD5 of a one-part upload) → store-relative name of each day file of
        the versions of `series` the bucket committed (`committed`) that the bucket holds
        intact: what a new version's day of the same bytes is copied from, in the bucket."""
        found: dict[str, str] = {}
        for version in list_bar_versions(series):
            if (version.version, version.manifest_sha256) not in committed:
                continue
            with os_errors(version.manifest, "read"):
                if not version.manifest.is_file():
                    continue
            days = read_json(version.manifest).get("days")
            for day in days if isinstance(days, list) else []:
                if isinstance(day, dict) and "file" in day:
                    rel = self._rel(resolve_manifest_file(version.manifest, str(day["file"])))
                    info = self.listing.get(rel)
                    if info is not None and rel not in self.damaged:
                        found.setdefault(info.etag, rel)
        return found

    def _restore_missing(self, manifest: Path) -> int:
        """Upload the files the committed `manifest` lists that the bucket lacks (a damaged
        object deleted by ``verify --repair``) where the mirror holds their recorded bytes
        (rebuilt); return the objects written."""
        from fxstore.fxcache import ShardEntry

        listed: list[tuple[Path, object]] = []
        data = read_json(manifest)
        if self._rel(manifest).startswith("fxcache/"):
            shards = data.get("shards")
            for entry in shards if isinstance(shards, list) else []:
                shard = ShardEntry.from_json(entry, manifest)
                listed.append((resolve_manifest_file(manifest, shard.file), shard.sha256))
        else:
            for version in list_bar_versions(manifest.parent):
                if not version.manifest.is_file():
                    continue
                days = read_json(version.manifest).get("days")
                for day in days if isinstance(days, list) else []:
                    if isinstance(day, dict) and "file" in day:
                        file = resolve_manifest_file(version.manifest, str(day["file"]))
                        listed.append((file, day.get("sha256")))
        written = 0
        for path, sha256 in listed:
            if self._rel(path) in self.listing or not path.is_file():
                continue
            with os_errors(path, "read"):
                intact = file_sha256(path) == sha256
            if intact:
                written += self._put_immutable(path)
        return written

    def _shard_files(self, manifest: Path) -> list[Path]:
        from fxstore.fxcache import ShardEntry

        shards = read_json(manifest).get("shards")
        entries = (
            [ShardEntry.from_json(d, manifest) for d in shards or []]
            if isinstance(shards, list)
            else []
        )
        return [resolve_manifest_file(manifest, e.file) for e in entries]

    def put_once(self, path: Path) -> int:
        """Upload the file `path` of the mirror now unless the bucket holds its bytes (a file
        written once: a fetched file, a purchase record); return the objects written.

        Raises
        ------
        CommitConflictError
            The bucket holds other bytes under its name.
        """
        return self._put_immutable(path, written_by="another fetch")

    def _put_immutable(
        self,
        path: Path,
        written_by: str = "another writer's build of the same version",
        *,
        copies: dict[str, str] | None = None,
    ) -> int:
        """Upload `path` unless the bucket holds its bytes; never replace other bytes.

        When `copies` (ETag → store-relative name) names an object of the same bytes (a day
        a new version took from an earlier one), the bucket copies it server-side instead.
        """
        rel = self._rel(path)
        with os_errors(path, "read"):
            md5 = md5_hex(path)
        info = self.listing.get(rel)
        if info is None:
            try:
                source = (copies or {}).get(md5)
                if source is not None:
                    etag = self.bucket.copy(source, rel, source_etag=md5)
                    self.copied += 1
                else:
                    etag = self.bucket.put_file(rel, path, if_none_match=True)
                with os_errors(path, "read"):
                    self.listing[rel] = ObjectInfo(path.stat().st_size, etag, 0)
                return 1
            except CommitConflictError:  # written since the listing: by another writer
                info = self.bucket.head(rel)
        if info is not None and info.etag == md5:
            return 0
        raise CommitConflictError(
            f"{self.bucket.url.url(rel)} holds other bytes than {path} ({written_by}, "
            "running now or killed); nothing of this run was committed: "
            "re-run once that writer has committed (if none is running, delete that version's "
            "objects and re-run)."
        )

    def _put_plain(self, path: Path) -> int:
        rel = self._rel(path)
        info = self.listing.get(rel)
        with os_errors(path, "read"):
            stat = path.stat()
            if info is not None and info.size == stat.st_size and info.etag == md5_hex(path):
                return 0
        self.bucket.put_file(rel, path)
        return 1

    def _delete_dropped(self, rel: str, before: bytes, after: bytes) -> None:
        """Delete the objects of the versions the new series manifest dropped (gc)."""
        kept = {int(e["version"]) for e in json.loads(after).get("versions", [])}
        dropped = [
            int(e["version"])
            for e in json.loads(before).get("versions", [])
            if int(e["version"]) not in kept
        ]
        series = rel.rsplit("/", 1)[0]
        gone = [key for number in dropped for key in self.bucket.list(f"{series}/v{number:04d}")]
        if gone:
            self.bucket.delete(gone)


def _version_shas(series_manifest: bytes) -> set[tuple[int, str]]:
    """(version, manifest SHA-256) of each version a series manifest lists ({} when none)."""
    try:
        entries = json.loads(series_manifest).get("versions", [])
        return {(int(e["version"]), str(e["manifest_sha256"])) for e in entries}
    except (ValueError, TypeError, KeyError, AttributeError):
        return set()


def mirror_name(url: str, endpoint: str | None) -> str:
    """The mirror folder's name for the store `url` at `endpoint`: bucket + a short hash."""
    digest = hashlib.sha256(f"{endpoint or ''}|{url}".encode()).hexdigest()[:16]
    bucket = url.split("://", 1)[-1].split("/", 1)[0]
    return f"{bucket}-{digest}"
