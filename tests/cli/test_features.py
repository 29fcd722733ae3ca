"""``fxstore features``: the feature set listed, or printed as a loadable TOML file."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.features.definitions import default_featureset, load_featureset

pytestmark = pytest.mark.quick


def test_features_lists_the_default_set_with_tick_size_left_to_precompute() -> None:
    result = CliRunner().invoke(cli, ["features"], catch_exceptions=False)

    assert result.exit_code == 0
    assert result.output.startswith(
        "settings: tick_size   from the bars' contract facts (instrument master) when "
        "precompute runs\n"
    )
    assert "features (51):" in result.output and "targets (5):" in result.output


def test_features_toml_loads_back_to_the_set_it_printed(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["features", "--toml"], catch_exceptions=False)
    path = tmp_path / "features.toml"
    path.write_text(result.output)

    assert load_featureset(path) == default_featureset()


def test_features_of_a_file_lists_that_file(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text('[settings]\ntick_size = 0.5\n[[features]]\nname = "ret_4"\n')

    result = CliRunner().invoke(cli, ["features", "--features", str(path)])

    assert result.exit_code == 0
    assert "tick_size   0.5 points" in result.output
    assert "features (1):" in result.output


def test_features_symbol_not_in_store_is_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["features", "--symbol", "NQ.FUT", "--store", str(tmp_path)])

    assert result.exit_code == 1
    assert result.output.startswith("Error: No bars for symbol 'NQ.FUT'")
