"""Ingest on a cluster that shares no folder: tasks read inputs from, and write to, S3.

With ``--executor ray``, DBN inputs given as ``s3://`` URLs and an ``s3://`` store, no node
needs another's files:

- the driver plans from each input's first bytes (ranged GETs: the metadata header, its
  symbol mappings and first record; :func:`open_input_objects`), never the whole file
  (definition files among the inputs excepted: its plan reads them, :func:`download_definitions`);
- each task downloads its own group's objects into a scratch folder of its node (deleted
  when it ends), builds the days, and uploads each day's file into the store's bucket,
  under the parts folder of the version being built, which no manifest lists
  (:func:`build_group_in_task`); it sends back the same small results as in a local pool;
- the driver picks each day's file in trading-day order, as always, and copies the chosen
  one into place inside S3 (:class:`StagedParts`: no bytes pass through the driver), then
  writes the manifest; the store's push commits it once every object it lists holds the
  bytes it records. A failed task or run commits nothing: the parts and the day files it
  copied are deleted, and a version no manifest lists is no version.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fxstore.errors import FxStoreError
from fxstore.ingest.dbn.reader import DbnSource, open_dbn_heads
from fxstore.ingest.run.day_builder import GroupResult, GroupTask, ObjectIO, build_group
from fxstore.remote import InputObject
from fxstore.remote.s3 import CommitConflictError, S3Bucket, StoreUrl

__all__ = [
    "StagedParts",
    "build_group_in_task",
    "download_definitions",
    "object_path",
    "open_input_objects",
]


def object_path(item: InputObject) -> Path:
    """The path that names `item` among an ingest's inputs (its URL; never opened)."""
    return Path(item.url)


def open_input_objects(items: Sequence[InputObject]) -> DbnSource:
    """Open DBN input objects from their first bytes (ranged GETs), for planning.

    Raises
    ------
    StoreAccessError
        An object cannot be read.
    SchemaError
        As :func:`fxstore.ingest.dbn.reader.open_dbn`, for what the headers show.
    """
    by_path = {object_path(item): item for item in items}

    def read_head(path: Path, n_bytes: int) -> bytes:
        item = by_path[path]
        return _bucket_of(item).read_head(item.key, n_bytes)

    return open_dbn_heads({path: item.size for path, item in by_path.items()}, read_head)


def download_definitions(
    source: DbnSource, items: Sequence[InputObject], folder: Path
) -> list[Path]:
    """Download the definition files among the objects `source` opened into `folder` (the
    driver's plan reads their instruments; they are small); each keeps its object's time."""
    by_path = {object_path(item): item for item in items}
    paths = []
    for i, file in enumerate(source.definitions):
        item = by_path[file.path]
        dest = folder / str(i) / file.path.name
        dest.parent.mkdir(parents=True)
        _bucket_of(item).download(item.key, dest)
        os.utime(dest, ns=(item.mtime_ns, item.mtime_ns))
        paths.append(dest)
    return paths


def build_group_in_task(task: GroupTask) -> GroupResult:
    """Build one group in a task, its inputs downloaded from S3 and its day files uploaded
    to the store's bucket when ``task.objects`` says so (else :func:`build_group` as it is).

    The day files' paths in the result are those they would have in the driver's parts
    folder: the key of each is the store-relative path of it.
    """
    io = task.objects
    if io is None:
        return build_group(task)
    by_path = {object_path(item): item for item in io.inputs}
    with tempfile.TemporaryDirectory(prefix="fxstore-task-") as name:
        scratch = Path(name)
        local: dict[Path, Path] = {}
        for i, path in enumerate(task.paths):
            item = by_path.get(path)
            if item is not None:
                dest = scratch / "inputs" / str(i) / path.name
                dest.parent.mkdir(parents=True)
                _bucket_of(item).download(item.key, dest)
                local[path] = dest
        parts_dir = scratch / "parts" if io.store is not None else task.parts_dir
        run = dataclasses.replace(
            task,
            paths=tuple(local.get(p, p) for p in task.paths),
            parts_dir=parts_dir,
            objects=None,
        )
        try:
            result = build_group(run)
        except FxStoreError as err:  # name the objects, not this node's scratch copies
            raise _renamed(err, {str(v): by_path[k].url for k, v in local.items()}) from None
        if io.store is not None and task.parts_dir is not None:
            _upload_parts(result, io, io.store, task.parts_dir)
    return result


def _upload_parts(result: GroupResult, io: ObjectIO, store: StoreUrl, parts_dir: Path) -> None:
    """Upload the day files of `result` into the store's parts folder; name them as in the
    driver's `parts_dir`."""
    bucket = _bucket(store, io.endpoint)
    for day in result.days:
        if day.parts:
            for part in day.parts.values():
                bucket.put_file(f"{io.parts_rel}/{part.path.name}", part.path)
            day.parts = {
                key: dataclasses.replace(part, path=parts_dir / part.path.name)
                for key, part in day.parts.items()
            }


@functools.lru_cache(maxsize=16)
def _bucket(url: StoreUrl, endpoint: str | None) -> S3Bucket:
    """One S3 client per bucket and endpoint in a process: a Ray worker runs many tasks, and
    making a client takes ~0.2 s (boto3 loads its service model)."""
    return S3Bucket(url, endpoint)


def _bucket_of(item: InputObject) -> S3Bucket:
    """The bucket of the input object `item` (its keys are whole keys)."""
    return _bucket(StoreUrl(item.bucket, ""), item.endpoint)


def _renamed(err: FxStoreError, names: dict[str, str]) -> FxStoreError:
    """`err` with the scratch copies' paths in its message replaced by their URLs."""
    message = str(err)
    for local, url in names.items():
        message = message.replace(local, url)
    try:
        return type(err)(message)
    except TypeError:  # an error class that takes more than a message
        return err


class StagedParts:
    """The day files tasks put in the store's bucket, in the parts folder `parts_dir` of
    the version being built (in the mirror at `root`): the chosen one of each day is
    copied into place inside S3; :meth:`clean` deletes the parts folder."""

    def __init__(self, bucket: S3Bucket, root: Path, parts_dir: Path) -> None:
        self.bucket = bucket
        self.root = root.absolute()
        self.parts_rel = self._rel(parts_dir)
        #: The day files this run copied into place (store-relative).
        self.placed: list[str] = []

    def place(self, part: Path, path: Path, sha256: str) -> None:
        """Copy the part `part` to the day file `path` (inside S3); an object already there
        must hold the same bytes (the same build, killed before its commit).

        Raises
        ------
        CommitConflictError
            Another object is at `path`'s key (another writer's build of this version).
        """
        source, rel = self._rel(part), self._rel(path)
        try:
            self.bucket.copy(source, rel)
            self.placed.append(rel)
        except CommitConflictError:
            held = self.bucket.stored_sha256(rel) or self.bucket.read_sha256(rel)
            if held != sha256:
                raise CommitConflictError(
                    f"{self.bucket.url.url(rel)} holds other bytes than this build's (another "
                    "writer's build of the same version, running now or killed); nothing of "
                    "this run was committed: re-run once that writer has committed (if none "
                    "is running, delete that version's objects and re-run)."
                ) from None

    def discard(self) -> None:
        """Delete the day files this run copied into place (a failed build: not resumed)."""
        if self.placed:
            self.bucket.delete(self.placed)
            self.placed.clear()

    def clean(self) -> None:
        """Delete the parts folder's objects (this run's: its name is the run's own)."""
        found = sorted(self.bucket.list(self.parts_rel))
        if found:
            self.bucket.delete(found)

    def _rel(self, path: Path) -> str:
        return path.absolute().relative_to(self.root).as_posix()
