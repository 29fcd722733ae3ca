"""The README and the documentation site as a fresh machine meets them: their commands run,
their numbers and links hold.

Each walk-through runs the quick start's ``fxstore demo`` (its default market; without its
smoke training, which the Python blocks run again) in a temporary folder, then every
``fxstore`` command of the ``bash`` blocks (the README's after the quick start; the site's
pages in the order of mkdocs.yml's nav), in order, as a user would type them (through bash,
so redirections work), then the Python blocks. Commands on paths only a user has
(``~/databento/...``) are left out; commands that need real data, credentials, a cluster or
hours of a GPU are shown in ``sh`` or ``console`` blocks, which are not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from fxstore.train.profiles import load_profile

REPO: Final = Path(__file__).parents[2]
README: Final = REPO / "README.md"
DOCS: Final = REPO / "docs"
#: The page whose table says how many trading days each profile's first fold needs.
PROFILE_TABLE_PAGE: Final = DOCS / "guide" / "training.md"
#: The run ids the README's examples name; the walk-through uses its own train run's.
_README_RUN_ID: Final = re.compile(r"\b\d{8}T\d{6}Z-train\b")
#: Training settings appended to `fxstore train` commands so the walk-through fits CI's
#: minutes on 2 CPU cores: the command, its profile's folds and its run folder are what is
#: tested here, not how well the agent learns (tests/train/test_learning.py).
CI_TRAIN_SIZES: Final = "--env-steps 300 --n-envs 8 --batch-size 64 --replay-size 5000"


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def _commands(blocks: list[str]) -> list[str]:
    commands = []
    for block in blocks:
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command.startswith("fxstore ") and "~/" not in command:
                commands.append(command)
    return commands


def readme_commands() -> list[str]:
    """The ``fxstore`` command lines of the bash blocks after the quick start's, in order."""
    text = README.read_text()
    after_quick_start = text[text.index("## Quick start") :]
    return _commands(_blocks(after_quick_start, "bash")[1:])


def doc_pages() -> list[Path]:
    """The site's pages in the order of mkdocs.yml's nav."""
    nav = (REPO / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    return [DOCS / name for name in re.findall(r"^\s+- [^:]+: (\S+\.md)$", nav, re.MULTILINE)]


def docs_commands() -> list[str]:
    """The ``fxstore`` command lines of the site's bash blocks, page by page in nav order."""
    return _commands([block for page in doc_pages() for block in _blocks(page.read_text(), "bash")])


def test_readme_shows_the_commands_the_walk_through_runs() -> None:
    commands = readme_commands()

    assert "fxstore backtest --symbol ES.FUT --train-days 60 --test-days 20" in commands
    assert "fxstore train --symbol ES.FUT --profile default" in commands
    assert any(c.startswith("fxstore features") for c in commands)


def test_docs_show_the_commands_of_every_user_guide_page() -> None:
    commands = docs_commands()

    assert "fxstore ls" in commands
    assert any(c.startswith("fxstore rolls ") for c in commands)
    assert any(c.startswith("fxstore train --symbol ES.FUT") for c in commands)
    assert commands.index("fxstore runs") > commands.index("fxstore ls")


def test_docs_nav_names_every_page_and_only_existing_ones() -> None:
    pages = doc_pages()

    assert all(page.exists() for page in pages)
    assert set(pages) == set(DOCS.rglob("*.md"))


def test_profile_table_gives_each_profiles_days_for_one_fold() -> None:
    rows = re.findall(
        r"^\| `(\w+)` \| (\d+) \((\d+)\)[^|]* \| (\d+) \| (\d+) \| (\d+) \|$",
        PROFILE_TABLE_PAGE.read_text(),
        flags=re.MULTILINE,
    )

    table = {name: tuple(int(v) for v in values) for name, *values in rows}
    expected = {}
    for name in ("smoke", "default", "production"):
        wf = load_profile(name).walkforward
        embargo = wf.days_needed() - wf.train_days - wf.test_days
        expected[name] = (
            wf.train_days,
            wf.validation_days,
            embargo,
            wf.test_days,
            wf.days_needed(),
        )
    assert table == expected


def _markdown_files() -> list[Path]:
    return [README, REPO / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_markdown_links_stay_in_the_repository_and_exist(path: Path) -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", path.read_text())

    outside = []
    for link in links:
        if re.match(r"[a-z]+://|mailto:|#", link):
            continue
        target = (path.parent / link.split("#")[0]).resolve()
        if not target.is_relative_to(REPO.resolve()) or not target.exists():
            outside.append(link)
    assert outside == []


def _shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _latest_train_run(store: Path) -> str:
    runs = sorted(p.name for p in (store / "runs").iterdir() if p.name.endswith("-train"))
    return runs[-1]


def _user_env(bin_dir: Path) -> dict[str, str]:
    """A user's environment: the ``fxstore`` console script on PATH, no FXSTORE_HOME."""
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "fxstore"  # the console script a pip install puts on PATH
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m fxstore "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "FXSTORE_HOME"}
    env |= {"PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "PYTHONPATH": str(REPO)}
    env |= {"OPENBLAS_NUM_THREADS": "1"}  # a busy 2-core CI box: no BLAS threads spinning
    return env


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where ``fxstore demo`` ran (without its training), built once per module."""
    root = tmp_path_factory.mktemp("demo")
    home = root / "home"
    home.mkdir()
    demo = _shell("fxstore demo -q --no-train", home, _user_env(root / "bin"))
    assert demo.returncode == 0, demo.stderr
    assert "Precomputed 51 features and 5 targets" in demo.stdout
    return home


def _walk_through(
    demo_home: Path, tmp_path: Path, commands: list[str], python_blocks: list[str]
) -> list[str]:
    """In a copy of `demo_home`, run `commands`, then `python_blocks`; return their outputs.

    The copy hard-links the demo's files: fxstore replaces a file by renaming a new one into
    place, never by writing into it, so the demo's own folder stays as the demo left it.
    """
    env = _user_env(tmp_path / "bin")
    home = tmp_path / "home"
    shutil.copytree(demo_home, home, copy_function=os.link)

    for command in commands:
        if _README_RUN_ID.search(command):
            command = _README_RUN_ID.sub(_latest_train_run(home / "data"), command)
        elif command.startswith("fxstore train"):
            command += f" {CI_TRAIN_SIZES}"
        result = _shell(command, home, env)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"

    outputs = []
    for number, block in enumerate(python_blocks):
        script = home / f"block_{number}.py"
        script.write_text(block)
        result = _shell(f'"{sys.executable}" {script.name}', home, env)
        assert result.returncode == 0, f"{block}\n{result.stderr}"
        outputs.append(result.stdout)
    return outputs


@pytest.mark.slow
def test_readme_walk_through_on_the_demo_store(demo_home: Path, tmp_path: Path) -> None:
    (python_block,) = _blocks(README.read_text(), "python")

    (output,) = _walk_through(demo_home, tmp_path, readme_commands(), [python_block])

    assert "oracle" in output


@pytest.mark.slow
def test_docs_walk_through_on_the_demo_store(demo_home: Path, tmp_path: Path) -> None:
    python_blocks = [block for page in doc_pages() for block in _blocks(page.read_text(), "python")]

    _walk_through(demo_home, tmp_path, docs_commands(), python_blocks)


@pytest.mark.slow
def test_readme_feature_set_example_builds_trains_and_is_listed(
    demo_home: Path, tmp_path: Path
) -> None:
    text = README.read_text()
    section = text[text.index("## Your own features") :]
    (toml,) = _blocks(section[: section.index("\n## ", 1)], "toml")
    (commands,) = _blocks(section[: section.index("\n## ", 1)], "sh")
    name = toml.splitlines()[0].removeprefix("# ").strip()
    env = _user_env(tmp_path / "bin")
    home = tmp_path / "home"
    shutil.copytree(demo_home, home, copy_function=os.link)
    (home / name).write_text(toml)

    key = ""
    for command in _commands([commands]):
        if "KEY" in command:
            command = command.replace("KEY", key)
        if command.startswith("fxstore train"):
            command += f" {CI_TRAIN_SIZES}"
        result = _shell(command, home, env)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        if command.startswith("fxstore precompute"):
            assert result.stdout.startswith("Precomputed 4 features and 5 targets"), result.stdout
            found = re.search(r"fxcache/ES\.FUT/([0-9a-f]{16})", result.stdout)
            assert found is not None, result.stdout
            key = found.group(1)
        if command.startswith("fxstore ls"):
            assert key in result.stdout
        if command.startswith("fxstore features show"):
            assert 'expr = "rolling_zscore(trade_imb, 64)"' in result.stdout
