#!/usr/bin/env bash
# Issue 16's one-year sweep on one GPU: the ICs one after another in one process (four
# processes sharing one H200 ran about 7x slower each than one alone: CHANGELOG "Noticed
# (session 12)"). Each IC's market (synth, ingest, precompute) is built under WORK unless it
# is there; then 3 seeds per fold train with the given profile.
# Usage (on the GPU machine, from the repo root; WORK outside the repository, e.g. /tmp/icy):
#   bash bench/run_ic_sweep_year.sh WORK PROFILE IC...
set -eu
work=$1; profile=$2; shift 2
ics=$(IFS=,; echo "$*")
cd bench
FXSTORE_BENCH_MACHINE=${FXSTORE_BENCH_MACHINE:-nvidia-h200} PYTHONUNBUFFERED=1 \
    python3 bench_ic_sweep.py --work "$work" --ics "$ics" --profile "$profile" --seeds 3 \
    --name ic_sweep_h200_year --verbose
