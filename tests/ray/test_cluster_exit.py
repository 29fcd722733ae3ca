"""A Ray cluster that cannot be reached ends in one line; a local one goes with its driver."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config.executor import ExecutorConfig
from fxstore.errors import InvalidInputError
from fxstore.executor import open_ray_pool
from fxstore.reaper import node_processes
from tests.conftest import SynthMarket
from tests.ray.conftest import ray

_DRIVER = """
import sys, time
from fxstore.config.executor import ExecutorConfig
from fxstore.executor import open_ray_pool
import ray
with open_ray_pool(ExecutorConfig("ray"), 1):
    print(ray.get_runtime_context().get_node_id(), flush=True)
    time.sleep(600)
"""


def _closed_port() -> int:
    """A local TCP port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _fill_backlog(where: tuple[str, int]) -> list[socket.socket]:
    """Connections that fill the backlog of a socket that never accepts."""
    fillers = []
    for _ in range(16):
        try:
            fillers.append(socket.create_connection(where, timeout=2))
        except TimeoutError:
            break
    return fillers


def test_open_ray_pool_at_an_address_nothing_answers_is_one_error_within_seconds() -> None:
    address = f"127.0.0.1:{_closed_port()}"
    start = time.monotonic()

    with (
        pytest.raises(InvalidInputError) as err,
        open_ray_pool(ExecutorConfig("ray", address, connect_timeout_s=2), 1),
    ):
        pass

    assert time.monotonic() - start < 5
    assert str(err.value).startswith(f"Ray cluster at {address}: cannot connect within 2 s (")
    assert not ray.is_initialized()


def test_open_ray_pool_at_a_silent_address_gives_up_after_the_timeout() -> None:
    with socket.socket() as silent:  # listens, never accepts: a full backlog answers nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(0)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        fillers = _fill_backlog(silent.getsockname())
        start = time.monotonic()
        try:
            with (
                pytest.raises(InvalidInputError) as err,
                open_ray_pool(ExecutorConfig("ray", address, connect_timeout_s=1.5), 1),
            ):
                pass
        finally:
            for filler in fillers:
                filler.close()

    assert time.monotonic() - start < 10
    assert f"Ray cluster at {address}: cannot connect within 1.5 s" in str(err.value)


def test_open_ray_pool_at_a_port_that_answers_but_is_no_ray_cluster_gives_up() -> None:
    with socket.socket() as other:  # accepts connections, says nothing
        other.bind(("127.0.0.1", 0))
        other.listen(16)
        address = f"127.0.0.1:{other.getsockname()[1]}"
        start = time.monotonic()

        with (
            pytest.raises(InvalidInputError) as err,
            open_ray_pool(ExecutorConfig("ray", address, connect_timeout_s=2), 1),
        ):
            pass

    assert time.monotonic() - start < 120  # Ray alone tries for ten minutes and more
    assert str(err.value).startswith(f"Ray cluster at {address}: could not start or join it")
    assert "RAY_gcs_server_port_wait_time_s" not in os.environ


def test_cli_ingest_ray_address_nothing_answers_is_one_error_line(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    args = [str(two_roll_market.folder), "--store", str(tmp_path), "-q", "--executor", "ray"]

    result = CliRunner().invoke(
        cli, ["ingest", *args, "--ray-address", address, "--ray-timeout", "3"]
    )

    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"Error: Ray cluster at {address}: cannot connect within 3 s")


def test_cli_ray_timeout_must_be_positive(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["ingest", str(tmp_path), "--executor", "ray", "--ray-timeout", "0"]
    )

    assert result.exit_code == 1
    assert result.output == (
        "Error: `ray_timeout` must be a positive number of seconds, was 0.0.\n"
    )


def test_open_ray_pool_without_an_address_starts_its_own_instance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ray.init() alone would join the cluster RAY_ADDRESS (or the last one started here) names
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{_closed_port()}")

    with open_ray_pool(ExecutorConfig("ray"), 1) as pool:
        assert pool.map(abs, [-2, 3]) == [2, 3]

    assert not ray.is_initialized()


# Left out of the suite (`pytest -q -n 0 -m alone` runs it): on the 2-core dev VM about one run
# in two never saw the node's agents start within 240 s, alone or in the suite; when they do
# start, the reaper has taken them down after the driver's kill -9 in every run seen.
@pytest.mark.alone
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_local_ray_instance_goes_with_its_driver_killed_by_sigkill() -> None:
    # a user's driver: none of the RAY_* settings earlier Ray tests left in this process
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER], stdout=subprocess.PIPE, text=True, env=env
    )
    assert driver.stdout is not None
    node_id = driver.stdout.readline().strip()
    try:
        deadline = time.monotonic() + 240  # a raylet starts its agents slowly on a busy box
        while not node_processes(node_id) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert node_processes(node_id), "the raylet's agents never started"

        driver.send_signal(signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 30  # Ray's own agents take over a minute
        while node_processes(node_id) and time.monotonic() < deadline:
            time.sleep(0.5)

        assert node_processes(node_id) == []
    finally:
        driver.kill()
        for pid in node_processes(node_id):
            os.kill(pid, signal.SIGKILL)
