"""The trainer's bookkeeping room: a run's folder and everything written about it.

Owns the run folder's layout and reading it back (:mod:`.folder`), ``status.json``, the
run lock and stop requests (:mod:`.status`), what a resume must find unchanged
(:mod:`.resume`), a fold's training state saved to and restored from its checkpoint
(:mod:`.fold_state`), folds run in parallel as Ray tasks or GPU workers
(:mod:`.fold_tasks`), the ``fxstore backtest`` run (:mod:`.backtest`), the store's runs for
``fxstore runs`` (:mod:`.catalog`), the equity plots (:mod:`.plots`) and a run's HTML
report (:mod:`.report`).

May import: every other room of the trainer, and ``fxstore.store``, ``fxstore.config``,
``fxstore.executor``, ``fxstore.gpus`` and ``fxstore.remote``; never :mod:`fxstore.train.loop`.
"""
