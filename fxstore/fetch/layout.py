"""Where fetched files live in the store, and how a finished download is recorded.

::

    <root>/raw/<DATASET>/<job-id>/            one finished batch job (or stream): DBN files,
                                              Databento's own side files, fxstore-fetch.json
    <root>/raw/<DATASET>/.partial/<job-id>/   a download in progress (resumed from here)
    <root>/raw/<DATASET>/.quarantine/<job-id>/ files that failed their sha256 check
    <root>/raw/<DATASET>/.requests/<key>.json which job a request bought (so it is never
                                              bought twice)

Only a folder whose every file passed its check is renamed to ``raw/<DATASET>/<job-id>/``,
in one rename, so `fxstore ingest` never sees part of a download. The hidden folders are not
read by ingest (it lists the files of the folder it is given, not its subfolders).

In an s3:// store (worked on through a local mirror, :mod:`fxstore.remote`) a purchase record
is written into the bucket the moment it is written here, and a finished folder's files right
after its rename, its ``fxstore-fetch.json`` last, each never replacing an object: so a fetch
from another machine (another cache) finds what was bought, and a folder whose manifest is in
the bucket has all its files there. The mirror holds the records and manifests; a folder's
data files are checked in the bucket (:func:`verify_folder`) and downloaded where read.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from fxstore import __version__
from fxstore.errors import InvalidInputError, SchemaError
from fxstore.remote import in_store, upload
from fxstore.store import (
    atomic_write_json,
    fsync_dir,
    manifest_field,
    matches_manifest,
    os_errors,
    read_json,
    validate_key,
)

__all__ = [
    "FETCH_FORMAT",
    "FETCH_MANIFEST",
    "FetchedFile",
    "commit_folder",
    "job_dir",
    "publish_folder",
    "quarantine",
    "raw_dir",
    "read_job_cost",
    "read_job_record",
    "remove_tree",
    "requests_dir",
    "staging_dir",
    "verify_folder",
    "write_fetch_manifest",
    "write_job_record",
]

logger = logging.getLogger(__name__)

FETCH_MANIFEST: Final = "fxstore-fetch.json"
FETCH_FORMAT: Final = "fxstore-fetch/1"


@dataclass(frozen=True, slots=True)
class FetchedFile:
    """One file of a finished download: its name in the job folder, bytes and sha256."""

    name: str
    size: int
    sha256: str


def raw_dir(root: Path, dataset: str) -> Path:
    """``<root>/raw/<DATASET>``: the downloads of one Databento dataset."""
    return root / "raw" / validate_key(dataset, "dataset")


def job_dir(root: Path, dataset: str, job_id: str) -> Path:
    """``<root>/raw/<DATASET>/<job-id>``: one finished download, the folder ingest reads."""
    return raw_dir(root, dataset) / validate_key(job_id, "job id")


def staging_dir(root: Path, dataset: str) -> Path:
    """``<root>/raw/<DATASET>/.partial``: downloads in progress, one subfolder per job."""
    return raw_dir(root, dataset) / ".partial"


def requests_dir(root: Path, dataset: str) -> Path:
    """``<root>/raw/<DATASET>/.requests``: which job each request bought."""
    return raw_dir(root, dataset) / ".requests"


def _record_path(root: Path, dataset: str, key: str) -> Path:
    return requests_dir(root, dataset) / f"{validate_key(key, 'request key')}.json"


def read_job_record(root: Path, dataset: str, key: str) -> str | None:
    """The job id that request `key` bought, or None when it was never bought here."""
    path = _record_path(root, dataset, key)
    if not path.is_file():
        return None
    return validate_key(manifest_field(read_json(path), "job_id", str, path), "job id")


def write_job_record(
    root: Path, dataset: str, key: str, job_id: str, request: Mapping[str, object], cost_usd: float
) -> None:
    """Record that request `key` bought `job_id` for `cost_usd` (metadata.get_cost's price),
    written before anything is downloaded."""
    record = {
        "job_id": job_id,
        "request": dict(request),
        "cost_usd": cost_usd,
        "submitted_at": _now(),
    }
    path = _record_path(root, dataset, key)
    atomic_write_json(path, record)
    upload(path)


def read_job_cost(root: Path, dataset: str, key: str) -> float | None:
    """What request `key` cost when it was bought (None when not recorded)."""
    path = _record_path(root, dataset, key)
    cost = read_json(path).get("cost_usd") if path.is_file() else None
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None


def write_fetch_manifest(
    folder: Path, files: Sequence[FetchedFile], facts: Mapping[str, object]
) -> None:
    """Write ``fxstore-fetch.json`` into `folder`: the files with their checksums and `facts`
    (the request, job id, cost); never a credential."""
    atomic_write_json(
        folder / FETCH_MANIFEST,
        {
            "format": FETCH_FORMAT,
            **facts,
            "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in files],
            "fetched_at": _now(),
            "fxstore_version": __version__,
        },
    )


def verify_folder(folder: Path) -> tuple[FetchedFile, ...] | None:
    """The files of the finished download `folder` when every one is intact, else None.

    A file not modified since the manifest was written is taken as it is; one changed since
    is hashed again (:func:`fxstore.store.matches_manifest`). In an s3:// store a file not
    here is taken from the bucket's listing (an object of its size: the bucket got it after
    its check, before the manifest). A damaged manifest makes the folder damaged too (None):
    fetch downloads it again, as it does a damaged file.
    """
    manifest = folder / FETCH_MANIFEST
    if not manifest.is_file():
        return None
    try:
        listed = _manifest_files(manifest)
    except (InvalidInputError, SchemaError) as err:
        logger.warning("%s is damaged: %s", manifest, err)
        return None
    files = []
    for file in listed:
        path = folder / file.name
        if not path.exists() and in_store(path, file.size):
            files.append(file)
            continue
        if not matches_manifest(path, manifest, file.sha256, file.size):
            logger.info("%s: %s is missing or changed", folder, file.name)
            return None
        files.append(file)
    return tuple(files)


def _manifest_files(manifest: Path) -> list[FetchedFile]:
    """The files `manifest` lists; InvalidInputError or SchemaError when it is damaged."""
    entries = read_json(manifest).get("files")
    if not isinstance(entries, list):
        raise SchemaError(f"{manifest}: field `files` must be a list.")
    files = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise SchemaError(f"{manifest}: a `files` entry is not an object.")
        name = validate_key(manifest_field(entry, "name", str, manifest), "file name")
        size = manifest_field(entry, "size", int, manifest)
        files.append(FetchedFile(name, size, manifest_field(entry, "sha256", str, manifest)))
    return files


def quarantine(path: Path, root: Path, dataset: str, job_id: str) -> Path:
    """Move `path` (a file or a folder) into the dataset's quarantine; return where it went."""
    folder = raw_dir(root, dataset) / ".quarantine" / validate_key(job_id, "job id")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = folder / f"{path.name}.{stamp}"
    with os_errors(folder, "move a damaged download into"):
        folder.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    logger.warning("moved %s to %s", path, target)
    return target


def commit_folder(staged: Path, final: Path) -> None:
    """Rename the verified download `staged` to `final` in one step (the folder ingest reads).

    A `final` folder already there (damaged: it failed :func:`verify_folder`) was moved to
    the quarantine by the caller; a leftover empty one is removed.
    """
    with os_errors(final, "move the finished download to"):
        if final.is_dir() and not any(final.iterdir()):
            final.rmdir()
        os.replace(staged, final)
    fsync_dir(final.parent)


def publish_folder(folder: Path) -> None:
    """Write the committed download `folder` into the bucket of an s3:// store (its files,
    then its ``fxstore-fetch.json``); nothing to do in a local store."""
    with os_errors(folder, "list"):
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.name != FETCH_MANIFEST)
    for path in [*files, folder / FETCH_MANIFEST]:
        upload(path)


def remove_tree(path: Path) -> None:
    """Delete the folder `path` and what it holds (a staged stream that is redone)."""
    with os_errors(path, "remove"):
        shutil.rmtree(path, ignore_errors=False)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
