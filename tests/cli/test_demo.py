"""``fxstore demo``: synth, scan, ingest, precompute and (unless --no-train) train, in one go."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fxstore.cli import cli
from tests.cli.test_readme import readme_commands

#: A market of 30 trading days across the March roll (the demo's, smaller and shorter).
SMALL_MARKET = ["--start", "2024-03-04", "--end", "2024-04-12", "--events-per-day", "3000"]
#: Walk-forward sizes that fit SMALL_MARKET, in place of the README's.
_SMALL_WINDOWS = {"--train-days": "5", "--test-days": "2"}
_RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-train\b")


def _tiny_profile(folder: Path) -> Path:
    """A training profile of seconds on a CPU, with one fold that fits SMALL_MARKET."""
    profile = folder / "tiny.toml"
    profile.write_text(
        'device = "cpu"\nn_envs = 4\nbatch_size = 16\nreplay_size = 500\nepisode_bars = 20\n'
        "env_steps = 30\nlearn_start = 16\neval_every = 10\nmax_folds = 1\n"
        "[agent]\nhidden = 8\nn_atoms = 5\n[walkforward]\ntrain_days = 5\ntest_days = 2\n"
        "validation_fraction = 0.2\n"
    )
    return profile


def _invoke(args: list[str]) -> Result:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, f"{shlex.join(args)}\n{result.output}"
    return result


def _small(command: str, profile: Path, store: Path) -> tuple[list[str], Path | None]:
    """A README command line at SMALL_MARKET's sizes: its args and where `>` sends stdout."""
    args = shlex.split(command)[1:]
    out = None
    if ">" in args:
        at = args.index(">")
        args, out = args[:at], Path(args[at + 1])
    for i, arg in enumerate(args[:-1]):
        if arg in _SMALL_WINDOWS:
            args[i + 1] = _SMALL_WINDOWS[arg]
        elif arg == "--profile":
            args[i + 1] = str(profile)
    runs = sorted(p.name for p in (store / "runs").iterdir() if p.name.endswith("-train"))
    return [_RUN_ID.sub(runs[-1], a) for a in args], out


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
    assert last.startswith("Precomputed 51 features and 5 targets over ")
    assert list((tmp_path / "fxcache" / "ES.FUT").glob("*/manifest.json"))


def test_demo_default_range_holds_one_fold_of_the_default_profile() -> None:
    from fxstore.cli._options import DEMO_END, DEMO_START
    from fxstore.market.calendar import trading_days_between
    from fxstore.train.profiles import load_profile

    # The features' 200-bar warm-up takes the first ~3 days (about 73 bars a day).
    days_in_fxcache = len(trading_days_between(DEMO_START, DEMO_END)) - 3

    assert days_in_fxcache >= load_profile("default").walkforward.days_needed()


@pytest.mark.slow
def test_demo_twice_then_every_readme_command_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FXSTORE_HOME", raising=False)
    profile = _tiny_profile(tmp_path)
    demo = ["demo", *SMALL_MARKET, "--profile", str(profile), "-q"]
    _invoke(demo)

    again = _invoke(demo).output.splitlines()

    store = tmp_path / "data"
    (cache,) = (store / "fxcache" / "ES.FUT").iterdir()
    series = store / "bars" / "ES.FUT" / "mbp10_front_month"
    assert again[0] == (
        "Up to date: 30 DBN files (89,440 records, 30 trading days) in data/synth/ES.FUT, "
        "written before with the same options; left as they are."
    )
    assert [p.name for p in series.glob("*/v*")] == ["v0001"]
    assert f"Up to date: {cache.relative_to(tmp_path)} (724 rows); --force rebuilds." in again
    assert f"fxcache ES.FUT/{cache.name}: the one just precomputed" in again
    for command in readme_commands():
        args, out = _small(command, profile, store)
        result = _invoke(args)
        if out is not None:
            out.write_text(result.stdout)


def test_demo_trains_on_the_cache_it_built_where_the_store_holds_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another fxcache of the current bars (another set, or an earlier version's default
    set) does not stop the demo: it trains on the one it precomputed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FXSTORE_HOME", raising=False)
    _invoke(["demo", *SMALL_MARKET, "--no-train", "-q"])
    _invoke(["precompute", "--symbol", "ES.FUT", "--features", "classic"])

    again = _invoke(["demo", *SMALL_MARKET, "--profile", str(_tiny_profile(tmp_path)), "-q"])

    caches = sorted((tmp_path / "data" / "fxcache" / "ES.FUT").iterdir())
    assert len(caches) == 2
    line = next(x for x in again.output.splitlines() if x.endswith(": the one just precomputed"))
    (run,) = (tmp_path / "data" / "runs").glob("*-train")
    config = json.loads((run / "config.json").read_text())
    assert line == f"fxcache ES.FUT/{config['fxcache']['key']}: the one just precomputed"


@pytest.mark.slow
def test_demo_after_new_bars_backtest_takes_the_current_cache_and_gc_frees_the_old(
    tmp_path: Path,
) -> None:
    store = ["--store", str(tmp_path)]
    _invoke(["demo", *SMALL_MARKET, "--no-train", "-q", *store])
    (old,) = (tmp_path / "fxcache" / "ES.FUT").iterdir()
    (tmp_path / "synth" / "ES.FUT" / "fxstore-synth.json").unlink()  # synth writes again
    _invoke(["demo", *SMALL_MARKET, "--no-train", "-q", *store])  # new files: bars v0002
    (new,) = {p for p in (tmp_path / "fxcache" / "ES.FUT").iterdir()} - {old}

    backtest = _invoke(
        [
            "backtest",
            "--train-days",
            "5",
            "--test-days",
            "2",
            "--policy",
            "flat",
            "-q",
            *store,
        ]
    )
    listed = _invoke(["gc", "--caches", *store]).output.splitlines()
    _invoke(["gc", "--caches", "--delete", *store])

    assert f"fxcache ES.FUT/{new.name}: built from the current bars, v0002" in backtest.output
    size = sum(p.stat().st_size for p in new.iterdir() if p.is_file())
    assert listed[0].startswith(f"would delete {old} (")
    assert listed[0].endswith(" bytes): built from older bars; no run read it")
    assert listed[1] == f"kept {new}: built from the current bars, v0002"
    assert listed[2].startswith("Would delete 1 fxcache, ")
    assert listed[3] == "Nothing was deleted: re-run with --delete to delete them."
    assert [p.name for p in (tmp_path / "fxcache" / "ES.FUT").iterdir()] == [new.name]
    assert size > 0


def test_demo_prints_at_most_40_lines_with_the_totals_only(tmp_path: Path) -> None:
    profile = _tiny_profile(tmp_path)
    args = ["demo", *SMALL_MARKET, "--profile", str(profile), "--store", str(tmp_path)]

    lines = _invoke(args).output.splitlines()

    (run_id,) = (p.name for p in (tmp_path / "runs").iterdir())
    assert len(lines) <= 40
    assert "Instruments (6)" not in lines
    assert not any(line.startswith("1 ") for line in lines)  # no fold's rows
    assert sum(line.startswith("all ") for line in lines) == 8  # every policy once
    assert f"run folder: {tmp_path}/runs/{run_id} (each fold: fxstore runs show {run_id})" in lines


def test_demo_verbose_prints_the_instruments_per_day_and_every_fold(tmp_path: Path) -> None:
    profile = _tiny_profile(tmp_path)
    args = ["demo", *SMALL_MARKET, "--profile", str(profile), "--store", str(tmp_path)]

    lines = _invoke([*args, "--verbose", "-q"]).output.splitlines()

    assert "Instruments (6)" in lines
    assert "Records/volume per trading day" in lines
    assert sum(line.startswith("1 ") for line in lines) == 8


def test_demo_json_prints_one_object_of_every_step(tmp_path: Path) -> None:
    args = ["demo", *SMALL_MARKET, "--no-train", "--json", "-q", "--store", str(tmp_path)]

    result = CliRunner().invoke(cli, args, catch_exceptions=False)

    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert list(data) == ["synth", "scan", "ingest", "precompute", "train"]
    assert (data["synth"]["is_up_to_date"], len(data["synth"]["files"])) == (False, 30)
    assert (data["ingest"]["n_bars"], data["precompute"]["n_rows"]) == (940, 724)
    assert data["train"] is None
