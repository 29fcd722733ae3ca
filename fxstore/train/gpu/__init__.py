"""The trainer's GPU room: CUDA kernels and bindings, the only code that knows CUDA.

Owns the fused CuPy kernels of the update (:mod:`.update_kernels`), the replay
(:mod:`.replay_kernels`), the vectorised environment (:mod:`.env_kernels`) and the
ε-greedy action (:mod:`.act`); the capturable cuBLAS and cuBLASLt GEMMs (:mod:`.cublas`,
:mod:`.cublaslt`); pinned, device-mapped host memory for the fxcache's shards
(:mod:`.cuda_host`); the counter-based generator whose numpy and CUDA halves agree bit for
bit (:mod:`.rng`); and the one array-module switch, numpy or CuPy (:mod:`.xp`).

May import: ``fxstore.errors``, ``fxstore.rng`` and ``fxstore.config`` (types only); never
another room of the trainer. The kernel modules import CuPy when they load, so only code
that already holds CuPy arrays imports them; importing this package imports nothing.
"""
