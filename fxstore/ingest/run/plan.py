"""An ingest request resolved once: :class:`IngestPlan`.

:func:`plan_ingest` turns an :class:`~fxstore.config.IngestConfig` (what the user asked for)
into the facts every part of a run reads: which records to keep (the instrument selection,
parsed once at the boundary), the product root of a front-month run, the bar rule, and
where the series lives in the store. It runs once, at the top of
:func:`fxstore.ingest.ingest`; below it nothing parses an option string or derives the root
again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fxstore.config import BarConfig, IngestConfig, InstrumentSelection
from fxstore.market.contracts import root_of_parent
from fxstore.store import bars_dir

__all__ = ["IngestPlan", "plan_ingest"]


@dataclass(frozen=True, slots=True)
class IngestPlan:
    """What one ingest run builds, resolved and validated."""

    #: The request as given; its JSON is what manifests and day files record.
    config: IngestConfig
    #: Which records are kept: all, one instrument id, or the front month.
    selection: InstrumentSelection
    #: The product root whose outrights the front month is chosen from ("ES" of "ES.FUT");
    #: None in modes all and id=N.
    root: str | None

    @property
    def symbol(self) -> str:
        """The store key and Databento parent symbol ("ES.FUT")."""
        return self.config.symbol

    @property
    def bars(self) -> BarConfig:
        """The bar rule."""
        return self.config.bars

    @property
    def chunk_records(self) -> int:
        """Records per decoded chunk."""
        return self.config.chunk_records

    @property
    def workers(self) -> int:
        """Processes that build trading days in parallel."""
        return self.config.workers

    def out_dir(self, store_root: Path) -> Path:
        """The bar series' folder: ``bars/<symbol>/<instrument-key>/<bar-key>/``."""
        return bars_dir(store_root, self.symbol, self.selection.key, self.bars.key)


def plan_ingest(config: IngestConfig) -> IngestPlan:
    """Resolve `config` into a plan (find the product root of a front-month run).

    Raises
    ------
    InvalidInputError
        A front-month symbol that is not a parent symbol (``ROOT.FUT``).
    """
    selection = config.instrument_mode
    root = root_of_parent(config.symbol) if selection.mode == "front-month" else None
    return IngestPlan(config=config, selection=selection, root=root)
