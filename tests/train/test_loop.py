"""The training loop: run folder, determinism, resume, profiles and the CLI (tiny sizes, CPU)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config import AgentConfig, BacktestConfig
from fxstore.errors import InvalidInputError, SymbolNotFoundError
from fxstore.train.evaluate.results import BacktestResult
from fxstore.train.loop import train
from fxstore.train.profiles import PROFILES, config_from_json, load_profile
from fxstore.train.runs.backtest import run_backtest
from tests.train._tiny import TINY, interrupt_then_resume


def _agent_pnl(result: BacktestResult) -> list[np.ndarray]:
    return [r.pnl for r in result.folds if r.policy == "agent"]


def test_train_tiny_run_writes_the_run_folder(store: Path) -> None:
    result = train(TINY, store)
    folder = result.run_dir
    assert folder.parent == store / "runs"
    assert json.loads((folder / "config.json").read_text())["resolved"] == {
        "n_envs": 8,
        "batch_size": 32,
        "replay_size": 2_000,
    }
    for fold in ("fold00", "fold01"):
        names = {p.name for p in (folder / fold).iterdir()}
        assert names == {"evals.json", "metrics.json", "results.npz", "equity.png"}
        evals = json.loads((folder / fold / "evals.json").read_text())
        assert [e["step"] for e in evals["evals"]] == [40, 80, 120]
        assert evals["chosen"] in ("best", "flat")
    metrics = json.loads((folder / "metrics.json").read_text())
    # no oracle: the store's synth folder holds no planted signal
    assert metrics["policies"] == ["agent", "flat", "long", "random", "ofi-sign", "linear"]
    assert len(metrics["folds"]) == 2
    assert (folder / "equity_all.png").is_file()
    with np.load(folder / "fold00" / "results.npz") as data:
        assert (
            data["ts_close"].dtype == np.int64 and data["ts_close"].size == data["trading_day"].size
        )


def test_train_baselines_equal_the_backtest_of_the_same_folds(store: Path) -> None:
    trained = train(dataclasses.replace(TINY, env_steps=40, eval_every=40), store)
    tested = run_backtest(
        BacktestConfig(env=TINY.env, walkforward=TINY.walkforward, plots=False), store
    )
    for policy in ("flat", "long", "random", "ofi-sign", "linear"):
        mine = [r.pnl for r in trained.folds if r.policy == policy]
        theirs = [r.pnl for r in tested.folds if r.policy == policy][: len(mine)]
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(a, b)


def test_train_same_seed_gives_the_same_result(store: Path) -> None:
    first, second = train(TINY, store), train(TINY, store)
    for a, b in zip(_agent_pnl(first), _agent_pnl(second), strict=True):
        np.testing.assert_array_equal(a, b)
    evals = [json.loads((r.run_dir / "fold01" / "evals.json").read_text()) for r in (first, second)]
    assert evals[0] == evals[1]


def test_train_resume_after_interrupt_equals_uninterrupted_run(store: Path) -> None:
    config = dataclasses.replace(TINY, env_steps=200, eval_every=50, checkpoint_every=100)
    whole, resumed = interrupt_then_resume(config, store)
    assert not (resumed.run_dir / "fold01" / "checkpoint.npz").exists()
    for a, b in zip(_agent_pnl(whole), _agent_pnl(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    evals = [
        json.loads((r.run_dir / "fold01" / "evals.json").read_text()) for r in (whole, resumed)
    ]
    assert evals[0] == evals[1]


def test_train_no_trade_bands_are_chosen_on_validation_and_counted_as_trials(
    store: Path,
) -> None:
    plain = train(TINY, store)
    banded = train(dataclasses.replace(TINY, no_trade_bands=(0.0, 0.3, 1e9)), store)

    for fold in ("fold00", "fold01"):
        evals = json.loads((banded.run_dir / fold / "evals.json").read_text())
        assert all(e["band"] in (0.0, 0.3, 1e9) for e in evals["evals"])
        assert (
            "band" not in json.loads((plain.run_dir / fold / "evals.json").read_text())["evals"][0]
        )
    n_evals = len(json.loads((plain.run_dir / "fold00" / "evals.json").read_text())["evals"])
    (sig_plain,), (sig_banded,) = plain.significance, banded.significance
    assert sig_plain.n_trials == n_evals + 1
    assert sig_banded.n_trials == 3 * n_evals + 1
    # the band 1e9 never trades, so a band is kept only where it beats the plain policy
    for fold in ("fold00", "fold01"):
        kept = json.loads((banded.run_dir / fold / "evals.json").read_text())
        scores = [e["val_sharpe"] for e in kept["evals"]]
        again = json.loads((plain.run_dir / fold / "evals.json").read_text())["evals"]
        assert all(b >= a["val_sharpe"] for b, a in zip(scores, again, strict=True))


def test_train_no_validated_edge_stands_aside_on_the_test_window(store: Path) -> None:
    ruinous = dataclasses.replace(TINY.env, commission_per_contract=1e6)
    result = train(dataclasses.replace(TINY, env=ruinous), store)
    for fold in ("fold00", "fold01"):
        evals = json.loads((result.run_dir / fold / "evals.json").read_text())
        assert (evals["chosen"], evals["best_step"]) == ("flat", None)
    for pnl in _agent_pnl(result):
        assert not pnl.any()


def test_train_unknown_run_id_names_the_known_ones(store: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"no run 'nope' in .*start a new one"):
        train(TINY, store, resume="nope")


def test_train_unknown_symbol_writes_no_run_folder(store: Path) -> None:
    before = set((store / "runs").glob("*")) if (store / "runs").exists() else set()
    with pytest.raises(SymbolNotFoundError, match=r"No fxcache for symbol 'NQ\.FUT'"):
        train(dataclasses.replace(TINY, symbol="NQ.FUT"), store)
    after = set((store / "runs").glob("*")) if (store / "runs").exists() else set()
    assert after == before


@pytest.mark.parametrize("name", PROFILES)
def test_load_profile_builtin_round_trips_through_json(name: str) -> None:
    config = load_profile(name)
    assert config.profile == name
    assert config_from_json(json.loads(json.dumps(config.to_json())), where="x") == config


def test_load_profile_no_trade_bands_round_trip_and_bad_band_is_one_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bands.toml"
    path.write_text("no_trade_bands = [0.0, 0.25]\n")
    config = load_profile(str(path))
    assert config.no_trade_bands == (0.0, 0.25)
    assert config_from_json(json.loads(json.dumps(config.to_json())), where="x") == config
    with pytest.raises(InvalidInputError, match=r"`no_trade_bands` must be >= 0, was -1.0"):
        dataclasses.replace(config, no_trade_bands=(-1.0,))


def test_load_profile_file_overrides_only_what_it_sets(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text("env_steps = 7\n[agent]\nhidden = 12\n[env]\npositions = [-1, 0, 1]\n")
    config = load_profile(str(path))
    assert (config.env_steps, config.agent.hidden, config.env.positions) == (7, 12, (-1, 0, 1))
    assert config.agent.n_atoms == AgentConfig().n_atoms
    assert config.profile == "mine"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nonsense = 1\n", "unknown key 'nonsense' in the top level"),
        ("[agent]\nwidth = 3\n", "unknown key 'width' in \\[agent\\]"),
        ("[agent]\nhidden = 0\n", "\\[agent\\]: `hidden` must be"),
        ("env_steps = [\n", "not valid TOML"),
    ],
)
def test_load_profile_bad_file_raises_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InvalidInputError, match=message):
        load_profile(str(path))


def test_cli_train_smoke_profile_prints_table_and_run_folder(store: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["train", "--store", str(store), "--profile", "smoke", "--env-steps", "60", "-q"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0
    assert "agent" in result.output and "ofi-sign" in result.output
    assert "run folder: " in result.output


def test_cli_train_unknown_profile_is_one_error_line(store: Path) -> None:
    result = CliRunner().invoke(cli, ["train", "--store", str(store), "--profile", "fast"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        "Error: no profile 'fast': give one of smoke, default, production or a TOML file path."
    )


def test_cli_train_resume_with_overrides_is_refused(store: Path) -> None:
    result = CliRunner().invoke(
        cli, ["train", "--store", str(store), "--resume", "x", "--env-steps", "5"]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "Error: --resume continues a run with the settings in its config.json; drop --env-steps."
    )


def test_cli_train_bad_override_is_one_error_line(store: Path) -> None:
    result = CliRunner().invoke(
        cli, ["train", "--store", str(store), "--profile", "smoke", "--hidden", "0"]
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == ("Error: `--hidden` must be > 0, was 0.")


def test_train_agent_significance_counts_every_validation_candidate(store: Path) -> None:
    config = dataclasses.replace(TINY, prior_trials=3)

    result = train(config, store)

    (sig,) = result.significance
    # 3 validation evaluations a fold + standing aside = 4 candidates, x 3 prior trials
    assert (sig.policy, sig.n_trials) == ("agent", 12)
    agent_days = sum(r.metrics.n_days for r in result.folds if r.policy == "agent")
    assert sig.n_days == agent_days
    *_, significance, ceiling, oracle, choice = result.format_table().splitlines()
    assert "over 12 trials" in significance
    assert ceiling.startswith("ceiling: absent: no planted signal in ")
    assert oracle.startswith("oracle: absent: no planted signal in ")
    assert choice.startswith("linear's choice on validation, by fold: 1: ")


def test_train_in_sample_sharpe_of_the_agent_survives_reading_the_fold_back(store: Path) -> None:
    from fxstore.train.runs.folder import RunFolder

    result = train(TINY, store)
    run = RunFolder(result.run_dir)

    for r in (r for r in result.folds if r.policy in ("agent", "linear")):
        again = run.read_fold(r.fold, r.metrics.bars_per_day, TINY.capital, TINY.seed)
        assert again is not None
        np.testing.assert_equal(again[r.policy].in_sample_sharpe, r.in_sample_sharpe)
    linear = [r.in_sample_sharpe for r in result.folds if r.policy == "linear"]
    assert any(np.isfinite(linear)) or all(
        r.metrics.n_trades == 0 for r in result.folds if r.policy == "linear"
    )
