"""The trainer's evaluation room: how any policy is scored, and what it is held against.

Owns the walk-forward folds (:mod:`.walkforward`), the metrics of a book (:mod:`.metrics`),
the probabilistic and deflated Sharpe ratios (:mod:`.significance`), per-seed and
ensemble rows (:mod:`.seeds`), a fold's and a run's results and their table
(:mod:`.results`), and the references every agent is reported next to, one file each
behind one interface (:mod:`.references`: flat, long, random, ofi-sign, linear, oracle).

May import: the :mod:`~fxstore.train.gpu` and :mod:`~fxstore.train.env` rooms,
``fxstore.config``, ``fxstore.store`` and ``fxstore.errors``; never the agent or runs.
"""
