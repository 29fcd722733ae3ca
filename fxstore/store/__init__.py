"""Where things live: store root, validated keys, atomic writes, lock files and versions.

This package is the only code that knows the on-disk layout (DESIGN.md, "Store layout")::

    <root>/bars/<SYMBOL>/<instrument-key>/<bar-key>/manifest.json        the series: its versions
    <root>/bars/<SYMBOL>/<instrument-key>/<bar-key>/v<NNNN>/<YYYY-MM-DD>.parquet + manifest.json
    <root>/fxcache/<SYMBOL>/<featureset-hash>/<shard>.arrow             + manifest.json
    <root>/runs/<run-id>/[fold<NN>/]
    <root>/synth/<SYMBOL>/                                               built-in market (DBN)

It has three rooms, and every name is used from here (``from fxstore.store import ...``):

- :mod:`.files`: validated keys and paths, atomic writes, JSON manifests and their fields,
  checksums, lock files, and every OSError turned into one line naming the path;
- :mod:`.layout`: the folders of the layout above and their listings, and an fxcache built
  beside the one it replaces;
- :mod:`.versions`: the committed versions of a bar series, found, read (the manifest's
  digest checked), staged, committed and deleted.
"""

from __future__ import annotations

from fxstore.store.files import (
    DEFAULT_ROOT,
    LOCK,
    MANIFEST,
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_stream,
    bar_day_entries,
    file_lock,
    file_sha256,
    fsync_dir,
    key_lock,
    list_temps,
    manifest_field,
    manifest_path,
    matches_manifest,
    os_errors,
    read_json,
    remove_stale_temps,
    resolve_manifest_file,
    store_access_error,
    validate_key,
    validate_path,
)
from fxstore.store.layout import (
    bars_dir,
    bars_relpath,
    commit_fxcache,
    create_run_dir,
    discard_fxcache_stage,
    existing_run_dir,
    fold_dir,
    fxcache_dir,
    is_fxcache_stage,
    list_bar_series,
    list_fxcache_keys,
    list_fxcache_symbols,
    list_runs,
    run_dir,
    runs_dir,
    stage_fxcache,
    synth_dir,
)
from fxstore.store.versions import (
    SERIES_FORMAT,
    BarVersion,
    commit_bar_version,
    delete_bar_versions,
    discard_bar_stage,
    find_bar_version,
    list_bar_versions,
    list_orphan_bar_folders,
    read_bar_manifest,
    stage_bar_version,
)

__all__ = [
    "DEFAULT_ROOT",
    "LOCK",
    "MANIFEST",
    "SERIES_FORMAT",
    "BarVersion",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_stream",
    "bar_day_entries",
    "bars_dir",
    "bars_relpath",
    "commit_bar_version",
    "commit_fxcache",
    "create_run_dir",
    "delete_bar_versions",
    "discard_bar_stage",
    "discard_fxcache_stage",
    "existing_run_dir",
    "file_lock",
    "file_sha256",
    "find_bar_version",
    "fold_dir",
    "fsync_dir",
    "fxcache_dir",
    "is_fxcache_stage",
    "key_lock",
    "list_bar_series",
    "list_bar_versions",
    "list_fxcache_keys",
    "list_fxcache_symbols",
    "list_orphan_bar_folders",
    "list_runs",
    "list_temps",
    "manifest_field",
    "manifest_path",
    "matches_manifest",
    "os_errors",
    "read_bar_manifest",
    "read_json",
    "remove_stale_temps",
    "resolve_manifest_file",
    "run_dir",
    "runs_dir",
    "stage_bar_version",
    "stage_fxcache",
    "store_access_error",
    "synth_dir",
    "validate_key",
    "validate_path",
]
