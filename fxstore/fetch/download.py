"""Buying and downloading a planned fetch: batch jobs (polled, resumed, checked) and streams.

Every file is checked against the sha256 Databento lists for it (batch) before its job
folder is renamed into ``raw/<DATASET>/<job-id>/``; a file that fails is moved to the
quarantine and downloaded once more, then the fetch stops with an error. The request →
job record is written the moment a job is bought, so a killed fetch resumes the same job
(the download continues where it stopped, with an HTTP Range request) instead of buying it
again.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from fxstore.errors import FxStoreError
from fxstore.fetch.api import DatabentoApiError
from fxstore.fetch.layout import (
    FetchedFile,
    commit_folder,
    job_dir,
    publish_folder,
    quarantine,
    read_job_cost,
    read_job_record,
    remove_tree,
    requests_dir,
    staging_dir,
    verify_folder,
    write_fetch_manifest,
    write_job_record,
)
from fxstore.remote import location
from fxstore.store import file_sha256, key_lock, os_errors, validate_key

if TYPE_CHECKING:
    from fxstore.fetch.api import Api
    from fxstore.fetch.plan import FetchPlan, PartPlan
    from fxstore.fetch.request import Part

__all__ = ["ChecksumError", "FetchResult", "FetchedPart", "fetch"]

logger = logging.getLogger(__name__)

#: Seconds between two looks at a batch job's state.
POLL_S: Final = 5.0
_SHA256_RE: Final = re.compile(r"sha256:([0-9a-f]{64})")


class ChecksumError(FxStoreError):
    """A downloaded file failed its sha256 check twice; both copies are quarantined."""


@dataclass(frozen=True, slots=True)
class FetchedPart:
    """One schema of a fetch, on disk and checked."""

    schema: str
    job_id: str
    folder: Path
    files: tuple[FetchedFile, ...]
    was_skipped: bool
    """It was complete already: nothing was downloaded."""

    @property
    def n_bytes(self) -> int:
        """Bytes of its files."""
        return sum(f.size for f in self.files)

    def to_json(self) -> dict[str, object]:
        """The part as JSON data."""
        return {
            "schema": self.schema,
            "job_id": self.job_id,
            "folder": location(self.folder),
            "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in self.files],
            "was_skipped": self.was_skipped,
        }


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What :func:`fetch` left in the store."""

    parts: tuple[FetchedPart, ...]
    cost_usd: float
    """What this fetch bought, per Databento's metadata.get_cost before buying."""

    def folder_of(self, schema: str) -> Path | None:
        """The folder holding schema `schema`, None when it was not fetched."""
        return next((p.folder for p in self.parts if p.schema == schema), None)


#: on_job(job_id, state, progress_percent): a batch job's state while it is prepared.
OnJob = Callable[[str, str, float | None], None]
#: on_file(job_id, filename, done, total): a file was downloaded and checked.
OnFile = Callable[[str, str, int, int], None]


def fetch(
    api: Api,
    plan: FetchPlan,
    *,
    poll_s: float = POLL_S,
    on_job: OnJob | None = None,
    on_file: OnFile | None = None,
) -> FetchResult:
    """Buy the new parts of `plan`, download every part not complete, check and commit it.

    Parameters
    ----------
    api
        The Databento calls.
    plan
        What :func:`~fxstore.fetch.plan_fetch` made (the user saw its cost).
    poll_s
        Seconds between two looks at a batch job that is being prepared.
    on_job, on_file
        Progress callbacks (see :data:`OnJob`, :data:`OnFile`).

    Raises
    ------
    DatabentoApiError
        A call failed (after retries), or a job expired or failed on Databento's side.
    ChecksumError
        A file failed its sha256 check twice.
    InvalidInputError
        The plan costs more than the request's `max_cost_usd` (nothing is bought).
    """
    plan.check_max_cost()
    root = plan.store_root
    done = []
    for item in plan.parts:
        folder = item.folder
        if item.status == "complete":
            files = verify_folder(folder) or ()
            done.append(FetchedPart(item.part.schema, folder.name, folder, files, True))
            continue
        if item.via == "stream":
            done.append(_stream(api, root, item))
        else:
            job_id = item.job_id or _submit(api, root, item.part, item.cost_usd)
            done.append(_download_job(api, root, item, job_id, poll_s, on_job, on_file))
    return FetchResult(tuple(done), plan.cost_usd)


def _submit(api: Api, root: Path, part: Part, cost_usd: float) -> str:
    """Buy `part` as a batch job, unless another fetch bought it meanwhile; its job id."""
    with key_lock(requests_dir(root, part.dataset)):
        bought = read_job_record(root, part.dataset, part.key)
        if bought is not None:
            return bought
        job = api.submit_job(part)
        job_id = validate_key(str(job.get("id", "")), "job id from batch.submit_job")
        write_job_record(root, part.dataset, part.key, job_id, part.to_json(), cost_usd)
    logger.info("bought %s of %s as batch job %s", part.schema, part.dataset, job_id)
    return job_id


def _wait_for_job(api: Api, job_id: str, poll_s: float, on_job: OnJob | None) -> None:
    while True:
        details = api.job_details(job_id)
        state = str(details.get("state", "unknown"))
        raw = details.get("progress")
        progress = float(raw) if isinstance(raw, int | float) else None
        if on_job is not None:
            on_job(job_id, state, progress)
        if state == "done":
            return
        if state == "expired":
            raise DatabentoApiError(
                f"batch job {job_id} has expired (Databento keeps a job's files 30 days); "
                "delete its record under raw/<DATASET>/.requests/ to buy it again."
            )
        if state not in ("received", "queued", "processing"):
            raise DatabentoApiError(
                f"batch job {job_id} is in state {state!r} on Databento's side; look at it in "
                "the portal's download center."
            )
        time.sleep(poll_s)


def _job_files(api: Api, job_id: str) -> list[tuple[str, int, str]]:
    """(name, size, sha256) of each file of the job, as batch.list_files gives them."""
    files = []
    for entry in api.list_files(job_id):
        name, size, digest = entry.get("filename"), entry.get("size"), entry.get("hash")
        found = _SHA256_RE.fullmatch(str(digest))
        if not isinstance(name, str) or not isinstance(size, int) or found is None:
            raise DatabentoApiError(
                f"batch.list_files of job {job_id} lists a file without a name, size or "
                f"sha256 hash ({_brief(entry)}); look at the job in the portal."
            )
        files.append((validate_key(name, "file name from batch.list_files"), size, found[1]))
    if not files:
        raise DatabentoApiError(f"batch job {job_id} lists no files; look at it in the portal.")
    return files


def _download_job(
    api: Api,
    root: Path,
    item: PartPlan,
    job_id: str,
    poll_s: float,
    on_job: OnJob | None,
    on_file: OnFile | None,
) -> FetchedPart:
    part = item.part
    final = job_dir(root, part.dataset, job_id)
    _wait_for_job(api, job_id, poll_s, on_job)
    listed = _job_files(api, job_id)
    staging = staging_dir(root, part.dataset)
    with key_lock(staging):
        staged = staging / job_id
        if final.exists() and verify_folder(final) is None:
            quarantine(final, root, part.dataset, job_id)  # damaged since: downloaded again
        files = []
        for index, (name, size, sha256) in enumerate(listed, start=1):
            files.append(_download_checked(api, root, part, job_id, staged, name, size, sha256))
            if on_file is not None:
                on_file(job_id, name, index, len(listed))
        cost = read_job_cost(root, part.dataset, part.key)
        facts = {"request": part.to_json(), "job_id": job_id, "via": "batch", "cost_usd": cost}
        write_fetch_manifest(staged, files, facts)
        commit_folder(staged, final)
    publish_folder(final)
    return FetchedPart(part.schema, job_id, final, tuple(files), False)


def _download_checked(
    api: Api, root: Path, part: Part, job_id: str, staged: Path, name: str, size: int, sha: str
) -> FetchedFile:
    """Download one listed file (resuming a partial one) and check it; retry once if bad."""
    path = staged / name
    bad: list[Path] = []
    for _attempt in range(2):
        with os_errors(path, "read"):
            too_big = path.is_file() and path.stat().st_size > size
        if too_big:
            bad.append(quarantine(path, root, part.dataset, job_id))
        api.download_file(job_id, staged.parent, name)
        got = file_sha256(path)
        if got == sha:
            return FetchedFile(name, size, sha)
        logger.warning("%s of job %s failed its sha256 check", name, job_id)
        bad.append(quarantine(path, root, part.dataset, job_id))
    raise ChecksumError(
        f"{name} of batch job {job_id} failed its sha256 check twice (expected {sha[:12]}..., "
        f"got {got[:12]}...); both copies are in {bad[-1].parent}: run again later, or "
        "report the job to Databento support."
    )


def _stream(api: Api, root: Path, item: PartPlan) -> FetchedPart:
    """Stream `item` with timeseries.get_range into its own folder (bought again if a
    killed stream left a partial one)."""
    part = item.part
    folder_id = item.job_id or f"stream-{part.key}"
    staging = staging_dir(root, part.dataset)
    name = (
        f"{part.dataset.lower().replace('.', '-')}-{part.start:%Y%m%d}-{part.end:%Y%m%d}."
        f"{part.schema}.dbn.zst"
    )
    with key_lock(staging):
        staged = staging / folder_id
        if staged.exists():
            remove_tree(staged)
        with os_errors(staged, "create"):
            staged.mkdir(parents=True)
        api.get_range(part, staged / name)
        write_job_record(root, part.dataset, part.key, folder_id, part.to_json(), item.cost_usd)
        path = staged / name
        with os_errors(path, "read"):
            size = path.stat().st_size
        files = (FetchedFile(name, size, file_sha256(path)),)
        facts = {"request": part.to_json(), "job_id": folder_id, "via": "stream"}
        write_fetch_manifest(staged, files, {**facts, "cost_usd": item.cost_usd})
        final = job_dir(root, part.dataset, folder_id)
        if final.exists():
            quarantine(final, root, part.dataset, folder_id)
        commit_folder(staged, final)
    publish_folder(final)
    return FetchedPart(part.schema, folder_id, final, files, False)


def _brief(entry: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={entry.get(k)!r}" for k in ("filename", "size", "hash"))
