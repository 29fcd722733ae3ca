from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest

from fxstore.errors import FxStoreWarning, InvalidInputError, SchemaError
from fxstore.executor import MAX_RETRIES, RayPool, WorkerLostError, require_ray
from tests.ray.conftest import ray

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _square(x: int) -> int:
    return x * x


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise SchemaError(f"day {x}: broken.dbn.zst: bad")
    return x


def _warn(x: int) -> int:
    warnings.warn(FxStoreWarning(f"item {x}: damaged but usable"), stacklevel=1)
    return x


def _die_once(marker: Path) -> int:
    """Kill the worker process the first time (no marker yet), then succeed."""
    if not marker.exists():
        marker.write_text("died")
        os._exit(1)
    return 7


def _always_die(_marker: Path) -> int:
    os._exit(1)


def test_ray_pool_imap_returns_results_in_order_with_more_tasks_than_workers() -> None:
    pool = RayPool(ray, workers=2)

    assert list(pool.imap(_square, range(7))) == [x * x for x in range(7)]
    assert pool.map(_square, []) == []


def test_ray_pool_raises_the_tasks_own_error_with_its_message() -> None:
    pool = RayPool(ray, workers=2)

    with pytest.raises(SchemaError) as err:
        pool.map(_fail_on_three, range(6))

    assert str(err.value) == "day 3: broken.dbn.zst: bad"


def test_ray_pool_brings_a_tasks_fxstore_warnings_back_to_the_driver() -> None:
    pool = RayPool(ray, workers=2)

    with pytest.warns(FxStoreWarning, match=r"item 1: damaged but usable"):
        assert pool.map(_warn, [1]) == [1]


def test_ray_pool_retries_a_task_whose_worker_died(tmp_path: Path) -> None:
    pool = RayPool(ray, workers=1)

    assert pool.map(_die_once, [tmp_path / "marker"]) == [7]
    assert (tmp_path / "marker").read_text() == "died"


def test_ray_pool_names_the_task_when_its_worker_keeps_dying(tmp_path: Path) -> None:
    pool = RayPool(ray, workers=1)

    with pytest.raises(WorkerLostError) as err:
        pool.map(_always_die, [tmp_path / "m"])

    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'm'!r}: its Ray worker died {MAX_RETRIES + 1} times")
    assert "\n" not in message


def test_ray_pool_submit_all_keeps_going_past_a_failed_task() -> None:
    pool = RayPool(ray, workers=2)

    got = dict(pool.submit_all(_fail_on_three, [1, 2, 3, 4, 5]))

    assert sorted(got) == [0, 1, 2, 3, 4]
    assert isinstance(got[2], SchemaError)
    assert [got[i] for i in (0, 1, 3, 4)] == [1, 2, 4, 5]


def test_require_ray_without_ray_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)

    with pytest.raises(InvalidInputError) as err:
        require_ray()

    assert "pip install 'fxstore[ray]'" in str(err.value)
    assert str(err.value).startswith("--executor ray needs Ray, which is not installed")


def _bug(x: int) -> int:
    return {}[x]  # type: ignore[no-any-return]


def test_ray_pool_lets_a_bug_show_as_its_own_class_with_the_tasks_traceback() -> None:
    pool = RayPool(ray, workers=1)

    with pytest.raises(KeyError) as err:
        pool.map(_bug, [5])

    assert "_bug" in str(err.value)  # Ray's message carries the task's traceback
