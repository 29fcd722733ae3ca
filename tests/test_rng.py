"""SplitMix64 defined once: each backend (Python ints, array modules, numba) gives the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from fxstore.rng import GOLDEN, MASK, TO_UNIT, UNIT_SHIFT, mix64, mix64_array, to_unit_array
from fxstore.synth.rng import uniform_at
from fxstore.train.gpu.rng import CounterRng, counter_base, derive_key, uniform

pytestmark = pytest.mark.quick

KEYS = [0, 1, 0xDEADBEEF, MASK, 0x0123456789ABCDEF]


def test_mix64_of_golden_is_splitmix64s_first_output_for_seed_zero() -> None:
    assert mix64(GOLDEN) == 0xE220A8397B1DCDAF  # the reference implementation's (Vigna)


@pytest.mark.parametrize("key", KEYS)
def test_mix64_array_equals_mix64_on_python_ints(key: int) -> None:
    z = np.array([(key + k * GOLDEN) & MASK for k in range(64)], dtype=np.uint64)

    assert mix64_array(np, z).tolist() == [mix64(int(v)) for v in z]


@pytest.mark.parametrize("key", KEYS)
def test_synth_uniform_at_is_mix64_of_the_weyl_step(key: int) -> None:
    for index in (0, 1, 17, 1_000_003):
        expected = (mix64((key + (index + 1) * GOLDEN) & MASK) >> UNIT_SHIFT) * TO_UNIT

        assert uniform_at(np.uint64(key), index) == expected


@pytest.mark.parametrize(("key", "counter"), [(0, 0), (derive_key(7), 3), (MASK, 2**32 + 5)])
def test_train_uniform_is_mix64_of_the_counter_base_plus_weyl_step(key: int, counter: int) -> None:
    base = counter_base(key, counter)
    expected = [(mix64((base + i * GOLDEN) & MASK) >> UNIT_SHIFT) * TO_UNIT for i in range(50)]

    assert uniform(np, key, counter, 50).tolist() == expected


def test_to_unit_array_keeps_the_top_53_bits_exactly() -> None:
    z = np.array([0, MASK, 1 << 63], dtype=np.uint64)

    assert to_unit_array(np, z).tolist() == [0.0, 1.0 - 2.0**-53, 0.5]


def test_draws_are_pinned_for_fixed_keys() -> None:
    # Synthetic files and training runs are fingerprinted: these values must never change.
    assert derive_key(7) == 17824971123127853533
    assert derive_key(7, 1, 2) == 12733704797591452334
    assert uniform(np, 99, 3, 2).tolist() == [0.2596062359197363, 0.41683420123123216]
    assert uniform_at(np.uint64(0), 0) == 0.8833108082136426


def test_counter_rng_next_bases_are_the_bases_of_its_next_calls() -> None:
    """Agent.act's one-kernel path draws from next_bases(2): they must be the bases of the
    random and integers calls it stands for, and count as those calls."""
    drawn, fused = CounterRng(np, derive_key(3), 5), CounterRng(np, derive_key(3), 5)
    explore, pick = drawn.random(40), drawn.integers(0, 7, 40)
    bases = fused.next_bases(2)
    assert fused.counter == drawn.counter == 7
    again = [
        [(mix64((b + i * GOLDEN) & MASK) >> UNIT_SHIFT) * TO_UNIT for i in range(40)] for b in bases
    ]
    assert explore.tolist() == again[0]
    assert pick.tolist() == [min(int(u * 7), 6) for u in again[1]]
