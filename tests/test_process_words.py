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


def _tracked_files() -> list[Path]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no list of tracked files")
    names = [n for n in listed.stdout.decode().split("\0") if n]
    return [REPO / n for n in names if not n.endswith(_BINARY_SUFFIXES)]


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
