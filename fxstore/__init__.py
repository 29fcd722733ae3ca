"""fxstore: Databento MBP-10 order books → imbalance bars → GPU-ready features → a trading agent.

Importing fxstore never imports CuPy; the GPU is only touched by ``fxstore.train``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from fxstore.errors import (
    FxStoreError,
    FxStoreWarning,
    InvalidInputError,
    NoFrontMonthError,
    SchemaError,
    SymbolNotFoundError,
)

try:
    __version__ = version("fxstore")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "FxStoreError",
    "FxStoreWarning",
    "InvalidInputError",
    "NoFrontMonthError",
    "SchemaError",
    "SymbolNotFoundError",
    "__version__",
]
