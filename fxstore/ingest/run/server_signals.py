"""Imported first by the ingest pool's server (:func:`fxstore.ingest.run.pool.worker_context`):
Ctrl-C reaches every process of the terminal, and the parent alone decides what to do about
it (it stops the pool). The server ignores it from here on, so its own imports and warm-up
(:mod:`fxstore.ingest.run.warm`) are not cut short with a traceback; the processes it forks
inherit that. Import it nowhere else.
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
