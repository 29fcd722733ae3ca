"""kill -9 in the middle of ingest, precompute and train, then resume: the bytes of a clean run.

Each case runs the stage in a subprocess that SIGKILLs itself just before an atomic write's
rename (tests/faults/_killer.py), so a complete temporary file is left behind, as a power cut
would leave it; the next run must remove it and finish with the same files as a run that was
never interrupted. Two writers started together on one series must both succeed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fxstore.config import FeatureConfig
from fxstore.features.precompute import precompute
from fxstore.ingest.run.pipeline import ingest
from fxstore.store import SERIES_FORMAT
from fxstore.train.loop import train
from tests.conftest import SynthMarket
from tests.faults.conftest import INGEST
from tests.train._tiny import TINY

_REPO = Path(__file__).resolve().parents[2]
#: Files that are no output: the lock, and nothing else may differ.
_NOT_OUTPUT = {".lock"}


def _kill(*args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(_REPO)}
    return subprocess.run(
        [sys.executable, "-m", "tests.faults._killer", *args],
        cwd=_REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _files(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` by relative path (the lock file left out; a bar series'
    manifest without its commit times, which differ from run to run)."""
    return {
        p.relative_to(folder).as_posix(): _without_commit_times(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in _NOT_OUTPUT
    }


def _without_commit_times(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name != "manifest.json" or SERIES_FORMAT.encode() not in data:
        return data
    series = json.loads(data)
    for version in series["versions"]:
        del version["committed_ns"], version["committed_at"]
    return json.dumps(series, sort_keys=True).encode()


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*.tmp"))


@pytest.mark.parametrize(
    ("name", "n"),
    [
        (".parquet", 1),  # the first day file
        (".parquet", 40),  # in the middle of the days
        ("manifest.json", 1),  # every day written, the version's manifest not yet
        ("manifest.json", 2),  # the version's manifest written, its commit not yet
    ],
)
def test_ingest_killed_then_rerun_gives_the_bytes_of_a_clean_run(
    two_roll_market: SynthMarket, clean_store: Path, tmp_path: Path, name: str, n: int
) -> None:
    killed = _kill(name, str(n), "ingest", str(two_roll_market.folder), str(tmp_path))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _temps(tmp_path / "bars"), "the kill must leave a temporary file behind"

    ingest(INGEST, [two_roll_market.folder], tmp_path)

    assert _temps(tmp_path / "bars") == []
    assert _files(tmp_path / "bars") == _files(clean_store / "bars")


def test_precompute_killed_before_its_manifest_then_rerun_gives_the_same_bytes(
    store_copy: Path, clean_store: Path
) -> None:
    shutil.rmtree(store_copy / "fxcache")
    killed = _kill("manifest.json", "1", "precompute", str(store_copy))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _temps(store_copy / "fxcache")

    precompute(FeatureConfig(), store_copy)

    assert _temps(store_copy / "fxcache") == []
    assert _files(store_copy / "fxcache") == _files(clean_store / "fxcache")


def test_train_killed_at_a_checkpoint_then_resumed_gives_the_uninterrupted_results(
    store_copy: Path,
) -> None:
    killed = _kill("checkpoint.npz", "2", "train", str(store_copy))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (run,) = (store_copy / "runs").iterdir()
    assert _temps(run)

    resumed = train(TINY, store_copy, resume=run.name)
    clean = train(TINY, store_copy)

    assert _temps(run) == []
    for fold in ("fold00", "fold01"):
        assert (run / fold / "results.npz").read_bytes() == (
            clean.run_dir / fold / "results.npz"
        ).read_bytes()
    totals = json.loads((run / "metrics.json").read_text())["totals"]
    assert totals == json.loads((clean.run_dir / "metrics.json").read_text())["totals"]
    assert resumed.run_dir == run


def test_two_concurrent_ingests_of_one_series_both_succeed_with_clean_bytes(
    two_roll_market: SynthMarket, clean_store: Path, tmp_path: Path
) -> None:
    args = ("never", "0", "ingest", str(two_roll_market.folder), str(tmp_path))
    env = os.environ | {"PYTHONPATH": str(_REPO)}
    command = [sys.executable, "-m", "tests.faults._killer", *args]
    procs = [
        subprocess.Popen(command, cwd=_REPO, env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]

    assert [p.returncode for p in procs] == [0, 0], errors
    assert _files(tmp_path / "bars") == _files(clean_store / "bars")
