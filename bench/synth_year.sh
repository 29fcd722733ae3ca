#!/usr/bin/env bash
# One synthetic year of ES.FUT for the learning benches (or the days from START to END):
# synth, ingest (front month), precompute (the default feature set).
#   bench/synth_year.sh IC MARKET_SEED ROOT [WORKERS [START END]]
# e.g. bench/synth_year.sh 0.05 505 /tmp/years/ic0.05-s505 16
#      bench/synth_year.sh 0.05 4242 /tmp/y3/ic0.05-s4242 16 2021-01-04 2023-12-29  (3 years)
set -euo pipefail
ic=$1 seed=$2 root=$3 workers=${4:-$(nproc)} start=${5:-2023-01-03} end=${6:-2023-12-29}
fx() { python -m fxstore "$@"; }
fx synth --store "$root" --start "$start" --end "$end" --signal-ic "$ic" --seed "$seed" \
    --workers "$workers" -q
fx ingest --store "$root" --symbol ES.FUT --instrument-mode front-month --workers "$workers" -q \
    "$root/synth/ES.FUT"
fx precompute --store "$root" --symbol ES.FUT
