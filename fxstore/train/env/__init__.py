"""The trainer's market room: the fxcache on the device and the trading environment.

Owns the loader (:mod:`.loader`: shards memory-mapped, pinned and device-mapped, copied to
device matrices), a symbol's cache opened as a :class:`~.market.Market`
(:mod:`.data`), the PnL accounting every policy is booked with, its costs and contract
facts (:mod:`.market`), and the parallel environments the agent learns in (:mod:`.vecenv`).

May import: the trainer's :mod:`~fxstore.train.gpu` room, ``fxstore.fxcache``,
``fxstore.market``, ``fxstore.store``, ``fxstore.config`` and ``fxstore.errors``.
"""
