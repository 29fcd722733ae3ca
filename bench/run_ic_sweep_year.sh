#!/usr/bin/env bash
# Issue 16's one-year sweep on one GPU: one process per IC, concurrently (each builds its own
# market: synth, ingest, precompute; then trains 3 seeds per fold with the default profile).
# Usage (on the GPU machine, from the repo root): bash bench/run_ic_sweep_year.sh LOGDIR IC...
set -u
logdir=$1; shift
mkdir -p "$logdir"
cd bench
for ic in "$@"; do
    FXSTORE_BENCH_MACHINE=${FXSTORE_BENCH_MACHINE:-nvidia-h200} PYTHONUNBUFFERED=1 \
        setsid nohup python3 bench_ic_sweep.py --work /tmp/icy --ics "$ic" --profile default \
        --seeds 3 --name "ic_sweep_h200_year_ic$ic" --verbose >"$logdir/ic$ic.log" 2>&1 &
done
