"""Training from the fxcache: the loader (shards -> mapped, pinned -> device matrices).

Importing this package never imports CuPy; only a view opened on a GPU does.
"""

from __future__ import annotations

from fxstore.train.env.loader import FxCacheView, ShardView, open_fxcache

__all__ = ["FxCacheView", "ShardView", "open_fxcache"]
