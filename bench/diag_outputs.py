"""Fingerprint every output fxstore writes on the bench data, for byte-identity checks.

Runs the CLI in fresh processes on a small synthetic market (a quarterly roll, trading-day
and UTC-day files), through ingest in several instrument modes and bar types, precompute,
backtest and a smoke training fold, then records the sha256 of every output file. Manifests
and run files are hashed after removing the fields that record when or how long (timings,
run ids, timestamps), so two runs of the same code give the same fingerprint. Compare two
fingerprints to show that a refactor changed no output:

    python bench/diag_outputs.py --out /tmp/before.json
    # ... change the code ...
    python bench/diag_outputs.py --out /tmp/after.json --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: Keys whose values record when or how long, not what: dropped before hashing JSON files.
_VOLATILE = frozenset(
    {
        "elapsed_s",
        "build_s",
        "created",
        "created_at",
        "started",
        "finished",
        "written_at",
        "wall_s",
        "seconds",
        "run_id",
        "timings",
        "samples_per_s",
        "steps_per_s",
        "store",
        "store_root",
        "mtime_ns",
        # derived from input mtimes or the paths above
        "fingerprint",
        "manifest_sha256",
        "run_dir",
    }
)


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in sorted(value.items()) if k not in _VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _digest(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".json":
        data = json.dumps(_strip(json.loads(data)), sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def _fxstore(store: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "fxstore", *args, "--store", str(store)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")


def _run_all(store: Path) -> None:
    synth = store / "synth" / "ES.FUT"
    utc = store / "synth-utc" / "ES.FUT"
    days = ("--start", "2024-02-20", "--end", "2024-04-12", "--events-per-day", "40000")
    _fxstore(store, "synth", str(synth), *days, "--signal", "1", "-q")
    _fxstore(store, "synth", str(utc), *days, "--split", "utc-day", "--seed", "3", "-q")
    _fxstore(store, "ingest", str(synth), "--workers", "2", "-q")
    _fxstore(store, "ingest", str(synth), "--instrument-mode", "all", "--workers", "1", "-q")
    _fxstore(store, "ingest", str(synth), "--bar-type", "volume", "--threshold", "300", "-q")
    _fxstore(store, "ingest", str(synth), "--bar-type", "tick_imbalance", "-q")
    # UTC-day files into a second store (same symbol): split by trading day at 2 workers
    _fxstore(store / "u", "ingest", str(utc), "--workers", "2", "-q")
    _fxstore(store / "u", "ingest", str(utc), "--instrument-mode", "all", "--workers", "1", "-q")
    _fxstore(store, "precompute", "--symbol", "ES.FUT", "--bar-key", "dib-b100-946dfb62")
    _fxstore(store / "u", "precompute", "--shard-by", "day")
    _fxstore(store, "backtest", "--symbol", "ES.FUT", "--train-days", "20", "--test-days", "10")
    _fxstore(
        store,
        "train",
        "--symbol",
        "ES.FUT",
        "--profile",
        "smoke",
        "--train-days",
        "20",
        "--test-days",
        "10",
        "--max-folds",
        "1",
        "--device",
        "cpu",
        "-q",
    )


def fingerprint(store: Path) -> dict[str, str]:
    """sha256 of every output file under the store (runs' folders named by position)."""
    out: dict[str, str] = {}
    for top in ("bars", "fxcache", "u/bars", "u/fxcache"):
        for path in sorted((store / top).rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                out[str(path.relative_to(store))] = _digest(path)
    for i, run in enumerate(sorted((store / "runs").iterdir())):
        kind = run.name.rsplit("-", 1)[-1]
        for path in sorted(run.rglob("*")):
            if path.is_file() and path.suffix in (".json", ".npz", ".csv"):
                out[f"runs/{i}-{kind}/{path.relative_to(run)}"] = _digest(path)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="Fingerprint JSON to write.")
    parser.add_argument("--compare", type=Path, help="A fingerprint to compare against.")
    parser.add_argument("--keep", type=Path, help="Keep the store in this folder.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = args.keep or Path(tmp)
        if not (store / "runs").exists():
            _run_all(store)
        prints = fingerprint(store)
    args.out.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n")
    print(f"{len(prints)} files fingerprinted into {args.out}")
    if args.compare:
        before = json.loads(args.compare.read_text())
        differ = sorted(k for k in before.keys() | prints.keys() if before.get(k) != prints.get(k))
        for key in differ:
            print(f"differs: {key}")
        print("identical" if not differ else f"{len(differ)} of {len(before)} files differ")
        raise SystemExit(1 if differ else 0)


if __name__ == "__main__":
    main()
