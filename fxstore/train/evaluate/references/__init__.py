"""The references every policy is reported next to, one file each behind one interface.

A reference is a :class:`Reference`: a name and ``positions(inputs)``, which returns the
contracts it holds over a fold's test window (and, for one fitted on the fold, over its
training part, for the in-sample Sharpe), or None when it cannot be made on this market
(the oracle without a planted signal). Every reference is booked with the same accounting,
costs and capital (:func:`fxstore.train.env.market.evaluate_positions`) by
:func:`fxstore.train.evaluate.results.baseline_results`, and fits only on the fold's
training rows and validation slice, never its test window.

- :mod:`.baselines`: ``flat``, ``long``, ``random``, ``ofi-sign``;
- :mod:`.linear`: a ridge forecast traded through a no-trade band;
- :mod:`.ceiling`: the planted signal's projection on the fold's features, traded as the
  oracle trades the signal: what these features could have traded;
- :mod:`.oracle`: the synthetic market's planted signal traded the same way.

A new reference is one module with one :class:`Reference`, added to :data:`REFERENCES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from fxstore.train.evaluate.references.base import Reference, ReferenceInputs, ReferencePositions
from fxstore.train.evaluate.references.baselines import BASELINE_REFERENCES
from fxstore.train.evaluate.references.ceiling import CEILING
from fxstore.train.evaluate.references.linear import LINEAR
from fxstore.train.evaluate.references.oracle import ORACLE

__all__ = ["REFERENCES", "Reference", "ReferenceInputs", "ReferencePositions", "available"]

#: Name -> reference, in the order reports list them.
_ALL: Final[tuple[Reference, ...]] = (*BASELINE_REFERENCES, LINEAR, CEILING, ORACLE)
REFERENCES: Final[Mapping[str, Reference]] = {r.name: r for r in _ALL}


def available(policies: Sequence[str], has_planted: bool) -> tuple[str, ...]:
    """`policies` less those this market cannot have (the planted signal's, on real data)."""
    return tuple(p for p in policies if has_planted or not REFERENCES[p].needs_planted)
