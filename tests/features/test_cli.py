"""CLI: precompute, ls and info; exact error lines for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fxstore.cli import cli
from tests.features.conftest import INGEST

pytestmark = pytest.mark.quick


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_precompute_then_up_to_date_then_force(store: Path, tmp_path: Path) -> None:
    features = tmp_path / "small.toml"
    features.write_text("[settings]\nvol_window = 20\n[[features]]\nname = 'spread'\n")
    args = ["precompute", "--symbol", "ES.FUT", "--features", str(features), "--store", str(store)]

    first = CliRunner().invoke(cli, args, catch_exceptions=False)
    again = CliRunner().invoke(cli, args, catch_exceptions=False)
    forced = CliRunner().invoke(cli, [*args, "--force", "--json"], catch_exceptions=False)

    assert first.exit_code == again.exit_code == forced.exit_code == 0
    assert first.output.startswith("Precomputed 1 features and 5 targets over 1,207 bars")
    assert again.output.startswith("Up to date: ")
    summary = json.loads(forced.output)
    assert summary["up_to_date"] is False and summary["n_bars"] == 1207
    assert summary["warmup_rows_dropped"] == 20 and summary["tail_rows_dropped"] == 16


def test_ls_and_info_show_bars_and_cache(cached_store: Path) -> None:
    listing = CliRunner().invoke(cli, ["ls", "--store", str(cached_store)], catch_exceptions=False)
    info = CliRunner().invoke(
        cli, ["info", "ES.FUT", "--store", str(cached_store)], catch_exceptions=False
    )
    info_json = CliRunner().invoke(
        cli, ["info", "ES.FUT", "--json", "--store", str(cached_store)], catch_exceptions=False
    )

    assert listing.exit_code == info.exit_code == info_json.exit_code == 0
    assert f"ES.FUT  mbp10_front_month/{INGEST.bars.key}  1,207 bars, 90 days" in listing.output
    manifest = json.loads(info_json.output)
    assert f"ES.FUT  {manifest['featureset']['hash']}  " in listing.output
    assert info.output.startswith(f"ES.FUT fxcache {manifest['featureset']['hash']} (fxcache/1")
    assert manifest["n_rows"] == 1207 - 216


def test_ls_empty_store_says_what_to_run(tmp_path: Path) -> None:
    code, output = _run("ls", "--store", str(tmp_path))

    assert code == 0
    assert "(none: run `fxstore ingest`)" in output and "(none: run `fxstore precompute`)" in output


def test_precompute_unknown_symbol_fails_with_one_error_line(store: Path) -> None:
    code, output = _run("precompute", "--symbol", "NQ.FUT", "--store", str(store))

    assert code == 1
    assert output == (
        f"Error: No bars for symbol 'NQ.FUT' in {store / 'bars'}; known: ES.FUT. "
        "Run `fxstore ingest` first.\n"
    )


def test_precompute_missing_features_file_fails_naming_it(store: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"

    code, output = _run("precompute", "--features", str(missing), "--store", str(store))

    assert code == 1
    assert output == (
        f"Error: no feature-set file '{missing}' and no built-in set of that name: give a "
        "TOML file or one of default, classic.\n"
    )


def test_precompute_bad_features_file_fails_naming_entry(store: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[[features]]\nname = 'r'\nkind = 'log_return'\nhorizon = 0\n")

    code, output = _run("precompute", "--features", str(path), "--store", str(store))

    assert code == 1
    assert output == (f"Error: {path}: feature 'r' (log_return): `horizon` must be >= 1, was 0.\n")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["info", "NQ.FUT"], "Error: No fxcache for symbol 'NQ.FUT' in {root}; known: ES.FUT. "
         "Run `fxstore precompute --symbol NQ.FUT` first.\n"),
        (["info", "ES/FUT"], "Error: `symbol` may hold only letters, digits, '.', '_' and '-' "
         "(and is not '.' or '..'), was 'ES/FUT'.\n"),
    ],
)  # fmt: skip
def test_info_bad_symbol_fails_with_one_error_line(
    cached_store: Path, args: list[str], expected: str
) -> None:
    code, output = _run(*args, "--store", str(cached_store))

    assert code == 1
    assert output == expected.format(root=cached_store)


def test_info_versions_lists_the_bar_series_versions(store: Path) -> None:
    result = CliRunner().invoke(
        cli, ["info", "ES.FUT", "--versions", "--store", str(store)], catch_exceptions=False
    )
    as_json = CliRunner().invoke(
        cli, ["info", "ES.FUT", "--versions", "--json", "--store", str(store)]
    )

    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith(f"ES.FUT mbp10_front_month/{INGEST.bars.key} (")
    assert lines[1].startswith("  v1 ") and "1,207 bars, 90 days" in lines[1]
    assert lines[1].endswith("[current]")
    (series,) = json.loads(as_json.output)
    assert [v["version"] for v in series["versions"]] == [1]


def test_info_versions_unknown_symbol_is_one_error_line(store: Path) -> None:
    code, output = _run("info", "NQ.FUT", "--versions", "--store", str(store))

    assert code == 1
    assert output.strip().splitlines() == [
        f"Error: No bars for symbol 'NQ.FUT' in {store / 'bars'}; known: ES.FUT. "
        "Run `fxstore ingest` first."
    ]


def test_gc_lists_by_default_and_keeps_the_current_version(store: Path) -> None:
    result = CliRunner().invoke(cli, ["gc", "--keep", "1", "--store", str(store)])
    deleted = CliRunner().invoke(cli, ["gc", "--keep", "1", "--delete", "--store", str(store)])

    assert result.exit_code == deleted.exit_code == 0
    assert "kept " in result.output and "(v1): the current version" in result.output
    assert result.output.splitlines()[-1] == "Would delete 0 versions, 0 bytes."
    assert deleted.output.splitlines()[-1] == "Deleted 0 versions, 0 bytes."


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ([], "Error: give --keep N or --older-than TIME (or both) to say what to delete."),
        (
            ["--older-than", "soon"],
            "Error: `--older-than` must be an ISO date or time (2024-06-01, 2024-06-01T12:00Z) "
            "or an age (30d, 12h), was 'soon'.",
        ),
        (
            ["--caches", "--keep", "2"],
            "Error: --caches prunes fxcaches by what reads them: drop --keep and --older-than "
            "(they choose bar versions).",
        ),
    ],
)
def test_gc_bad_rule_is_one_error_line(store: Path, args: list[str], line: str) -> None:
    code, output = _run("gc", *args, "--store", str(store))

    assert code == 1 and output.strip().splitlines() == [line]


SLOW = """
[settings]
vol_window = 20

[[features]]
name = "trade_imb"

[[features]]
name = "flow_ema8"
expr = "ema(trade_imb, 8)"

[[features]]
name = "flow_z"
expr = "clip(rolling_zscore(flow_ema8, 16), -3, 3)"
reset = "session"
"""


def test_precompute_of_expressions_then_features_show_loads_back_to_the_same_cache(
    store: Path, tmp_path: Path
) -> None:
    path = tmp_path / "slow.toml"
    path.write_text(SLOW)
    args = ["--symbol", "ES.FUT", "--store", str(store)]

    built = CliRunner().invoke(
        cli, ["precompute", "--features", str(path), "--json", *args], catch_exceptions=False
    )
    key = Path(json.loads(built.output)["out_dir"]).name
    shown = CliRunner().invoke(cli, ["features", "show", key, *args], catch_exceptions=False)
    again_path = tmp_path / "shown.toml"
    again_path.write_text(shown.output)
    again = CliRunner().invoke(
        cli, ["precompute", "--features", str(again_path), *args], catch_exceptions=False
    )

    assert built.exit_code == shown.exit_code == again.exit_code == 0
    assert json.loads(built.output)["n_features"] == 3
    assert shown.output.startswith(f"# Feature set of fxcache {key} (ES.FUT), from ")
    assert (
        'expr = "clip(rolling_zscore(flow_ema8, 16), -3, 3)"\nreset = "session"\n' in shown.output
    )
    assert again.output.startswith(f"Up to date: {store / 'fxcache' / 'ES.FUT' / key} ")


def test_features_show_unknown_key_is_one_error_line(cached_store: Path) -> None:
    code, output = _run("features", "show", "0000000000000000", "--store", str(cached_store))

    assert code == 1
    assert output.startswith(
        f"Error: No fxcache '0000000000000000' in {cached_store / 'fxcache'}; known: ES.FUT/"
    )
    assert output.count("\n") == 1


@pytest.mark.parametrize(
    ("entry", "line"),
    [
        (
            'name = "x"\nexpr = "ema(trade_imbalance, 8)"',
            "feature 'x': unknown name 'trade_imbalance' in 'ema(trade_imbalance, 8)'; use a bar "
            "column (close, vwap, volume, buy_volume, sell_volume, n_trades, bid_px_00, "
            "ask_px_00, bid_sz_NN, ask_sz_NN, ofi_NN with NN = 00..09) or a feature of the set.",
        ),
        ('name = "x"\nexpr = "x * 2"', "feature 'x': its expr depends on itself (x -> x)."),
        ('name = "x"\nexpr = "ema(close, 0)"', "feature 'x': ema's `span` must be >= 1, was 0."),
        (
            'name = "x"\nexpr = "rolling_mean(close, -5)"',
            "feature 'x': rolling_mean's `window` must be >= 1, was -5.",
        ),
        (
            'name = "x"\nexpr = "lag(close, 2.5)"',
            "feature 'x': lag's `k` must be a whole number >= 1, was 2.5.",
        ),
        (
            'name = "x"\nexpr = "lag(close, -1)"',
            "feature 'x': lag's `k` must be >= 1, was -1 (it would read the future).",
        ),
        (
            'name = "x"\nexpr = "fwd_4 * 2"',
            "feature 'x': 'fwd_4' is a target (it looks ahead); a feature may not read it.",
        ),
        (
            'name = "x"\nexpr = "median(close, 5)"',
            "feature 'x': unknown function 'median'; known: ema, rolling_mean, rolling_std, "
            "rolling_sum, rolling_min, rolling_max, rolling_zscore, lag, diff, clip.",
        ),
        (
            'name = "x"\nexpr = "ema(close)"',
            "feature 'x': ema takes 2 arguments (x, span), got 1.",
        ),
        (
            'name = "x"\nexpr = "close ** 2"',
            "feature 'x': 'close ** 2' is not allowed: expressions use names, numbers, + - * /, "
            "unary minus and the functions ema, rolling_mean, rolling_std, rolling_sum, "
            "rolling_min, rolling_max, rolling_zscore, lag, diff, clip.",
        ),
    ],
)
def test_precompute_bad_expression_is_one_error_line_before_any_work(
    store: Path, tmp_path: Path, entry: str, line: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(f"[[features]]\nname = 'spread'\n[[features]]\n{entry}\n")

    result = CliRunner().invoke(cli, ["precompute", "--features", str(path), "--store", str(store)])

    assert result.exit_code == 1
    assert result.output == f"Error: {path}: {line}\n"
    assert not (store / "fxcache").exists()


@pytest.mark.parametrize(
    ("name", "n_features", "n_targets", "shown", "absent"),
    [
        (
            "features_slow.toml",
            44,
            5,
            (
                "    f_flow_ema128        = ema(trade_imb, 128)\n",
                "    f_flow_day_ema32     = ema(trade_imb, 32)  (reset session)\n",
            ),
            (),
        ),
        ("features_flow.toml", 22, 5, ("    f_signed_vol_ema256",), ("f_ret_1",)),
    ],
)
def test_an_example_set_builds_and_is_listed(
    store: Path,
    name: str,
    n_features: int,
    n_targets: int,
    shown: tuple[str, ...],
    absent: tuple[str, ...],
) -> None:
    example = Path(__file__).parents[2] / "examples" / name
    args = ["--store", str(store)]

    built = CliRunner().invoke(
        cli,
        ["precompute", "--symbol", "ES.FUT", "--features", str(example), "--json", *args],
        catch_exceptions=False,
    )
    key = Path(json.loads(built.output)["out_dir"]).name
    listing = CliRunner().invoke(cli, ["ls", *args], catch_exceptions=False)
    info = CliRunner().invoke(
        cli, ["info", "ES.FUT", "--featureset", key, *args], catch_exceptions=False
    )

    assert built.exit_code == listing.exit_code == info.exit_code == 0
    assert json.loads(built.output)["n_features"] == n_features
    assert json.loads(built.output)["n_targets"] == n_targets
    assert f"ES.FUT  {key}  " in listing.output
    assert all(line in info.output for line in shown)
    assert not any(text in info.output for text in absent)


@pytest.mark.parametrize("horizon", [0, 300])
def test_precompute_bad_target_horizon_is_one_error_line_before_any_work(
    store: Path, tmp_path: Path, horizon: int
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        "[[features]]\nname = 'spread'\n"
        f"[[targets]]\nname = 'far'\nkind = 'forward_return'\nhorizon = {horizon}\n"
    )

    result = CliRunner().invoke(cli, ["precompute", "--features", str(path), "--store", str(store)])

    assert result.exit_code == 1
    assert result.output == (
        f"Error: {path}: target 'far' (forward_return): `horizon` must be >= 1 and <= 256, "
        f"was {horizon}.\n"
    )
    assert not (store / "fxcache").exists()
