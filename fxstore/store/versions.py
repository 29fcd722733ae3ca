"""Versions of a bar series (ArcticDB's versions are the model).

Each build writes its day files and manifest into a new version folder ``v<NNNN>`` beside the
current one and switches the series to it by rewriting the series manifest (the list of
committed versions, each with its manifest's SHA-256) in one atomic rename
(:func:`commit_bar_version`). Readers reach a version only through that list
(:func:`find_bar_version`, :func:`read_bar_manifest`, which checks the digest), so a killed
build leaves the previous version complete and readable; its folder is resumed by the next
build. A series of fxstore before versions (day files and their manifest directly in the
bar-key folder) reads as version 1 and is moved into ``v0001`` by the next commit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from fxstore.errors import InvalidInputError, SchemaError, SymbolNotFoundError
from fxstore.store.files import (
    MANIFEST,
    _json_object,
    atomic_write_bytes,
    atomic_write_json,
    file_sha256,
    manifest_field,
    manifest_path,
    os_errors,
    read_json,
    remove_stale_temps,
    resolve_manifest_file,
)

logger = logging.getLogger(__name__)

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
