"""Baselines on walk-forward test windows: hand-computed books, the run folder, the CLI."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from fxstore.config import BacktestConfig, EnvConfig, WalkForwardConfig
from fxstore.errors import InvalidInputError
from fxstore.store import create_run_dir, file_sha256
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.metrics import compute_metrics
from fxstore.train.evaluate.references.baselines import BASELINES, baseline_positions
from fxstore.train.evaluate.results import evaluate_fold
from fxstore.train.evaluate.walkforward import Fold
from fxstore.train.runs.backtest import run_backtest
from tests.conftest import SynthMarket

pytestmark = pytest.mark.quick

ES = ContractSpec("ES", 50.0, 0.25)
#: 0.125 * 50 (half spread) + 1.25 (commission) = $7.50 per contract traded.
COST = 7.5
ENV = EnvConfig(commission_per_contract=1.25)
#: 3 test windows of 10 days after a 20-day training window (~14 bars a day).
FOLDS = WalkForwardConfig(train_days=20, test_days=10)


def tiny_market(close: list[float], ofi: list[float] | None = None) -> Market:
    n = len(close)
    features = np.zeros((n, 2), dtype=np.float32)
    features[:, 1] = ofi if ofi is not None else np.zeros(n)
    return Market(
        features=features,
        close=np.asarray(close, dtype=np.float64),
        half_spread=np.full(n, 0.125),
        is_roll=np.zeros(n, dtype=bool),
        trading_day=(19_800 + np.arange(n) // 3).astype(np.int32),
        feature_names=("f_ret_1", "f_ofi_all"),
        bars_per_day=3.0,
    )


def whole_fold(n: int) -> Fold:
    return Fold(
        index=0,
        train=(0, 0),
        validation=(0, 0),
        test=(0, n),
        train_span=(19_799, 19_799),
        validation_span=None,
        test_span=(19_800, 19_800 + (n - 1) // 3),
    )


# --- baseline_positions ---------------------------------------------------------------------


def test_baseline_positions_flat_and_long_hold_zero_and_one_contract() -> None:
    market = tiny_market([1.0, 2.0, 3.0, 4.0])

    flat = baseline_positions("flat", market, 1, 4, ENV, seed=0)
    long = baseline_positions("long", market, 1, 4, ENV, seed=0)

    assert flat.dtype == long.dtype == np.float64
    np.testing.assert_array_equal(flat, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(long, [1.0, 1.0, 1.0])


def test_baseline_positions_random_is_seeded_and_drawn_from_positions() -> None:
    market = tiny_market([100.0] * 400)

    a = baseline_positions("random", market, 0, 400, ENV, seed=3)
    b = baseline_positions("random", market, 0, 400, ENV, seed=3)
    c = baseline_positions("random", market, 0, 400, ENV, seed=4)

    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert set(a.tolist()) == {-2.0, -1.0, 0.0, 1.0, 2.0}


def test_baseline_positions_ofi_sign_follows_feature_sign_with_zero_flat() -> None:
    market = tiny_market([1.0] * 5, ofi=[0.3, -2.0, 0.0, 5.0, -0.1])

    positions = baseline_positions("ofi-sign", market, 0, 5, ENV, seed=0)

    np.testing.assert_array_equal(positions, [1.0, -1.0, 0.0, 1.0, -1.0])


def test_baseline_positions_unknown_policy_raises_listing_choices() -> None:
    market = tiny_market([1.0, 2.0])

    with pytest.raises(InvalidInputError) as info:
        baseline_positions("momentum", market, 0, 2, ENV, seed=0)

    assert str(info.value) == (
        "unknown policy 'momentum'; choose from flat, long, random, ofi-sign, linear, "
        "ceiling, oracle."
    )


def test_baseline_positions_ofi_sign_without_feature_raises() -> None:
    market = tiny_market([1.0, 2.0])

    with pytest.raises(InvalidInputError, match="no feature 'f_ofi_9'"):
        baseline_positions("ofi-sign", market, 0, 2, ENV, seed=0, feature="ofi_9")


# --- evaluate_fold: hand-computed -----------------------------------------------------------


def test_evaluate_fold_long_on_rising_market_earns_moves_minus_entry_and_exit() -> None:
    market = tiny_market([100.0, 100.5, 101.0, 102.0, 102.25, 103.0])
    positions = baseline_positions("long", market, 0, 6, ENV, seed=0)

    result = evaluate_fold(market, whole_fold(6), positions, ENV, ES, capital=1e5, seed=0)

    assert result.metrics.total_pnl == pytest.approx(3.0 * 50.0 - 2 * COST, abs=1e-9)
    assert result.metrics.n_trades == 1
    assert result.pnl.dtype == result.positions.dtype == np.float64
    np.testing.assert_array_equal(result.positions, [1.0] * 5 + [0.0])
    assert result.policy == "agent"


def test_evaluate_fold_flat_books_nothing_and_undefined_ratios() -> None:
    market = tiny_market([100.0, 101.0, 99.0, 104.0, 90.0, 95.0])

    result = evaluate_fold(
        market, whole_fold(6), np.zeros(6), ENV, ES, capital=1e5, seed=0, policy="flat"
    )

    assert result.metrics.total_pnl == 0.0 and result.metrics.n_trades == 0
    assert math.isnan(result.metrics.sharpe_daily)
    assert result.metrics.to_json()["sharpe_daily"] is None
    assert result.policy == "flat"


def test_evaluate_fold_ofi_sign_books_each_signed_move() -> None:
    # +1 over 100->101, flip to -1 over 101->100, flat over 100->99, +1 over 99->100
    market = tiny_market([100.0, 101.0, 100.0, 99.0, 100.0], ofi=[1.0, -1.0, 0.0, 2.0, 3.0])
    positions = baseline_positions("ofi-sign", market, 0, 5, ENV, seed=0)

    result = evaluate_fold(market, whole_fold(5), positions, ENV, ES, capital=1e5, seed=0)

    # contracts traded: 1 (open), 2 (flip), 1 (close), 1 (open), 1 (close-out)
    expected = [50.0 - COST, 50.0 - 2 * COST, -COST, 50.0 - COST, -COST]
    np.testing.assert_allclose(result.pnl, expected, rtol=0, atol=1e-12)


# --- BacktestConfig -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"policies": ("flat", "momentum")},
            "unknown policy 'momentum'; choose from flat, long, random, ofi-sign, linear, "
            "ceiling, oracle.",
        ),
        ({"policies": ()}, "`policies` must be a non-empty tuple"),
        ({"policies": ("flat", "flat")}, "`policies` must not repeat a policy"),
        ({"capital": 0.0}, "`capital` must be > 0, was 0.0."),
        ({"seed": -1}, "`seed` must be >= 0, was -1."),
        ({"symbol": "../x"}, "`symbol` may hold only"),
        ({"plots": "yes"}, "`plots` must be True or False"),
    ],
)
def test_backtest_config_bad_field_raises_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        BacktestConfig(**kwargs)  # type: ignore[arg-type]

    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_backtest_config_to_json_holds_nested_configs() -> None:
    data = BacktestConfig(policies=("long",), env=ENV, walkforward=FOLDS).to_json()

    assert data["policies"] == ["long"]
    assert data["env"] == ENV.to_json()
    assert data["walkforward"] == FOLDS.to_json()
    json.dumps(data)


# --- run_backtest on a real fxcache ---------------------------------------------------------


@pytest.fixture(scope="module")
def backtest(store: Path, two_roll_market: SynthMarket):  # type: ignore[no-untyped-def]
    """One full backtest with plots (shared by the run-folder tests), the oracle included."""
    config = BacktestConfig(
        env=ENV, walkforward=FOLDS, seed=1, signal_dir=str(two_roll_market.folder)
    )
    return config, run_backtest(config, store)


def test_run_backtest_writes_config_metrics_and_one_png_per_fold(backtest, store: Path) -> None:  # type: ignore[no-untyped-def]
    config, result = backtest
    folder = result.run_dir

    assert folder.parent == store / "runs" and folder.name.endswith("-backtest")
    recorded = json.loads((folder / "config.json").read_text())
    manifest = next((store / "fxcache" / "ES.FUT").glob("*/manifest.json"))
    assert recorded["config"] == config.to_json()
    assert recorded["fxcache"]["key"] == manifest.parent.name == result.fxcache_key
    assert recorded["fxcache"]["manifest_sha256"] == file_sha256(manifest)
    assert "fxstore_version" in recorded
    n_folds = len({r.fold.index for r in result.folds})
    assert n_folds >= 2
    pngs = sorted(folder.glob("fold*/equity.png"))
    assert len(pngs) == n_folds
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert not list(folder.rglob("*.tmp"))


def test_run_backtest_metrics_json_has_every_fold_policy_and_nan_as_null(backtest) -> None:  # type: ignore[no-untyped-def]
    _, result = backtest

    metrics = json.loads((result.run_dir / "metrics.json").read_text())

    assert metrics == json.loads(json.dumps(result.to_json()))
    assert metrics["policies"] == list(BASELINES)
    assert all(sorted(f["policies"]) == sorted(BASELINES) for f in metrics["folds"])
    assert metrics["totals"]["flat"]["total_pnl"] == 0.0
    assert metrics["totals"]["flat"]["sharpe_daily"] is None


def test_run_backtest_records_linears_choice_per_fold(backtest) -> None:  # type: ignore[no-untyped-def]
    _, result = backtest

    metrics = json.loads((result.run_dir / "metrics.json").read_text())

    choices = [f["choices"]["linear"] for f in metrics["folds"]]
    assert len(choices) == len(metrics["folds"]) >= 2
    assert all(
        set(c) == {"horizon_bars", "ridge_lambda", "band_sd", "validation_sharpe"} for c in choices
    )
    flat = [c["band_sd"] is None for c in choices]  # inf: nothing beat standing aside
    assert all(c["horizon_bars"] in (1, 2, 4, 8, 16) for c in choices)
    assert all(f or c["ridge_lambda"] is not None for c, f in zip(choices, flat, strict=True))
    assert all(set(f["choices"]) == {"linear"} for f in metrics["folds"])
    (line,) = (n for n in result.notes if n.startswith("linear's choice on validation, by fold: "))
    assert line.count(" bars, λ ") + line.count("flat (nothing beat") == len(choices)


def test_run_backtest_totals_are_metrics_of_concatenated_test_windows(backtest) -> None:  # type: ignore[no-untyped-def]
    config, result = backtest
    longs = [r for r in result.folds if r.policy == "long"]

    expected = compute_metrics(
        np.concatenate([r.pnl for r in longs]),
        np.concatenate([r.positions for r in longs]),
        np.concatenate([r.trading_day for r in longs]),
        bars_per_day=longs[0].metrics.bars_per_day,
        capital=config.capital,
        seed=config.seed,
    )

    assert result.totals["long"] == expected
    tests = [r.fold.test for r in longs]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(tests))  # contiguous
    assert result.totals["long"].total_pnl == pytest.approx(sum(r.pnl.sum() for r in longs))


def test_run_backtest_format_table_lists_folds_then_totals(backtest) -> None:  # type: ignore[no-untyped-def]
    _, result = backtest

    lines = result.format_table().splitlines()

    assert " ".join(lines[0].split()) == (
        "fold test span policy PnL $ Sharpe ann. max DD $ trades PSR IS Sharpe ann."
    )
    # folds, totals, one significance line for the best policy of the table, the notes
    n_notes = len(result.notes)
    assert len(lines) == 2 + len(result.folds) + len(BASELINES) + 1 + n_notes
    assert lines[-2 - n_notes].startswith("all") and lines[-2 - n_notes].split()[2] == "oracle"
    assert " n/a " in lines[2]  # fold 1, flat: Sharpe undefined
    best = result.significance[0]
    assert lines[-1 - n_notes].startswith(f"{best.policy}: Sharpe ann.")
    assert f"over {len(BASELINES)} trials" in lines[-1 - n_notes]
    assert lines[-n_notes].startswith("ceiling and oracle: planted signal from ")


def test_run_backtest_same_config_gives_same_numbers_in_new_folder(store: Path) -> None:
    config = BacktestConfig(policies=("random",), env=ENV, walkforward=FOLDS, plots=False)

    a, b = run_backtest(config, store), run_backtest(config, store)

    assert a.run_dir != b.run_dir
    assert a.totals == b.totals
    assert not list(a.run_dir.rglob("*.png"))


def test_create_run_dir_same_second_gives_unique_folders(tmp_path: Path) -> None:
    folders = [create_run_dir(tmp_path, "backtest") for _ in range(3)]

    assert len(set(folders)) == 3 and all(f.is_dir() for f in folders)
    assert folders[1].name == folders[0].name + "-2" or folders[1].name[:16] != folders[0].name[:16]


# --- CLI ------------------------------------------------------------------------------------


def test_cli_backtest_unknown_policy_prints_one_error_line(store: Path) -> None:
    result = CliRunner().invoke(
        cli, ["backtest", "--store", str(store), "--policy", "flat", "--policy", "momentum"]
    )

    assert result.exit_code == 1
    assert (
        result.output == "Error: unknown policy 'momentum'; choose from "
        "flat, long, random, ofi-sign, linear, ceiling, oracle.\n"
    )


def test_cli_backtest_missing_symbol_prints_one_error_line(store: Path) -> None:
    result = CliRunner().invoke(cli, ["backtest", "--store", str(store), "--symbol", "NQ.FUT"])

    assert result.exit_code == 1
    assert result.output == (
        f"Error: No fxcache for symbol 'NQ.FUT' in {store}; known: ES.FUT. "
        "Run `fxstore precompute` for it first.\n"
    )


def test_cli_backtest_json_reports_folds_totals_and_run_dir(store: Path) -> None:
    args = ["backtest", "--store", str(store), "--policy", "long", "--policy", "flat"]
    args += ["--train-days", "20", "--test-days", "15", "--anchored", "--roll", "close"]
    args += ["--commission", "2.0", "--slippage-ticks", "1", "--no-plots", "--json", "-q"]

    result = CliRunner().invoke(cli, args, catch_exceptions=False)

    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["policies"] == ["long", "flat"] and list(report["totals"]) == ["long", "flat"]
    config = json.loads((Path(report["run_dir"]) / "config.json").read_text())["config"]
    assert config["env"]["commission_per_contract"] == 2.0 and config["env"]["roll"] == "close"
    assert config["walkforward"]["anchored"] is True and config["plots"] is False


def test_cli_backtest_table_prints_rows_and_run_folder(store: Path) -> None:
    args = ["backtest", "--store", str(store), "--policy", "ofi-sign", "--test-days", "30"]

    result = CliRunner().invoke(cli, [*args, "--train-days", "20", "-q"], catch_exceptions=False)

    assert result.exit_code == 0
    (key,) = (p.name for p in (store / "fxcache" / "ES.FUT").iterdir())
    assert result.stderr == f"fxcache ES.FUT/{key}: the only fxcache of 'ES.FUT'\n"
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fold") and "ofi-sign" in lines[2]
    assert lines[-2].startswith("Wrote ") and "-backtest" in lines[-2]
    run_id = lines[-2].rsplit("/", 1)[1]
    assert lines[-1] == f"its report: fxstore report {run_id} --store {store}"


def test_run_backtest_that_fails_midway_leaves_no_run_folder(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fxstore.train.runs import backtest as module

    before = sorted((store / "runs").iterdir()) if (store / "runs").exists() else []

    def fail(*_args: object, **_kwargs: object) -> list[object]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, "baseline_results", fail)
    config = BacktestConfig(env=ENV, walkforward=FOLDS, seed=1, plots=False)

    with pytest.raises(OSError, match="No space left"):
        run_backtest(config, store)

    after = sorted((store / "runs").iterdir()) if (store / "runs").exists() else []
    assert after == before  # the folder it had created is gone


@pytest.mark.parametrize(
    ("value", "text"),
    [(-817.5, "-$817.50"), (1234.0, "$1,234.00"), (0.0, "$0.00"), (float("nan"), "n/a")],
)
def test_dollars_puts_the_sign_before_the_dollar(value: float, text: str) -> None:
    from fxstore.train.evaluate.results import dollars

    assert dollars(value) == text
