"""Training checkpoints: named numpy arrays plus JSON facts in one ``.npz``, never a pickle.

A checkpoint is written atomically (temporary name, fsync, rename), so a run killed while
saving keeps the previous one. Reading uses ``allow_pickle=False``: an object array in the
file is refused, so a checkpoint from elsewhere cannot run code.
"""

from __future__ import annotations

import json
import logging
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.errors import InvalidInputError
from fxstore.store import atomic_path, os_errors

__all__ = [
    "CHECKPOINT_FORMAT",
    "DAMAGED",
    "check_state",
    "load_checkpoint",
    "meta_value",
    "save_checkpoint",
]

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT: Final = "fxstore-checkpoint/1"
_META: Final = "__meta__"
#: What to do about a damaged checkpoint (the fold's earlier work is in it, nothing else).
DAMAGED: Final = "the checkpoint is damaged: move it aside to train this fold from its start"


def save_checkpoint(
    path: Path, arrays: Mapping[str, npt.NDArray[np.generic]], meta: Mapping[str, object]
) -> None:
    """Write `arrays` (host numpy arrays by name) and JSON-able `meta` to `path` atomically."""
    if _META in arrays:
        raise InvalidInputError(f"checkpoint array name {_META!r} is reserved.")
    blob = json.dumps({"format": CHECKPOINT_FORMAT, **meta}, sort_keys=True).encode()
    # Not np.ascontiguousarray: it turns a 0-d array into shape (1,).
    payload = {name: np.array(a, order="C", copy=True) for name, a in arrays.items()}
    payload[_META] = np.frombuffer(blob, dtype=np.uint8)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **payload)  # type: ignore[arg-type]
    logger.debug("wrote checkpoint %s (%d arrays)", path, len(arrays))


def load_checkpoint(path: Path) -> tuple[dict[str, npt.NDArray[np.generic]], dict[str, object]]:
    """Read a checkpoint written by :func:`save_checkpoint`: ``(arrays, meta)``.

    Raises
    ------
    InvalidInputError
        The file is missing, not a checkpoint, holds object arrays, or has another format.
    """
    if not path.is_file():
        raise InvalidInputError(f"{path}: no checkpoint there; start the run anew.")
    try:
        with os_errors(path, "read"), np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (ValueError, EOFError, zipfile.BadZipFile) as err:
        raise InvalidInputError(
            f"{path}: not a readable fxstore checkpoint ({err}); {DAMAGED}."
        ) from err
    blob = arrays.pop(_META, None)
    try:
        meta = json.loads(bytes(blob).decode()) if blob is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        meta = None
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        raise InvalidInputError(f"{path}: not an {CHECKPOINT_FORMAT} checkpoint; {DAMAGED}.")
    return arrays, meta


def meta_value(meta: Mapping[str, object], key: str, kind: type[float], path: Path) -> float:
    """`meta[key]` of the checkpoint at `path` as `kind` (int, float or bool).

    Raises
    ------
    InvalidInputError
        The key is missing or of another type (the message names the file and the key).
    """
    value = meta.get(key)
    number = int if kind is int else int | float
    ok = isinstance(value, bool) if kind is bool else isinstance(value, number)
    if key not in meta or not ok or (kind is not bool and isinstance(value, bool)):
        shown = "missing" if key not in meta else repr(value)
        raise InvalidInputError(
            f"{path}: checkpoint field `{key}` must be {_KINDS[kind]}, was {shown}; {DAMAGED}."
        )
    return kind(value)  # type: ignore[arg-type]


_KINDS: Final = {int: "a whole number", float: "a number", bool: "true or false"}


def check_state(
    what: str, state: Mapping[str, npt.NDArray[np.generic]], shapes: Mapping[str, tuple[int, ...]]
) -> None:
    """Raise InvalidInputError naming the first key of `shapes` missing or misshapen in `state`."""
    for key, shape in shapes.items():
        if key not in state:
            raise InvalidInputError(f"{what} has no {key!r}; it holds {sorted(state)}.")
        if tuple(np.shape(state[key])) != shape:
            raise InvalidInputError(
                f"{what} {key!r} must have shape {shape}, was {np.shape(state[key])}."
            )
