"""The trainer's agent room: the C51 dueling double-DQN and what it learns from.

Owns the agent (:mod:`.dqn`) and its update written once against an array module
(:mod:`.ops`), the learner step captured as one CUDA graph (:mod:`.learner`), the
prioritised replay and n-step accumulator (:mod:`.replay`), the greedy and banded
policies a trained agent trades (:mod:`.policy`), its checkpoint file format
(:mod:`.checkpoint`), and the sizes it is given: batch, replay and environments, checked
against the memory there is (:mod:`.memory`).

May import: the :mod:`~fxstore.train.gpu` and :mod:`~fxstore.train.env` rooms,
``fxstore.config``, ``fxstore.store`` and ``fxstore.errors``; never evaluation or runs.
"""
