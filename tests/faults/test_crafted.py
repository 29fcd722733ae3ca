"""Crafted manifests and checkpoints: one ``Error:`` line naming the file and the field, never a
ValueError or KeyError; ``fxstore ls`` lists the good series next to a damaged one."""

from __future__ import annotations

import json
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fxstore.train.agent.checkpoint import load_checkpoint, save_checkpoint
from tests.conftest import SynthMarket
from tests.faults._edit import edit_and_recommit
from tests.faults._inject import error_line, run_cli
from tests.faults.test_kill import _kill

_DAMAGED_MANIFEST = (
    "the manifest is damaged or was edited: re-run the command that wrote it with --force."
)
_DAMAGED_CHECKPOINT = "the checkpoint is damaged: move it aside to train this fold from its start."


def _edit_json(path: Path, edit: Callable[[dict[str, object]], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _bar_manifest(root: Path) -> Path:
    """The manifest of the current (only) version of the bar series."""
    (path,) = (root / "bars" / "ES.FUT").glob("*/*/v0001/manifest.json")
    return path


def _cache_manifest(root: Path) -> Path:
    (path,) = (root / "fxcache" / "ES.FUT").glob("*/manifest.json")
    return path


# --- manifests ---------------------------------------------------------------------------


def test_cli_info_bars_per_day_not_a_number_names_file_and_field(store_copy: Path) -> None:
    path = _cache_manifest(store_copy)
    _edit_json(path, lambda m: m.update(bars_per_day="abc"))

    line = error_line(run_cli("info", "ES.FUT", "--store", str(store_copy)))

    assert line == (
        f"Error: {path}: field `bars_per_day` must be a number, was 'abc'; {_DAMAGED_MANIFEST}"
    )


def _set_day(key: str, value: object) -> Callable[[dict[str, object]], None]:
    def edit(manifest: dict[str, object]) -> None:
        day = manifest["days"][0]  # type: ignore[index]
        if value is None:
            del day[key]
        else:
            day[key] = value

    return edit


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("n_bars", "x", "field `n_bars` must be a whole number, was 'x'"),
        ("n_records", None, "field `n_records` is missing"),
    ],
)
def test_cli_ingest_up_to_date_with_a_bad_day_entry_names_file_and_field(
    two_roll_market: SynthMarket, store_copy: Path, key: str, value: object, why: str
) -> None:
    path = _bar_manifest(store_copy)
    edit_and_recommit(path, _set_day(key, value))
    args = ["ingest", str(two_roll_market.folder), "--store", str(store_copy)]

    line = error_line(run_cli(*args, "--target-bars-per-day", "20", "--workers", "1", "-q"))

    assert line == f"Error: {path}: {why}; {_DAMAGED_MANIFEST}"


def test_cli_ls_lists_the_good_series_and_marks_the_damaged_one(store_copy: Path) -> None:
    good = _bar_manifest(store_copy).parent.parent
    bad = good.with_name("dib-b99-00000000")
    shutil.copytree(good, bad)
    edit_and_recommit(bad / "v0001" / "manifest.json", _set_day("n_bars", "x"))
    _edit_json(_cache_manifest(store_copy), lambda m: m.update(n_rows="many"))

    result = run_cli("ls", "--store", str(store_copy))

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith(f"  ES.FUT  mbp10_front_month/{good.name}  ") for line in lines)
    assert any(line.startswith(f"  {bad}  DAMAGED: ") and "`n_bars`" in line for line in lines)
    assert sum("DAMAGED" in line for line in lines) == 2
    listing = json.loads(run_cli("ls", "--store", str(store_copy), "--json").output)
    assert [b["bar_key"] for b in listing["bars"]] == [good.name]
    assert len(listing["damaged"]) == 2


# --- checkpoints -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def interrupted(clean_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run killed in fold 1: fold 0 finished (results.npz), fold 1 at its step-50 checkpoint."""
    root = tmp_path_factory.mktemp("interrupted")
    shutil.copytree(clean_store, root, dirs_exist_ok=True)
    killed = _kill("checkpoint.npz", "4", "train", str(root))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (run,) = (root / "runs").iterdir()
    assert (run / "fold00" / "results.npz").is_file()
    assert (run / "fold01" / "checkpoint.npz").is_file()
    return run


@pytest.fixture
def run_copy(interrupted: Path, store_copy: Path) -> Path:
    run = store_copy / "runs" / interrupted.name
    shutil.copytree(interrupted, run)
    return run


def _edit_checkpoint(path: Path, edit: Callable[[dict, dict], None]) -> None:  # type: ignore[type-arg]
    arrays, meta = load_checkpoint(path)
    edit(arrays, meta)
    save_checkpoint(path, arrays, meta)


def _resume(run: Path) -> str:
    return error_line(
        run_cli("train", "--store", str(run.parent.parent), "--resume", run.name, "-q")
    )


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda a, m: m.update(step="x"), "checkpoint field `step` must be a whole number, "
         "was 'x'"),
        (lambda a, m: m.pop("act_counter"), "checkpoint field `act_counter` must be a whole "
         "number, was missing"),
        (lambda a, m: a["env/t"].__setitem__(0, 10**9), "checkpoint 'env/t' must lie in "),
        (lambda a, m: a.pop("agent/params"), "agent state has no 'params'"),
        (lambda a, m: a.__setitem__("agent/step", np.array(1.5)), "agent state 'step' must be "
         "a whole number of updates >= 0, was 1.5"),
    ],
    ids=["step-not-int", "act_counter-missing", "env-t-out-of-range", "params-missing",
         "agent-step-fraction"],
)  # fmt: skip
def test_cli_train_resume_crafted_checkpoint_names_file_and_field(
    run_copy: Path,
    edit: Callable[[dict, dict], None],
    why: str,  # type: ignore[type-arg]
) -> None:
    path = run_copy / "fold01" / "checkpoint.npz"
    _edit_checkpoint(path, edit)

    line = _resume(run_copy)

    assert line.startswith(f"Error: {path}: ")
    assert why in line
    assert line.endswith(_DAMAGED_CHECKPOINT)


def test_cli_train_resume_truncated_checkpoint_is_one_error_line(run_copy: Path) -> None:
    path = run_copy / "fold01" / "checkpoint.npz"
    path.write_bytes(path.read_bytes()[:1000])

    line = _resume(run_copy)

    assert line.startswith(f"Error: {path}: not a readable fxstore checkpoint (")
    assert line.endswith(_DAMAGED_CHECKPOINT)


def test_cli_train_resume_truncated_results_is_one_error_line(run_copy: Path) -> None:
    path = run_copy / "fold00" / "results.npz"
    path.write_bytes(path.read_bytes()[:200])

    line = _resume(run_copy)

    assert line.startswith(f"Error: {path}: cannot read it (")
    assert line.endswith("the file is damaged: move it aside (the fold is then trained again on "
                         "--resume).")  # fmt: skip


def test_checkpoint_roundtrip_of_the_fixture_is_valid(run_copy: Path) -> None:
    arrays, meta = load_checkpoint(run_copy / "fold01" / "checkpoint.npz")

    assert meta["step"] == 50
    assert np.asarray(arrays["env/t"]).shape == (8,)


def test_ingest_up_to_date_check_catches_a_same_size_damaged_day_file(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    """A day file edited after the manifest (same size, other bytes) is not trusted."""
    from fxstore.config import BarConfig, IngestConfig
    from fxstore.errors import FxStoreWarning
    from fxstore.ingest import ingest

    files = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))[:3]
    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=5))
    first = ingest(config, files, tmp_path)
    day = sorted(first.out_dir.glob("*.parquet"))[0]
    good = day.read_bytes()
    day.write_bytes(good[:100] + bytes([good[100] ^ 0xFF]) + good[101:])  # same size

    with pytest.warns(FxStoreWarning, match=rf"{day.name}: not the file .* building the series"):
        again = ingest(config, files, tmp_path)

    assert not again.up_to_date and (again.out_dir / day.name).read_bytes() == good
    assert again.out_dir.name == "v0002" and first.out_dir.name == "v0001"


def test_precompute_up_to_date_check_catches_a_same_size_damaged_shard(
    tmp_path: Path, two_roll_market: SynthMarket
) -> None:
    from fxstore.config import BarConfig, FeatureConfig, IngestConfig
    from fxstore.features.precompute import precompute
    from fxstore.ingest import ingest

    files = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))
    bars = BarConfig(target_bars_per_day=20)
    ingest(IngestConfig(symbol="ES.FUT", bars=bars), files, tmp_path)
    config = FeatureConfig(symbol="ES.FUT", bar_key=bars.key)
    first = precompute(config, tmp_path)
    shard = sorted(first.out_dir.glob("*.arrow"))[0]
    good = shard.read_bytes()
    shard.write_bytes(good[:-8] + bytes(b ^ 0xFF for b in good[-8:]))  # same size

    again = precompute(config, tmp_path)

    assert not again.up_to_date and shard.read_bytes() == good
