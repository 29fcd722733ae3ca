"""Pruning fxcaches (``fxstore gc --caches``): the caches nothing needs any more.

A cache is kept while a run read it (the ``fxcache`` of its ``config.json``: its report and
``--resume`` read the cache again) or while it is built from the current version of its
bars (what ``train`` and ``backtest`` take by default). Every other cache, built from bars
since replaced and read by no run, is listed, and deleted with ``--delete``.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from fxstore.errors import FxStoreError, SymbolNotFoundError
from fxstore.fxcache import current_source_version
from fxstore.store import (
    fxcache_dir,
    key_lock,
    list_fxcache_keys,
    list_fxcache_symbols,
    list_runs,
    manifest_path,
    os_errors,
    read_json,
    run_dir,
)

__all__ = ["CacheGcEntry", "CacheGcReport", "gc_caches"]

_RUN_RECORD = "config.json"


@dataclass(frozen=True, slots=True)
class CacheGcEntry:
    """An fxcache gc deletes (or would), or one it keeps, and why."""

    folder: Path
    n_bytes: int
    why: str


@dataclass(frozen=True, slots=True)
class CacheGcReport:
    """What ``fxstore gc --caches`` deleted, or would delete in a dry run."""

    root: Path
    dry_run: bool
    deleted: tuple[CacheGcEntry, ...]
    kept: tuple[CacheGcEntry, ...]

    def format_text(self) -> str:
        """One line per cache deleted (or to delete) and kept, then the total."""
        verb = "would delete" if self.dry_run else "deleted"
        lines = [f"{verb} {e.folder} ({e.n_bytes:,} bytes): {e.why}" for e in self.deleted]
        lines += [f"kept {e.folder}: {e.why}" for e in self.kept]
        total = sum(e.n_bytes for e in self.deleted)
        n = len(self.deleted)
        lines.append(f"{verb.capitalize()} {n} fxcache{'' if n == 1 else 's'}, {total:,} bytes.")
        if self.dry_run and self.deleted:
            lines.append("Nothing was deleted: re-run with --delete to delete them.")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """The report as JSON data."""
        return {
            "root": str(self.root),
            "dry_run": self.dry_run,
            "deleted": [asdict(e) | {"folder": str(e.folder)} for e in self.deleted],
            "kept": [asdict(e) | {"folder": str(e.folder)} for e in self.kept],
        }


def _runs_by_cache(root: Path) -> dict[tuple[str, str], list[str]]:
    """(symbol, cache key) -> ids of the runs that read it. A run whose record cannot be
    read pins nothing it could name; its cache is kept only for the other reasons."""
    found: dict[tuple[str, str], list[str]] = {}
    for run_id in list_runs(root, _RUN_RECORD):
        try:
            facts = read_json(run_dir(root, run_id) / _RUN_RECORD).get("fxcache")
        except FxStoreError:
            continue
        if isinstance(facts, dict):
            found.setdefault((str(facts.get("symbol")), str(facts.get("key"))), []).append(run_id)
    return found


def _why_kept(root: Path, symbol: str, key: str, runs: list[str]) -> str | None:
    try:
        source = read_json(manifest_path(fxcache_dir(root, symbol, key))).get("source")
    except FxStoreError:
        return "its manifest cannot be read (`fxstore verify` says why)"
    if not isinstance(source, dict):
        return "its manifest names no bars it was built from"
    version = current_source_version(root, symbol, key)
    if version is not None:
        return f"built from the current bars, v{version:04d}"
    if runs:
        more = f" and {len(runs) - 1} more" if len(runs) > 1 else ""
        return f"run {runs[-1]}{more} read it (delete the run to free it)"
    return None


def _n_bytes(folder: Path) -> int:
    with os_errors(folder, "read"):
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _delete(folder: Path) -> None:
    """The manifest first (the cache is no longer complete, so no reader takes it), then
    the shards and the folder."""
    with os_errors(folder, "delete"):
        manifest_path(folder).unlink(missing_ok=True)
        shutil.rmtree(folder)


def gc_caches(root: Path, *, symbol: str | None = None, dry_run: bool = True) -> CacheGcReport:
    """Delete the fxcaches (of `symbol`, or of every symbol) that no run read and that are
    not built from the current version of their bars.

    With `dry_run` (the default) nothing is deleted: the report lists what would be.

    Raises
    ------
    SymbolNotFoundError
        `symbol` has no fxcache.
    """
    symbols = list_fxcache_symbols(root)
    if symbol is not None:
        if symbol not in symbols:
            known = ", ".join(symbols) or "none"
            raise SymbolNotFoundError(
                f"No fxcache for symbol {symbol!r} in {root}; known: {known}."
            )
        symbols = [symbol]
    runs = _runs_by_cache(root)
    deleted, kept = [], []
    for name in symbols:
        for key in sorted(list_fxcache_keys(root, name)):
            folder = fxcache_dir(root, name, key)
            why = _why_kept(root, name, key, runs.get((name, key), []))
            if why is not None:
                kept.append(CacheGcEntry(folder, 0, why))
                continue
            entry = CacheGcEntry(folder, _n_bytes(folder), "built from older bars; no run read it")
            if not dry_run:
                with key_lock(folder):  # no precompute writes it while it goes
                    _delete(folder)
            deleted.append(entry)
    return CacheGcReport(root, dry_run, tuple(deleted), tuple(kept))
