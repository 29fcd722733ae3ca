#!/usr/bin/env bash
# One synthetic year of ES.FUT for the learning benches: synth, ingest (front month), precompute
# (the default feature set).
#   bench/synth_year.sh IC MARKET_SEED ROOT [WORKERS]
# e.g. bench/synth_year.sh 0.05 505 /tmp/years/ic0.05-s505 16
set -euo pipefail
ic=$1 seed=$2 root=$3 workers=${4:-$(nproc)}
fx() { python -m fxstore "$@"; }
fx synth --store "$root" --start 2023-01-03 --end 2023-12-29 --signal-ic "$ic" --seed "$seed" \
    --workers "$workers" -q
fx ingest --store "$root" --symbol ES.FUT --instrument-mode front-month --workers "$workers" -q \
    "$root/synth/ES.FUT"
fx precompute --store "$root" --symbol ES.FUT
