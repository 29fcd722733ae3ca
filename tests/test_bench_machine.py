"""The machine a benchmark result names: from FXSTORE_BENCH_MACHINE, else from its GPUs."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

pytestmark = pytest.mark.quick


@pytest.fixture()
def common(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("_common")


def test_the_kind_follows_the_gpus(common: ModuleType) -> None:
    assert common._machine_kind([]) == "dev-cpu"
    assert common._machine_kind(["NVIDIA H100 80GB HBM3"]) == "nvidia-h100"
    assert common._machine_kind(["NVIDIA H200", "NVIDIA H200"]) == "nvidia-h200-x2"
    assert common._machine_kind(["Some Other Card"]) == "nvidia-gpu"


def test_the_environment_names_the_machine_first(
    common: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "_gpu_names", lambda: ["NVIDIA H100 80GB HBM3"])
    monkeypatch.delenv("FXSTORE_BENCH_MACHINE", raising=False)
    assert common.machine()["hostname_kind"] == "nvidia-h100"
    assert common.machine()["gpus"] == ["NVIDIA H100 80GB HBM3"]
    monkeypatch.setenv("FXSTORE_BENCH_MACHINE", "lab-box")
    assert common.machine()["hostname_kind"] == "lab-box"


def test_no_nvidia_smi_means_no_gpus(common: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert common._gpu_names() == []
