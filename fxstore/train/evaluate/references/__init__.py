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

__all__ = [
    "REFERENCES",
    "Reference",
    "ReferenceInputs",
    "ReferencePositions",
    "absent_reason",
    "available",
    "feature_notes",
]

#: Name -> reference, in the order reports list them.
_ALL: Final[tuple[Reference, ...]] = (*BASELINE_REFERENCES, LINEAR, CEILING, ORACLE)
REFERENCES: Final[Mapping[str, Reference]] = {r.name: r for r in _ALL}


def available(
    policies: Sequence[str], has_planted: bool, feature_names: Sequence[str]
) -> tuple[str, ...]:
    """`policies` less those this market cannot have: the planted signal's on real data, one
    that reads a feature the cache's set lacks."""
    return tuple(p for p in policies if absent_reason(p, has_planted, feature_names) is None)


def absent_reason(policy: str, has_planted: bool, feature_names: Sequence[str]) -> str | None:
    """Why reference `policy` is absent from this market's reports (None when it is there).

    The planted signal's absence is explained by :func:`~fxstore.train.evaluate.results.
    reference_notes`; this names it only as "no planted signal"."""
    reference = REFERENCES[policy]
    if reference.needs_planted and not has_planted:
        return "no planted signal"
    if reference.needs_feature is not None and reference.needs_feature not in feature_names:
        return (
            f"the fxcache's feature set has no {reference.needs_feature!r} (add it to the set "
            "to trade it)"
        )
    return None


def feature_notes(policies: Sequence[str], feature_names: Sequence[str]) -> tuple[str, ...]:
    """One report line for each of `policies` left out for a feature the set lacks."""
    notes = []
    for policy in policies:
        reason = absent_reason(policy, True, feature_names)
        if reason is not None:
            notes.append(f"{policy}: absent: {reason}")
    return tuple(notes)
