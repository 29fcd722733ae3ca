"""The planted signal: signed trade flow predicts the next interval's mid move, or it does not.

Per trading day, the front contract's records are cut into intervals of 300 of its records
(about the signal's half-life); x = signed traded volume in an interval, y = the change of
the mid (at packet ends) over the next interval. With n intervals, the correlation of
independent series is about N(0, 1/n): 4/sqrt(n) is the significance bar both ways.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.config import SynthConfig
from fxstore.ingest.dbn.format import F_LAST
from fxstore.synth import generate_market
from tests.synth.dbn_io import read_dbn

pytestmark = pytest.mark.quick

INTERVAL = 300


def _flow_and_next_move(recs: npt.NDArray[np.void]) -> tuple[np.ndarray, np.ndarray]:
    front = np.bincount(recs["instrument_id"]).argmax()
    r = recs[recs["instrument_id"] == front]
    k = np.arange(len(r)) // INTERVAL
    n = int(k[-1])  # the last interval is partial: dropped
    signed = np.where(r["side"] == b"B", 1.0, -1.0) * r["size"] * (r["action"] == b"T")
    flow = np.bincount(k, signed)[:n]
    ends = np.flatnonzero(r["flags"] & F_LAST)
    mid = (r["bid_px_00"][ends].astype(np.float64) + r["ask_px_00"][ends]) / 2e9
    end_mid = np.full(n + 1, np.nan)
    end_mid[k[ends]] = mid  # the last packet end of each interval wins
    move = np.diff(end_mid[:n])  # move[t] happens over interval t + 1
    return flow[:-1], move


def _flow_return_corr(strength: float, out_dir: Path) -> tuple[float, int]:
    cfg = SynthConfig(
        start=dt.date(2024, 5, 6),
        end=dt.date(2024, 5, 15),
        events_per_day=50_000,
        seed=11,
        signal_strength=strength,
        signal_half_life_events=500,  # the next short window's move shows it in small days
    )
    pairs = [_flow_and_next_move(read_dbn(p)[1]) for p in generate_market(cfg, out_dir).files]
    xs, ys = zip(*pairs, strict=True)
    x, y = np.concatenate(xs), np.concatenate(ys)
    ok = np.isfinite(y)
    return float(np.corrcoef(x[ok], y[ok])[0, 1]), int(ok.sum())


def test_signal_strong_flow_predicts_next_move(tmp_path: Path) -> None:
    corr, n = _flow_return_corr(0.8, tmp_path)
    assert n > 1_000
    assert corr > 4 / np.sqrt(n)


def test_signal_zero_flow_does_not_predict_next_move(tmp_path: Path) -> None:
    corr, n = _flow_return_corr(0.0, tmp_path)
    assert n > 1_000
    assert abs(corr) < 4 / np.sqrt(n)


@pytest.mark.parametrize("strength", [0.0, 0.8])
def test_signal_flow_moves_price_same_interval(tmp_path: Path, strength: float) -> None:
    day = dt.date(2024, 5, 6)
    cfg = SynthConfig(start=day, end=day, events_per_day=50_000, seed=11, signal_strength=strength)
    recs = read_dbn(generate_market(cfg, tmp_path).files[0])[1]
    flow, move = _flow_and_next_move(recs)
    same = np.corrcoef(flow[1:], move[:-1])[0, 1]  # flow of interval t+1 vs its own move
    assert same > 0.1  # price impact: buying lifts the offer, with or without a signal
