"""The feature stage: bars → point-in-time float32 features and targets → the fxcache.

- :mod:`~fxstore.features.registry`: the feature kinds (formulas, parameters, warm-up).
- :mod:`~fxstore.features.definitions`: feature sets, their hash and TOML form.
- :mod:`~fxstore.features.kernels`: the numba/numpy kernels, O(n) per feature.
- :mod:`~fxstore.features.compute`: a feature set over a bar table (in memory).
- :mod:`~fxstore.features.precompute`: bar store → fxcache (``fxstore precompute``).
- :mod:`~fxstore.features.reader`: reading caches back (``fxstore.open``, ``ls``, ``info``).
- :mod:`~fxstore.features.versions`: bar series versions (``read_bars``, ``--versions``, ``gc``).

Importing this package imports nothing heavy; import the submodule you need.
"""
