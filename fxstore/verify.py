"""``fxstore verify``: the store checked against its manifests, and what is derivable rebuilt.

Every bar series and fxcache (of one symbol, or all) is read back: each file its manifest
lists must exist inside the store, have the recorded size (fxcache shards) and SHA-256; no
file that looks like data (``*.parquet``, ``*.arrow``) may sit unlisted beside them; no
temporary file of a killed write may be left; and a folder without its manifest is an
unfinished build. Each problem is one :class:`Problem`.

``repair`` fixes only what is safe and derivable: temporary files in series and cache folders
are removed under the folder's lock (a live writer is waited for), and an fxcache with a
missing or damaged shard is rebuilt by precompute from its bars when those are intact and are
the very bars it was built from (its key says so). Nothing that may be good data is deleted:
a damaged day file (its DBN inputs are not in the store), an unlisted file or an unfinished
build is reported with what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from fxstore.errors import FxStoreError, SymbolNotFoundError
from fxstore.fxcache import FxCacheManifest, read_manifest
from fxstore.remote import drop_object, in_bucket, location, object_problem, restore_object
from fxstore.store import (
    MANIFEST,
    BarVersion,
    bar_day_entries,
    bars_dir,
    file_sha256,
    is_fxcache_stage,
    key_lock,
    list_bar_series,
    list_bar_versions,
    list_fxcache_symbols,
    list_orphan_bar_folders,
    list_temps,
    manifest_path,
    read_json,
    resolve_manifest_file,
    runs_dir,
    validate_key,
)

__all__ = ["Problem", "VerifyReport", "verify_store"]

logger = logging.getLogger(__name__)

_REINGEST: Final = (
    "rebuild the series from its DBN files with `fxstore ingest ... --force` (the inputs are "
    "not in the store, so verify cannot)"
)
_FINISH_INGEST: Final = "re-run the same `fxstore ingest` to finish it"
_KEEP: Final = "left as it is (it may be good data): move it aside if it is not yours"


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing in the store that is not what its manifest says."""

    path: Path
    what: str
    """What is wrong."""
    action: str
    """What repair did, or what the user should do."""
    is_repaired: bool = False

    def format_line(self) -> str:
        """``<path>: <what>; <action>.`` (in an s3:// store, the object's URL for its path)."""
        return f"{location(self.path)}: {self.what}; {self.action}."


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :func:`verify_store` checked and found."""

    root: Path
    n_series: int
    n_caches: int
    n_files: int
    """Files hashed."""
    problems: tuple[Problem, ...]

    @property
    def n_left(self) -> int:
        """Problems not repaired."""
        return sum(not p.is_repaired for p in self.problems)

    def format_lines(self) -> list[str]:
        """One line per problem, then the summary."""
        caches = "fxcache" if self.n_caches == 1 else "fxcaches"
        files = "file" if self.n_files == 1 else "files"
        checked = (
            f"{self.n_series} bar series and {self.n_caches} {caches} ({self.n_files} {files}) "
            f"in {location(self.root)}"
        )
        if not self.problems:
            return [f"Verified {checked}: no problems."]
        repaired = len(self.problems) - self.n_left
        problems = "problem" if len(self.problems) == 1 else "problems"
        return [
            *(p.format_line() for p in self.problems),
            f"Verified {checked}: {len(self.problems)} {problems}, {repaired} repaired, "
            f"{self.n_left} left.",
        ]


@dataclass
class _Tally:
    problems: list[Problem]
    n_files: int = 0
    #: Files whose object in an s3:// store's bucket is damaged or missing → their SHA-256.
    bad_objects: dict[Path, object] = field(default_factory=dict)

    def add(self, path: Path, what: str, action: str) -> None:
        self.problems.append(Problem(path, what, action))


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _check_file(
    tally: _Tally, root: Path, path: Path, sha256: object, size: object, action: str
) -> bool:
    """Check one listed file; True when it is what the manifest recorded. In an s3:// store
    the object in the bucket is checked, never the local copy (:func:`object_problem`)."""
    if in_bucket(path):
        problem = object_problem(path, sha256, size)
        tally.n_files += 1
        if problem is not None:
            tally.add(path, problem, action)
            tally.bad_objects[path] = sha256
        return problem is None
    try:
        if not path.is_file():
            tally.add(path, "listed in its manifest but missing", action)
            return False
        if not _inside(path, root):
            tally.add(path, f"leads outside the store (to {path.resolve()})", action)
            return False
        actual = path.stat().st_size
        if isinstance(size, int) and actual != size:
            tally.add(path, f"is {actual} bytes, its manifest says {size}", action)
            return False
        tally.n_files += 1
        if file_sha256(path) != sha256:
            tally.add(path, "SHA-256 differs from its manifest's (damaged or replaced)", action)
            return False
    except (OSError, FxStoreError) as err:
        tally.add(path, f"cannot be read ({err})", "check its owner and mode (ls -l)")
        return False
    return True


def _check_listed(
    tally: _Tally,
    root: Path,
    manifest: Path,
    entries: Sequence[tuple[object, object, object]],
    pattern: str,
    action: str,
) -> bool:
    """Check `(file, sha256, size)` entries of `manifest` and unlisted `pattern` files."""
    ok, listed = True, set()
    for name, sha256, size in entries:
        try:
            path = resolve_manifest_file(manifest, str(name), allow_links=True)
        except FxStoreError as err:
            tally.add(manifest, str(err).split(": ", 1)[-1].rstrip("."), action)
            ok = False
            continue
        listed.add(path)
        ok &= _check_file(tally, root, path, sha256, size, action)
    for path in sorted(manifest.parent.glob(pattern)):
        if path not in listed:
            tally.add(path, "looks like data but its manifest does not list it", _KEEP)
    return ok


def _check_temps(tally: _Tally, folder: Path, *, repair: bool, has_lock: bool) -> None:
    temps = list_temps(folder)
    if temps and repair and has_lock:
        with key_lock(folder):  # waits for a live writer, then removes what a killed one left
            pass
        tally.problems += [
            Problem(t, "a temporary file of a killed write", "removed", is_repaired=True)
            for t in temps
            if not t.exists()
        ]
        temps = [t for t in temps if t.exists()]
    action = (
        "`fxstore verify --repair` removes it once no fxstore command writes there"
        if has_lock
        else "remove it when no fxstore command is running (`fxstore train --resume` of the "
        "run removes it too)"
    )
    for temp in temps:
        tally.add(temp, "a temporary file of a killed write (or of one in progress)", action)


def _bar_entries(data: dict[str, object]) -> list[tuple[object, object, object]]:
    days = data.get("days")
    return [
        (d["file"], d.get("sha256"), None)
        for d in (days if isinstance(days, list) else [])
        if isinstance(d, dict) and "file" in d
    ]


def _verify_series(tally: _Tally, root: Path, folder: Path, *, repair: bool) -> bool:
    """Check one bar series, every committed version of it; True when all are intact."""
    _check_temps(tally, folder, repair=repair, has_lock=True)
    try:
        versions = list_bar_versions(folder)
    except FxStoreError as err:
        tally.add(manifest_path(folder), f"cannot be read ({err})", _REINGEST)
        return False
    intact = True
    for version in versions:
        intact &= _verify_version(tally, root, folder, version, repair=repair)
    last = versions[-1].version if versions else 0
    for staged in sorted(folder.glob("v[0-9][0-9][0-9][0-9]*")):
        if staged.is_dir() and staged.name[1:].isdigit() and int(staged.name[1:]) > last:
            tally.add(staged, "an unfinished build (not committed)", _FINISH_INGEST)
    for orphan in list_orphan_bar_folders(folder):
        tally.add(orphan, "a version no manifest names (a killed gc)", "`fxstore gc` removes it")
    return intact


def _verify_version(
    tally: _Tally, root: Path, series: Path, version: BarVersion, *, repair: bool
) -> bool:
    """Check one committed version: its manifest is the one committed, its day files listed."""
    if version.folder != series:  # v0001/ ...; a series from before versions lies in place
        _check_temps(tally, version.folder, repair=repair, has_lock=True)
    try:
        data = read_json(version.manifest)
    except FxStoreError as err:
        tally.add(version.manifest, f"cannot be read ({err})", _REINGEST)
        return False
    committed = file_sha256(version.manifest) == version.manifest_sha256
    if not committed:
        tally.add(version.manifest, "is not the manifest its version committed", _REINGEST)
    if not isinstance(data.get("days"), list):
        tally.add(version.manifest, "field `days` is missing or not a list", _REINGEST)
        return False
    try:
        bar_day_entries(data, version.manifest)
    except FxStoreError as err:
        why = str(err).split(": ", 1)[-1].split("; the manifest", 1)[0]
        tally.add(version.manifest, why, _REINGEST)
        committed = False
    entries = _bar_entries(data)
    listed = _check_listed(tally, root, version.manifest, entries, "*.parquet", _REINGEST)
    return committed and listed


def _iter_unfinished(root: Path, symbol: str | None) -> Iterator[tuple[Path, str]]:
    """Series and cache folders without a manifest, and what to do about each."""
    sym = symbol or "*"
    for folder in sorted((root / "bars").glob(f"{sym}/*/*")):
        if folder.is_dir() and not (folder / MANIFEST).exists():
            yield folder, "re-run the same `fxstore ingest` to finish it"
    for folder in sorted((root / "fxcache").glob(f"{sym}/*")):
        if is_fxcache_stage(folder):
            yield folder, "the next `fxstore precompute` of it removes it (the cache is whole)"
        elif folder.is_dir() and not (folder / MANIFEST).exists():
            yield folder, "re-run the same `fxstore precompute` to finish it"


def _repair_cache(root: Path, cache: FxCacheManifest, intact: dict[Path, bool]) -> tuple[bool, str]:
    """Rebuild `cache` from its bars, when they are intact and the ones it was built from.

    Returns whether it was rebuilt, and what was done or why not.
    """
    from fxstore.config import FeatureConfig
    from fxstore.features.definitions import featureset_from_definition
    from fxstore.features.precompute import precompute

    source, definition = cache.data.get("source"), cache.data.get("featureset")
    if not isinstance(source, dict) or not isinstance(definition, dict):
        return False, "cannot rebuild it: its manifest does not say how it was made"
    try:
        ik, bk = str(source["instrument_key"]), str(source["bar_key"])
        featureset = featureset_from_definition(definition, str(cache.path))
        bars = bars_dir(root, cache.symbol, ik, bk)
    except (KeyError, TypeError, FxStoreError):
        return False, "cannot rebuild it: its manifest does not say how it was made"
    if not intact.get(bars, False):
        return False, f"cannot rebuild it: its bars {bars} are damaged or gone"
    current = [v for v in list_bar_versions(bars) if v.is_current]
    if not current:
        return False, f"cannot rebuild it: its bars {bars} are damaged or gone"
    bars_sha256 = file_sha256(current[0].manifest)
    key = featureset.hash(instrument_key=ik, bar_key=bk, bars_sha256=bars_sha256)
    if key != cache.key:
        return False, (
            f"cannot rebuild it: the bars in {bars} are not the ones it was built from; "
            "`fxstore precompute` builds a cache of the current bars"
        )
    shard_by = cache.data.get("shard_by")
    config = FeatureConfig(
        symbol=cache.symbol,
        instrument_key=ik,
        bar_key=bk,
        features=featureset,
        shard_by=shard_by if shard_by in ("month", "year", "day") else "month",
        force=True,
    )
    precompute(config, root)
    return True, "rebuilt by precompute from its bars"


def _verify_cache(
    tally: _Tally, root: Path, folder: Path, symbol: str, intact: dict[Path, bool], repair: bool
) -> None:
    _check_temps(tally, folder, repair=repair, has_lock=True)
    redo = "rebuild it with `fxstore precompute --force` (or `fxstore verify --repair`)"
    try:
        cache = read_manifest(folder, symbol)
    except FxStoreError as err:
        tally.add(manifest_path(folder), f"cannot be read ({err})", "re-run precompute --force")
        return
    entries = [(s.file, s.sha256, s.bytes) for s in cache.shards]
    before = len(tally.problems)
    if _check_listed(tally, root, cache.path, entries, "*.arrow", redo) or not repair:
        return
    for problem in tally.problems[before:]:  # the bucket's damaged objects make way
        if problem.action == redo and problem.path in tally.bad_objects:
            drop_object(problem.path)
    is_repaired, action = _repair_cache(root, cache, intact)
    tally.problems[before:] = [
        replace(p, action=action, is_repaired=is_repaired) if p.action == redo else p
        for p in tally.problems[before:]
    ]


def _known_symbols(root: Path) -> list[str]:
    """Symbols with bars or an fxcache."""
    return sorted({s for s, _, _ in list_bar_series(root)} | set(list_fxcache_symbols(root)))


def verify_store(root: Path, symbol: str | None = None, *, repair: bool = False) -> VerifyReport:
    """Check the store under `root` (only `symbol`'s series and caches when given).

    Parameters
    ----------
    root
        The store root.
    symbol
        A store symbol (e.g. "ES.FUT"); None: every symbol.
    repair
        Remove temporary files of killed writes and rebuild damaged fxcaches from their bars
        (see the module docstring); everything else is reported only.

    Returns
    -------
    VerifyReport
        What was checked, and every problem found (those repaired marked so).

    Raises
    ------
    StoreAccessError
        A repair could not write (read-only store, no permission).
    SymbolNotFoundError
        `symbol` has neither bars nor an fxcache.
    """
    if symbol is not None:
        validate_key(symbol, "symbol")
    tally = _Tally([])
    intact: dict[Path, bool] = {}
    series = list_bar_series(root, symbol)
    for sym, ik, bk in series:
        folder = bars_dir(root, sym, ik, bk)
        intact[folder] = _verify_series(tally, root, folder, repair=repair)
    caches = sorted(
        p
        for p in (root / "fxcache").glob(f"{symbol or '*'}/*/{MANIFEST}")
        if not is_fxcache_stage(p.parent)
    )
    if symbol is not None and not series and not caches:
        raise SymbolNotFoundError(
            f"No bars or fxcache for symbol {symbol!r} in {root}; known: "
            f"{', '.join(_known_symbols(root)) or 'none'}. Check the symbol (`fxstore ls`)."
        )
    for manifest in caches:
        folder = manifest.parent
        _verify_cache(tally, root, folder, folder.parent.name, intact, repair)
    for folder, action in _iter_unfinished(root, symbol):
        tally.add(folder, "an unfinished build (no manifest)", action)
    if symbol is None:
        for run in sorted(p for p in runs_dir(root).glob("*") if p.is_dir()):
            for folder in (run, *sorted(p for p in run.glob("fold*") if p.is_dir())):
                _check_temps(tally, folder, repair=repair, has_lock=False)
    if repair:  # a damaged object of an s3:// store, from the intact copy of its cache
        tally.problems = [
            replace(p, action="restored from the intact copy in the cache", is_repaired=True)
            if not p.is_repaired
            and p.path in tally.bad_objects
            and restore_object(p.path, tally.bad_objects[p.path])
            else p
            for p in tally.problems
        ]
    for problem in tally.problems:
        logger.info("%s", problem.format_line())
    return VerifyReport(root, len(series), len(caches), tally.n_files, tuple(tally.problems))
