"""Load the ingest kernels' compiled code once, in the process ingest workers fork from.

numba compiles (or loads from its disk cache) a kernel on its first call, in each process.
Importing this module runs every ingest kernel on a few records, so workers forked from
the pool's server start with all kernels in memory instead of each loading them again.
"""

from __future__ import annotations

import datetime as dt
import warnings
from typing import get_args

import numpy as np

from fxstore.config import BarConfig, BarType
from fxstore.errors import FxStoreWarning
from fxstore.ingest.bars.builder import build_bars
from fxstore.ingest.dbn.format import F_LAST, MBP10_DTYPE, RTYPE_MBP10
from fxstore.ingest.dbn.zstd import walk_frames
from fxstore.ingest.select.activity import count_by_instrument, take_records
from fxstore.market.calendar import session_bounds_ns

__all__ = ["warm_up"]


def warm_up() -> None:
    """Run each bar type, the activity counter and the zstd frame walk on tiny inputs."""
    day = dt.date(2024, 3, 5)
    open_ns, close_ns = session_bounds_ns(day)
    records = np.zeros(8, dtype=MBP10_DTYPE)
    records["length"], records["rtype"], records["instrument_id"] = 92, RTYPE_MBP10, 1
    records["ts_recv"] = open_ns + np.arange(8) * 1_000_000_000
    records["action"], records["side"], records["flags"] = b"T", b"B", F_LAST
    records["price"], records["size"] = 4_000_000_000_000, 1
    records["bid_px_00"], records["ask_px_00"] = 3_999_750_000_000, 4_000_000_000_000
    count_by_instrument(take_records(records, records["size"] > 0))
    walk_frames(np.zeros(0, np.uint8), 0, 0, np.zeros(4, np.int64))
    for bar_type in get_args(BarType):
        threshold = None if "imbalance" in bar_type else 2.0
        config = BarConfig(bar_type=bar_type, threshold=threshold, multiplier=50.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FxStoreWarning)
            build_bars(
                records,
                config,
                trading_day=day,
                contract="ESH4",
                session_open_ns=open_ns,
                session_close_ns=close_ns,
            )


warm_up()
