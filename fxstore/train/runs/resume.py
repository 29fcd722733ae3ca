"""What a training run depends on, recorded when it starts and checked before it resumes.

A run's ``config.json`` records its inputs: the fxstore version, the settings (and their
SHA-256), the SHA-256 of the built-in profile they came from, and the fxcache it reads (key
and manifest SHA-256). ``--resume`` continues only when every one is unchanged: a changed
cache would mix the old checkpoints and finished folds with new rows, a changed version or
setting would continue with other code or settings than the folds already done. A change is
refused with one line naming each input that changed, old and new value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from fxstore import __version__
from fxstore.config import TrainConfig
from fxstore.errors import InvalidInputError
from fxstore.store import file_sha256, fxcache_dir, manifest_path, os_errors
from fxstore.train.env.data import CachedMarket
from fxstore.train.profiles import config_from_json, profile_sha256

__all__ = ["ResumePlan", "check_resumed_cache", "config_sha256", "plan_resume", "run_inputs"]

logger = logging.getLogger(__name__)

#: Hex digits of a SHA-256 shown in a message.
_SHORT: Final = 12


def config_sha256(config: TrainConfig) -> str:
    """SHA-256 of the canonical JSON of `config` (key-sorted, compact)."""
    blob = json.dumps(config.to_json(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def run_inputs(config: TrainConfig, cache: CachedMarket) -> dict[str, object]:
    """The facts of ``config.json`` a resume checks (besides ``fxcache``, which names the cache)."""
    return {
        "fxstore_version": __version__,
        "config_sha256": config_sha256(config),
        "profile_sha256": profile_sha256(config.profile),
    }


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """A run found resumable: its settings, pinned to the cache it was trained on."""

    config: TrainConfig
    manifest_sha256: str
    """The fxcache manifest's SHA-256 the run recorded."""


def _short(value: object) -> str:
    return value[:_SHORT] if isinstance(value, str) else repr(value)


def _refused(run_id: str, changes: list[str]) -> InvalidInputError:
    return InvalidInputError(
        f"run {run_id!r} cannot resume: {'; '.join(changes)} since it started, and its "
        "checkpoints and finished folds were made with the old ones: start a new run without "
        "--resume (this run's folder is kept as it is)."
    )


def _cache_facts(record: Mapping[str, object], where: Path) -> tuple[str, str]:
    facts = record.get("fxcache")
    key = facts.get("key") if isinstance(facts, dict) else None
    sha = facts.get("manifest_sha256") if isinstance(facts, dict) else None
    if not isinstance(key, str) or not isinstance(sha, str):
        raise InvalidInputError(
            f"{where}: `fxcache` must hold the cache's `key` and `manifest_sha256`; the file is "
            "damaged or was edited, so the run cannot resume: start a new run without --resume."
        )
    return key, sha


def plan_resume(run_id: str, record: Mapping[str, object], where: Path, root: Path) -> ResumePlan:
    """Check that nothing run `run_id` depends on changed since it started.

    `record` is the run's ``config.json`` (read from `where`); `root` the store root.

    Raises
    ------
    InvalidInputError
        The fxstore version, the settings, the built-in profile or the fxcache (its manifest,
        or the cache itself gone) differ from what the run recorded (one line naming each
        change), or ``config.json`` lacks the cache's facts.
    """
    version = record.get("fxstore_version")
    if version != __version__:  # the settings may not even read the same: stop here
        raise _refused(run_id, [f"the fxstore version changed ({version} -> {__version__})"])
    config = config_from_json(record.get("config"), where=str(where))
    changes = []
    recorded = record.get("config_sha256")
    if isinstance(recorded, str) and recorded != (now := config_sha256(config)):
        changes.append(f"its settings in config.json changed ({_short(recorded)} -> {_short(now)})")
    recorded = record.get("profile_sha256")
    if isinstance(recorded, str) and recorded != (now_p := profile_sha256(config.profile)):
        changes.append(
            f"profile {config.profile!r} changed ({_short(recorded)} -> {_short(now_p)})"
        )
    key, sha = _cache_facts(record, where)
    manifest = manifest_path(fxcache_dir(root, config.symbol, key))
    with os_errors(manifest, "read"):
        present = manifest.is_file()
    if not present:
        changes.append(f"its fxcache {config.symbol}/{key} is no longer in {root / 'fxcache'}")
    elif (now_m := file_sha256(manifest)) != sha:
        changes.append(
            f"its fxcache {config.symbol}/{key} changed (manifest sha256 {_short(sha)} -> "
            f"{_short(now_m)})"
        )
    if changes:
        raise _refused(run_id, changes)
    return ResumePlan(dataclasses.replace(config, featureset=key), sha)


def check_resumed_cache(run_id: str, plan: ResumePlan, cache: CachedMarket) -> None:
    """Refuse when the cache opened is not the one checked (rebuilt in between)."""
    if cache.manifest_sha256 != plan.manifest_sha256:
        raise _refused(
            run_id,
            [
                f"its fxcache {plan.config.symbol}/{cache.key} changed (manifest sha256 "
                f"{_short(plan.manifest_sha256)} -> {_short(cache.manifest_sha256)})"
            ],
        )
