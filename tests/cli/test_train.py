"""``train`` settings: the profile fills them, the options given replace them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxstore.cli.train import train_config
from fxstore.errors import InvalidInputError
from fxstore.train.profiles import load_profile

pytestmark = pytest.mark.quick


def test_train_config_no_options_is_the_profile() -> None:
    assert train_config("smoke") == load_profile("smoke")


def test_train_config_symbol_not_given_comes_from_the_profile(tmp_path: Path) -> None:
    profile = tmp_path / "nq.toml"
    profile.write_text('symbol = "NQ.FUT"\n[env]\ncommission_per_contract = 2.5\n')

    config = train_config(str(profile), seed=None, commission_per_contract=None)

    assert config.symbol == "NQ.FUT" and config.env.commission_per_contract == 2.5


def test_train_config_options_replace_settings_in_their_sections() -> None:
    config = train_config(
        "smoke", symbol="NQ.FUT", hidden=16, commission_per_contract=2.0, test_days=5
    )

    smoke = load_profile("smoke")
    assert (config.symbol, config.agent.hidden, config.walkforward.test_days) == ("NQ.FUT", 16, 5)
    assert config.env.commission_per_contract == 2.0
    assert config.agent.n_atoms == smoke.agent.n_atoms and config.env.roll == smoke.env.roll


def test_train_config_forecast_options_reach_the_config() -> None:
    config = train_config("smoke", forecast="only", forecast_model="blend")

    assert (config.forecast, config.forecast_model) == ("only", "blend")
    assert load_profile("smoke").forecast_model == "linear"


def test_train_config_reward_forecast_reaches_the_config_and_names_its_option() -> None:
    assert train_config("smoke", reward_forecast=0.5).reward_forecast == 0.5
    assert load_profile("smoke").reward_forecast == 0.0

    with pytest.raises(
        InvalidInputError, match=r"^`--reward-forecast` must be in \[0, 1\], was 2\.0\.$"
    ):
        train_config("smoke", reward_forecast=2.0)


def test_train_config_concurrent_seeds_option_reaches_the_config() -> None:
    config = train_config("smoke", seeds=3, concurrent_seeds=True)

    assert (config.seeds, config.concurrent_seeds) == (3, True)
    assert load_profile("smoke").concurrent_seeds is False


def test_cli_train_concurrent_seeds_is_a_setting_resume_refuses(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fxstore.cli import cli

    result = CliRunner().invoke(
        cli, ["train", "--store", str(tmp_path), "--resume", "r1", "--concurrent-seeds"]
    )

    assert result.exit_code == 2
    assert "drop --concurrent-seeds" in result.output
    assert list(tmp_path.iterdir()) == []


def test_cli_train_refuses_an_unknown_forecast_model(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fxstore.cli import cli

    result = CliRunner().invoke(
        cli, ["train", "--store", str(tmp_path), "--forecast-model", "ridge"]
    )

    assert result.exit_code == 2
    assert "'ridge' is not one of 'linear', 'blend'" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"hidden": 0}, "`--hidden` must be > 0, was 0."),
        ({"train_days": 0}, "`--train-days` must be > 0, was 0."),
        ({"max_folds": 0}, "`--max-folds` must be > 0, was 0."),
        ({"commission_per_contract": -1.0}, "`--commission` must be >= 0, was -1.0."),
    ],
)
def test_train_config_bad_option_names_the_option(options: dict[str, int], message: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        train_config("smoke", **options)  # type: ignore[arg-type]

    assert str(info.value) == message
