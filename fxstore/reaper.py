"""Take a local Ray instance's agents down with the driver that started it, however it ends.

Ray ties the processes it starts for ``ray.init()`` on this machine (GCS, raylet, workers)
to the driver: the kernel kills them when the driver dies, even by ``kill -9``. The raylet's
two agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) are not tied that way: they
notice the raylet gone within a second, then spend a minute trying to report it to the dead
GCS before they exit. :func:`start_reaper` starts this module as a small process of its own
(its own session, so a Ctrl-C to the command does not reach it) reading a pipe from the
driver; when the pipe closes, which the kernel does whenever the driver ends, it kills
every process of this user whose environment says ``RAY_NODE_ID=<the instance's node>``
(only the agents carry it). Linux only: it reads ``/proc``; elsewhere nothing is started.

Run as ``python -m fxstore.reaper NODE_ID`` (stdlib only, so it starts in milliseconds).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

__all__ = ["node_processes", "start_reaper"]

_NODE_ID_RE: Final = re.compile(r"[0-9a-f]{8,}")


def node_processes(node_id: str, proc: Path = Path("/proc")) -> list[int]:
    """PIDs of this user's processes whose environment holds ``RAY_NODE_ID=node_id``."""
    marker = f"RAY_NODE_ID={node_id}".encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def start_reaper(node_id: str) -> subprocess.Popen[bytes] | None:
    """Start the reaper of the local Ray node `node_id`; the driver keeps the returned
    process (its stdin is the pipe) open for its life and may close it to reap now.
    None where the reaper cannot work (not Linux)."""
    if not sys.platform.startswith("linux") or not _NODE_ID_RE.fullmatch(node_id):
        return None
    return subprocess.Popen(
        [sys.executable, "-m", "fxstore.reaper", node_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _main(node_id: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):  # EOF: the driver has ended
        pass
    for pid in node_processes(node_id):
        with contextlib.suppress(OSError):  # already gone
            os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    _main(sys.argv[1])
