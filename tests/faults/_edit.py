"""Edits of committed manifests, as a damaged disk or a hand would make them."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

Edit = Callable[[dict[str, object]], None]


def edit_json(path: Path, edit: Edit) -> None:
    """Apply `edit` to the JSON object in `path`."""
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def edit_and_recommit(version_manifest: Path, edit: Edit) -> None:
    """Edit a bar version's manifest and record its new SHA-256 in the series' list of
    versions too: an edit that the commit record's digest cannot catch, so what the readers
    check of the manifest's own fields is what stands."""
    edit_json(version_manifest, edit)
    digest = hashlib.sha256(version_manifest.read_bytes()).hexdigest()
    number = int(version_manifest.parent.name[1:])

    def recommit(series: dict[str, object]) -> None:
        for entry in series["versions"]:  # type: ignore[attr-defined]
            if entry["version"] == number:
                entry["manifest_sha256"] = digest

    edit_json(version_manifest.parent.parent / "manifest.json", recommit)


def commit_edited_version(version_manifest: Path, edit: Edit) -> Path:
    """Commit a copy of a bar version, its manifest edited, as the series' next version (as
    a re-ingest of other inputs would); return the new version's manifest."""
    from fxstore.store import commit_bar_version, stage_bar_version

    series = version_manifest.parent.parent
    stage = stage_bar_version(series)
    for path in version_manifest.parent.iterdir():
        shutil.copy2(path, stage / path.name)
    edit_json(stage / "manifest.json", edit)
    commit_bar_version(series, stage)
    return stage / "manifest.json"
