"""``fxstore report``: a self-contained HTML page of a run, checked as text and in a browser."""

from __future__ import annotations

import html
import html.parser
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fxstore import __version__
from fxstore.cli import cli
from fxstore.config import BacktestConfig, EnvConfig, WalkForwardConfig
from fxstore.errors import InvalidInputError
from fxstore.store import atomic_write_json, file_sha256, fxcache_dir, run_dir
from fxstore.train.env.market import Market
from fxstore.train.evaluate.results import BacktestResult, policy_totals
from fxstore.train.runs.backtest import run_backtest
from fxstore.train.runs.report import find_run, render_report, write_report
from tests.train.test_plots import results_of

RUN_ID = "20240607T120000Z-train"
SHA = "ab" * 32
BARS_SHA = "cd" * 32
#: A policy name and a config value that would break the page were they not escaped.
HOSTILE = '<script>alert("x")</script>&'


def _fake_market() -> Market:
    n = 4
    return Market(
        features=np.zeros((n, 1), np.float32),
        close=np.zeros(n),
        half_spread=np.zeros(n),
        is_roll=np.zeros(n, bool),
        trading_day=np.zeros(n, np.int32),
        feature_names=("f_x",),
        bars_per_day=20.0,
    )


def make_run(root: Path, *, finished: bool = True, plots: bool = True) -> Path:
    """A train run folder by hand: config, per-fold and total metrics, plots, an fxcache."""
    from fxstore.train.runs.plots import plot_equity, plot_equity_all

    cache = fxcache_dir(root, "ES.FUT", "9c924334e90ae682")
    cache.mkdir(parents=True)
    source = {"bars_dir": "bars/ES.FUT/x/y", "bar_version": 3, "manifest_sha256": BARS_SHA}
    atomic_write_json(cache / "manifest.json", {"source": source, "fxstore_version": "0.1"})
    folder = run_dir(root, RUN_ID)
    folder.mkdir(parents=True)
    facts = {
        "symbol": "ES.FUT",
        "key": cache.name,
        "manifest_sha256": file_sha256(cache / "manifest.json"),
    }
    record = {
        "kind": "train",
        "config": {"symbol": "ES.FUT", "note": HOSTILE},
        "fxcache": facts,
        "fxstore_version": __version__,
        "config_sha256": SHA,
    }
    atomic_write_json(folder / "config.json", record)
    results = results_of(("agent", "flat", HOSTILE), n_folds=2)
    totals = policy_totals(results, _fake_market(), capital=100_000.0, seed=0)
    result = BacktestResult(
        folder, "ES.FUT", cache.name, ("agent", "flat", HOSTILE), tuple(results), totals
    )
    for entry in result.to_json()["folds"]:  # type: ignore[attr-defined]
        fold = folder / f"fold{entry['fold']['index']:02d}"
        atomic_write_json(fold / "metrics.json", entry)
        if finished or entry["fold"]["index"] == 0:  # unfinished: fold 1 lacks results.npz
            np.savez(fold / "results.npz", trading_day=np.zeros(1, np.int32))
    if finished:
        atomic_write_json(folder / "metrics.json", result.to_json())
    if plots:
        for index in (0, 1):
            mine = {r.policy: r for r in results if r.fold.index == index}
            plot_equity(folder / f"fold{index:02d}" / "equity.png", mine["agent"].fold, mine)
        plot_equity_all(folder / "equity_all.png", results, totals)
    return folder


class _Page(html.parser.HTMLParser):
    """Every tag's attributes and the text of every table cell."""

    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[tuple[str, str, str]] = []
        self.cells: list[str] = []
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        self._in_cell = tag in ("td", "th")

    def handle_endtag(self, tag: str) -> None:
        self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.cells.append(data)


def parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    return parser


# --- the page -------------------------------------------------------------------------------


def test_write_report_default_goes_into_the_run_folder(tmp_path: Path) -> None:
    folder = make_run(tmp_path)

    path = write_report(tmp_path, RUN_ID)

    assert path == folder / "report.html"
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_report_is_self_contained_no_external_url(tmp_path: Path) -> None:
    page = render_report(tmp_path, make_run(tmp_path))

    links = [(t, k, v) for t, k, v in parse(page).attrs if k in ("src", "href")]
    assert len(links) == 3  # equity_all.png and two folds, each embedded
    assert all(v.startswith("data:image/png;base64,") for _, _, v in links)
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    assert not re.search(r"(?i)(https?:)?//[a-z0-9]", text)  # nor in a style or a value
    assert "<link" not in page and "@import" not in page


def test_report_escapes_every_value_from_the_run(tmp_path: Path) -> None:
    page = render_report(tmp_path, make_run(tmp_path))

    assert "<script" not in page
    assert html.escape(HOSTILE, quote=True) in page
    assert HOSTILE in parse(page).cells  # the policy's name, read back as the text it was


def test_report_holds_checksums_versions_and_bar_version(tmp_path: Path) -> None:
    folder = make_run(tmp_path)
    recorded = json.loads((folder / "config.json").read_text())["fxcache"]["manifest_sha256"]

    cells = parse(render_report(tmp_path, folder)).cells

    assert recorded in cells and BARS_SHA in cells and SHA in cells
    assert "3" in cells  # the bar series version
    assert __version__ in cells
    assert any(c.endswith(": unchanged") for c in cells)


def test_report_says_when_the_fxcache_changed_since_the_run(tmp_path: Path) -> None:
    folder = make_run(tmp_path)
    manifest = fxcache_dir(tmp_path, "ES.FUT", "9c924334e90ae682") / "manifest.json"
    manifest.write_text('{"source": {}}')

    cells = parse(render_report(tmp_path, folder)).cells

    assert any("CHANGED since the run" in c for c in cells)


def test_report_tables_hold_totals_and_every_fold_and_policy(tmp_path: Path) -> None:
    page = render_report(tmp_path, make_run(tmp_path))

    assert page.count("<table>") == 1 + 2 + 1  # totals, two folds, data
    assert "fold 1: test" in page and "fold 2: test" in page
    cells = parse(page).cells
    assert cells.count("agent") == 3 and cells.count("flat") == 3


def test_report_of_an_unfinished_run_shows_its_finished_folds(tmp_path: Path) -> None:
    page = render_report(tmp_path, make_run(tmp_path, finished=False))

    assert "has not finished" in page
    # fold 1 wrote its metrics but not its results.npz: not finished, not shown
    assert page.count("<table>") == 1 + 1  # fold 0, data


def test_report_of_a_run_without_plots_says_so(tmp_path: Path) -> None:
    page = render_report(tmp_path, make_run(tmp_path, plots=False))

    assert "no equity plots" in page and "<img" not in page


def test_report_of_a_backtest_run(store: Path, tmp_path: Path) -> None:
    walkforward = WalkForwardConfig(train_days=20, test_days=10)
    config = BacktestConfig(policies=("flat", "long"), env=EnvConfig(), walkforward=walkforward)
    result = run_backtest(config, store)

    path = write_report(store, result.run_dir.name, tmp_path / "out" / "backtest.html")

    page = path.read_text(encoding="utf-8")
    assert f"fxstore backtest {result.run_dir.name}" in page
    assert page.count("<img") == 1 + len({r.fold.index for r in result.folds})
    assert result.to_json()["fxcache_key"] in parse(page).cells
    shutil.rmtree(result.run_dir)  # the store is shared by the module's tests


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["../runs", "a/b", "..", ""])
def test_find_run_refuses_an_id_that_leaves_runs(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(InvalidInputError, match="run id"):
        find_run(tmp_path, run_id)


def test_cli_report_unknown_run_prints_one_error_line_with_the_runs_there_are(
    tmp_path: Path,
) -> None:
    make_run(tmp_path)

    result = CliRunner().invoke(cli, ["report", "nope", "--store", str(tmp_path)])

    assert result.exit_code == 1
    assert result.output == (
        f"Error: no run 'nope' in {tmp_path / 'runs'} (the latest: {RUN_ID}); pass one of "
        "those, --store the store that holds it, or make one with `fxstore train` or "
        "`fxstore backtest`.\n"
    )


def test_cli_report_path_separator_in_run_id_prints_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "../etc", "--store", str(tmp_path)])

    assert result.exit_code == 1
    assert result.output.startswith("Error: `run id` may hold only letters")
    assert result.output.count("\n") == 1


def test_cli_report_writes_out_and_prints_its_path(tmp_path: Path) -> None:
    make_run(tmp_path)
    out = tmp_path / "page.html"

    result = CliRunner().invoke(
        cli, ["report", RUN_ID, "--store", str(tmp_path), "--out", str(out)], catch_exceptions=False
    )

    assert result.exit_code == 0
    assert result.output == f"Wrote {out}\n"
    assert out.is_file()


# --- in a real browser ----------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs chromium (apt-get install chromium)"
)


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


@needs_chromium
def test_report_loads_in_a_headless_browser_with_its_tables(tmp_path: Path) -> None:
    path = write_report(tmp_path, make_run(tmp_path).name)

    dom = _chromium("--dump-dom", path.as_uri()).stdout

    assert dom.count("<table>") == 4
    assert "Totals over every test window" in dom
    assert dom.count("<img") == 3


@needs_chromium
def test_report_screenshot_in_a_headless_browser_is_not_blank(tmp_path: Path) -> None:
    from matplotlib.image import imread

    path = write_report(tmp_path, make_run(tmp_path).name)
    shot = tmp_path / "shot.png"

    _chromium(f"--screenshot={shot}", "--window-size=1280,2000", path.as_uri())

    pixels = (imread(shot)[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours = np.unique(pixels, axis=0)
    non_white = np.any(pixels < 245, axis=1).mean()
    assert len(colours) > 200  # text, table shading and the plots' curves
    assert non_white > 0.05
