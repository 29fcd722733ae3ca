"""fxstore.config: one module per stage, importing no stage package."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import fxstore.config

pytestmark = pytest.mark.quick

CONFIG_DIR = Path(fxstore.config.__file__).parent
STAGES = ("fxstore.ingest", "fxstore.features", "fxstore.train", "fxstore.synth")


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _runtime_imports(tree: ast.AST) -> list[str]:
    """Modules imported by `tree` at run time (anything outside ``if TYPE_CHECKING:``)."""
    found: list[str] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        found += _runtime_imports(node)
    return found


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.py")), ids=lambda p: p.name)
def test_config_module_imports_no_stage_package(path: Path) -> None:
    imports = _runtime_imports(ast.parse(path.read_text()))

    stage_imports = {
        (path.name, module)
        for module in imports
        if any(module == stage or module.startswith(f"{stage}.") for stage in STAGES)
    }
    assert stage_imports == set()


def test_config_import_and_defaults_load_no_stage_module() -> None:
    code = (
        "import sys, datetime as dt\n"
        "from fxstore.config import BacktestConfig, FeatureConfig, IngestConfig\n"
        "from fxstore.config import SynthConfig, TrainConfig\n"
        "BacktestConfig(); FeatureConfig(); TrainConfig(); IngestConfig()\n"
        "SynthConfig(start=dt.date(2024, 3, 1), end=dt.date(2024, 3, 8))\n"
        "print(__import__('json').dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    loaded = json.loads(out.stdout)
    assert [m for m in loaded if m.startswith(STAGES)] == []
    assert "numpy" not in loaded


def test_config_exports_every_public_name() -> None:
    names = [
        "AgentConfig",
        "BASELINE_POLICIES",
        "BacktestConfig",
        "BarConfig",
        "BarType",
        "DeviceChoice",
        "EnvConfig",
        "FeatureConfig",
        "ForecastMode",
        "ForecastModel",
        "IMBALANCE_BAR_TYPES",
        "IngestConfig",
        "InstrumentSelection",
        "RewardMode",
        "RollConfig",
        "RollMode",
        "RollRule",
        "SYNTH_FIRST_DAY",
        "SYNTH_LAST_DAY",
        "ShardBy",
        "SplitMode",
        "SynthConfig",
        "TrainConfig",
        "WalkForwardConfig",
        "depth_symbol",
        "parse_roll_months",
    ]

    assert sorted(fxstore.config.__all__) == sorted(names)
    assert all(hasattr(fxstore.config, name) for name in names)
