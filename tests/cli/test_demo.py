"""``fxstore demo``: synth, scan, ingest, precompute and (unless --no-train) train, in one go."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from fxstore.cli import cli


def test_demo_small_market_runs_synth_scan_and_ingest(tmp_path: Path) -> None:
    args = ["demo", "--start", "2024-03-04", "--end", "2024-03-13", "--events-per-day", "3000"]
    args.append("--no-train")

    result = CliRunner().invoke(cli, [*args, "--store", str(tmp_path)], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert "Front month of ES" in result.output
    assert "Ingested 8 trading days" in result.output
    assert len(list((tmp_path / "synth" / "ES.FUT").glob("*.mbp-10.dbn.zst"))) == 8


def test_demo_with_train_ends_with_the_agent_and_baselines(tmp_path: Path) -> None:
    profile = tmp_path / "tiny.toml"
    profile.write_text(
        'device = "cpu"\nn_envs = 4\nbatch_size = 16\nreplay_size = 500\nepisode_bars = 20\n'
        "env_steps = 30\nlearn_start = 16\neval_every = 10\nmax_folds = 1\n"
        "[agent]\nhidden = 8\nn_atoms = 5\n[walkforward]\ntrain_days = 5\ntest_days = 2\n"
        "validation_fraction = 0.2\n"
    )
    args = ["demo", "--start", "2024-03-04", "--end", "2024-04-12", "--events-per-day", "3000"]

    result = CliRunner().invoke(
        cli,
        [*args, "--profile", str(profile), "--store", str(tmp_path), "-q"],
        catch_exceptions=False,
    )

    assert result.exit_code == 0, result.output
    assert "ofi-sign" in result.output
    assert "run folder: " in result.output
    (run_id,) = (p.name for p in (tmp_path / "runs").iterdir())
    assert f"its report: fxstore report {run_id} --store {tmp_path}" in result.output


def test_demo_no_train_ends_with_precompute(tmp_path: Path) -> None:
    args = ["demo", "--start", "2024-02-26", "--end", "2024-04-12", "--events-per-day", "3000"]
    args.append("--no-train")

    result = CliRunner().invoke(
        cli, [*args, "-q", "--store", str(tmp_path)], catch_exceptions=False
    )

    assert result.exit_code == 0
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Precomputed 51 features and 3 targets over ")
    assert list((tmp_path / "fxcache" / "ES.FUT").glob("*/manifest.json"))


def test_demo_default_range_holds_one_fold_of_the_default_profile() -> None:
    from fxstore.cli._options import DEMO_END, DEMO_START
    from fxstore.market.calendar import trading_days_between
    from fxstore.train.profiles import load_profile

    # The features' 200-bar warm-up takes the first ~3 days (about 73 bars a day).
    days_in_fxcache = len(trading_days_between(DEMO_START, DEMO_END)) - 3

    assert days_in_fxcache >= load_profile("default").walkforward.days_needed()
