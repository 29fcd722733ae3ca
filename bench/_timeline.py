"""Where the wall time of a parallel ingest goes (a diagnostic, see diag_ingest_timeline.py).

`timed_build_group` wraps the worker's build_group and records, per group, the process,
the wall-clock start and end and the input bytes into FXSTORE_TIMELINE_DIR (one small JSON
file per group).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from fxstore.ingest.run.day_builder import GroupResult, GroupTask, build_group


def timed_build_group(task: GroupTask) -> GroupResult:
    start = time.time()
    result = build_group(task)
    end = time.time()
    folder = Path(os.environ["FXSTORE_TIMELINE_DIR"])
    size = sum(p.stat().st_size for p in task.paths)
    days = len(result.days)
    entry = {"pid": os.getpid(), "start": start, "end": end, "days": days, "bytes": size}
    (folder / f"{os.getpid()}_{start:.6f}.json").write_text(json.dumps(entry))
    return result
