"""Run one stage in this process and SIGKILL it at a chosen rename (``python -m``, by the tests).

    python -m tests.faults._killer NAME N ingest MARKET ROOT
    python -m tests.faults._killer NAME N precompute ROOT
    python -m tests.faults._killer NAME N train ROOT

The process kills itself (kill -9, no cleanup of any kind) just before the N-th ``os.replace``
whose destination's name contains NAME: the temporary file is complete and not yet renamed,
as when the machine dies in the middle of an atomic write. N = 0 never kills.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from fxstore.config import FeatureConfig
from tests.faults.conftest import INGEST
from tests.train._tiny import TINY


def _kill_at(name: str, n: int) -> None:
    real = os.replace
    seen = 0

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        nonlocal seen
        if name in Path(dst).name:
            seen += 1
            if seen == n:
                os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)

    os.replace = replace  # type: ignore[assignment]


def main(argv: list[str]) -> None:
    name, n, stage, *args = argv
    _kill_at(name, int(n))
    if stage == "ingest":
        from fxstore.ingest.run.pipeline import ingest

        ingest(INGEST, [Path(args[0])], Path(args[1]))
    elif stage == "precompute":
        from fxstore.features.precompute import precompute

        precompute(FeatureConfig(), Path(args[0]))
    else:
        from fxstore.train.loop import train

        train(TINY, Path(args[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
