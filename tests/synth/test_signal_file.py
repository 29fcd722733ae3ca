"""The planted signal's side files: the kernels' own signal, at the right records, predictive."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from fxstore.config import SynthConfig
from fxstore.market.calendar import session_bounds_ns
from fxstore.synth import generate_market
from fxstore.synth.day import DayConsts
from fxstore.synth.events import advance_walk
from fxstore.synth.signal import SAMPLES_PER_HALF_LIFE, signal_file_name, signal_path
from tests.synth.dbn_io import read_dbn

pytestmark = pytest.mark.quick

DAY = dt.date(2024, 5, 6)


def _config(strength: float) -> SynthConfig:
    # a half-life of 500 records: 300-record moves show the signal within one small day
    return SynthConfig(
        start=DAY,
        end=DAY,
        events_per_day=50_000,
        seed=11,
        signal_strength=strength,
        signal_half_life_events=500,
    )


def test_signal_path_equals_the_kernels_walk() -> None:
    key, phi, s0 = np.uint64(12345), 0.5 ** (1 / 500), 0.3
    consts = DayConsts(
        n_records=1000,
        anchor=0.0,
        bridge_slope=0.0,
        signal_shift=0.0,
        sigma=1.0,
        kappa=0.0,
        phi=phi,
        bias=0.0,
        key_fair=np.uint64(1),
        key_signal=key,
        key_event=np.uint64(2),
        tick_fixed=np.ones(1, dtype=np.int64),
        instrument_id=np.zeros(1, np.int64),
        beta=np.ones(1),
        offset=np.zeros(1),
        sweep_weight=np.ones(1),
    )
    expected = []
    walk = np.array([0.0, s0])
    for _ in range(40):
        advance_walk(walk, len(expected) * 25, 25, consts)
        expected.append(walk[1])

    path = signal_path(key, phi, s0, 1000, 25)

    np.testing.assert_allclose(path, expected, rtol=0, atol=1e-12)


def test_signal_file_samples_every_step_th_record(tmp_path: Path) -> None:
    config = _config(0.8)
    summary = generate_market(config, tmp_path)
    recs = read_dbn(summary.files[0])[1]
    recs = recs[recs["ts_recv"] >= session_bounds_ns(DAY)[0]]  # the signal starts at the open
    step = config.signal_half_life // SAMPLES_PER_HALF_LIFE

    with np.load(tmp_path / signal_file_name(DAY), allow_pickle=False) as data:
        ts, signal = data["ts_recv"], data["signal"]

    assert signal.dtype == np.float32 and len(signal) == len(recs) // step
    np.testing.assert_array_equal(ts, recs["ts_recv"][step - 1 :: step][: len(ts)])


@pytest.mark.parametrize(("strength", "predicts"), [(0.8, True), (0.0, False)])
def test_signal_file_predicts_the_next_mid_move_only_with_a_signal(
    tmp_path: Path, strength: float, predicts: bool
) -> None:
    summary = generate_market(_config(strength), tmp_path)
    recs = read_dbn(summary.files[0])[1]
    with np.load(tmp_path / signal_file_name(DAY), allow_pickle=False) as data:
        ts, signal = data["ts_recv"], data["signal"].astype(np.float64)
    # every 5th sample: a 20th of a half-life apart
    ts, signal = ts[::5], signal[::5]
    front = np.bincount(recs["instrument_id"]).argmax()
    r = recs[recs["instrument_id"] == front]
    mid = (r["bid_px_00"].astype(np.float64) + r["ask_px_00"]) / 2e9
    # mid of the front contract at each sample time and 300 front records later
    at = np.searchsorted(r["ts_recv"], ts, side="right") - 1
    ok = (at >= 0) & (at + 300 < len(r))
    move = mid[at[ok] + 300] - mid[at[ok]]
    corr = np.corrcoef(signal[ok], move)[0, 1]

    n = int(ok.sum())
    assert (corr > 4 / np.sqrt(n)) if predicts else (abs(corr) < 4 / np.sqrt(n))
