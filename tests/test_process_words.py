"""The project speaks of itself, never of how it was built.

Every tracked text file (code, comments, docs, tests, bench scripts, bench results,
profiles, examples) is searched for the words of a development process: numbered work
sessions or turns, numbered tracker issues, waves of work. Trading sessions ("the session
open", "per-session", "CME sessions") are the product's own words and stay allowed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

REPO: Final = Path(__file__).resolve().parents[1]
#: Files that are data, not text (the binary check below catches the rest).
_BINARY_SUFFIXES: Final = (".parquet", ".arrow", ".zst", ".dbn", ".png", ".npz")
PROCESS_WORDS: Final = re.compile(
    r"\b(?:session|turn)s? [0-9]+\b"  # a numbered work session or turn
    r"|\(session [0-9]"
    r"|\bsession-[0-9]+"
    r"|\bissues? #?[0-9]+"  # a tracker's issue number
    r"|\b(?:first|second|third|next|last|this|that) wave\b|\bwave [0-9]+",
    re.IGNORECASE,
)


#: Folders of a source tree that are not its sources (where git cannot list what it tracks).
_NOT_SOURCES: Final = frozenset({"data", "site", "build", "dist", "node_modules", "__pycache__"})


def _tracked_files() -> list[Path]:
    """The files git tracks; without git (a source archive), every file of the tree but
    hidden folders, build outputs and data."""
    listed = None
    if shutil.which("git") is not None:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False
        )
    if listed is not None and listed.returncode == 0:
        names = [REPO / n for n in listed.stdout.decode().split("\0") if n]
    else:
        names = [
            path
            for path in REPO.rglob("*")
            if path.is_file()
            and not any(
                part.startswith(".") or part in _NOT_SOURCES or part.endswith(".egg-info")
                for part in path.relative_to(REPO).parts[:-1]
            )
        ]
    return [path for path in names if not path.name.endswith(_BINARY_SUFFIXES)]


def _text_lines(path: Path) -> list[str]:
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):  # deleted in the working tree, a submodule
        return []
    if b"\0" in data[:8192]:
        return []
    return data.decode("utf-8", errors="replace").splitlines()


def test_tracked_text_files_hold_no_words_of_the_development_process() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}"
        for path in _tracked_files()
        for number, line in enumerate(_text_lines(path), start=1)
        if PROCESS_WORDS.search(line)
    ]

    assert found == [], "words of how the project was built:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text",
    [
        "CHANGELOG " + "Noticed (session" + " 9)",
        "measured in " + "session" + " 16",
        "the market before " + "session" + " 7",
        "fixed for " + "issue" + " 20",
        "see " + "issue" + " #16",
        "a demo store of the " + "session" + "-8 range",
        "landed in the second " + "wave",
        "in " + "turn" + " 3",
    ],
)
def test_process_words_are_found(text: str) -> None:
    assert PROCESS_WORDS.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "at the session open",
        "a per-session reset of the book",
        "CME sessions side by side",
        "the session from 17:00 to 16:00 CT",
        "each session's pre-open",
        "worker counts taking turns",
        "less than one wave of the GPU's SMs",
        "Waves Per SM",
    ],
)
def test_trading_sessions_and_other_senses_are_allowed(text: str) -> None:
    assert not PROCESS_WORDS.search(text)


def test_without_git_the_tree_is_read_but_not_its_hidden_folders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)

    files = _tracked_files()

    assert REPO / "README.md" in files and Path(__file__) in files
    assert not any(part.startswith(".") for f in files for part in f.relative_to(REPO).parts[:-1])
