"""The counter-based random numbers: pure functions of (key, index)."""

from __future__ import annotations

import numpy as np
import pytest

from fxstore.synth.rng import geometric, normal_at, stream_keys, uniform_at

pytestmark = pytest.mark.quick

KEY = np.uint64(0xDEADBEEF)


def test_uniform_at_same_key_index_same_value() -> None:
    assert uniform_at(KEY, 17) == uniform_at(KEY, 17)
    assert uniform_at(KEY, 17) != uniform_at(KEY, 18)
    assert uniform_at(KEY, 17) != uniform_at(np.uint64(KEY + 1), 17)


def test_uniform_at_many_draws_uniform_on_unit_interval() -> None:
    u = np.array([uniform_at(KEY, i) for i in range(20_000)])
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005


def test_normal_at_many_draws_standard_normal() -> None:
    z = np.array([normal_at(KEY, i) for i in range(20_000)])
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1.0) < 0.03


def test_geometric_mean_matches_parameter() -> None:
    g = np.array([geometric(uniform_at(KEY, i), 3.0) for i in range(20_000)])
    assert g.min() == 1 and abs(g.mean() - 3.0) < 0.1
    assert geometric(0.99, 1.0) == 1


def test_stream_keys_depend_on_every_entropy_word() -> None:
    a, b, c = stream_keys(7, 1, n_keys=3), stream_keys(7, 2, n_keys=3), stream_keys(8, 1, n_keys=3)
    assert a.dtype == np.uint64 and len(set(a.tolist())) == 3
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    np.testing.assert_array_equal(a, stream_keys(7, 1, n_keys=3))
