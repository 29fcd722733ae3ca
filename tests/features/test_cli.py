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
    assert first.output.startswith("Precomputed 1 features and 3 targets over 1,207 bars")
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
        f"Error: {missing}: cannot read the feature-set file ([Errno 2] No such file or "
        f"directory: '{missing}').\n"
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
