#!/usr/bin/env bash
# The one-year IC sweep on one GPU: one process per IC, concurrently (four shared one
# H200 at about 5 s per fold and seed in all, against 7 s for one alone: docs/findings.md).
# Each builds its IC's market (synth, ingest, precompute) under WORK unless
# it is there, trains 3 seeds per fold with PROFILE, and writes
# bench/results/ic_sweep_h200_year_ic<IC>.json; the script waits for all of them.
# Usage (on the GPU machine, from the repo root; WORK outside the repository, e.g. /tmp/icy,
# so that the stores stay out of the working tree):
#   bash bench/run_ic_sweep_year.sh WORK PROFILE IC...
set -u
work=$1; profile=$2; shift 2
mkdir -p "$work"
cd bench
for ic in "$@"; do
    FXSTORE_BENCH_MACHINE=${FXSTORE_BENCH_MACHINE:-nvidia-h200} PYTHONUNBUFFERED=1 \
        python3 bench_ic_sweep.py --work "$work" --ics "$ic" --profile "$profile" --seeds 3 \
        --name "ic_sweep_h200_year_ic$ic" --verbose >"$work/ic$ic.log" 2>&1 &
done
status=0
for job in $(jobs -p); do wait "$job" || status=1; done
exit $status
