"""The oracle reference: the planted signal at bar closes, a hand-computed book, absence."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from fxstore.config import EnvConfig
from fxstore.errors import InvalidInputError
from fxstore.synth.signal import signal_file_name
from fxstore.train.env.market import ContractSpec
from fxstore.train.evaluate.references.oracle import (
    load_planted_signal,
    oracle_positions,
    signal_at_bars,
)
from fxstore.train.evaluate.results import baseline_results, reference_notes
from tests.train.test_backtest import tiny_market, whole_fold

pytestmark = pytest.mark.quick

ES = ContractSpec("ES", 50.0, 0.25)
ENV = EnvConfig(commission_per_contract=1.25)  # + half spread 0.125 x $50: $7.50 a contract


def test_oracle_book_equals_the_hand_computed_pnl() -> None:
    market = tiny_market([100.0, 101.0, 100.5, 102.0, 101.0])
    signal = np.array([1.0, -0.5, 2.0, 0.0, -1.0])

    (result,) = baseline_results(
        market, whole_fold(5), ["oracle"], ENV, ES, capital=100_000.0, seed=0, planted=signal
    )

    # no validation slice: band 0, trade the sign, hold on 0 -> +1, -1, +1, +1, (flat at end)
    # row 0: buy 1 (-7.50), +1 x 1.0 pt x $50 = +50        ->  42.50
    # row 1: sell 2 (-15), -1 x -0.5 pt x $50 = +25        ->  10.00
    # row 2: buy 2 (-15), +1 x 1.5 pt x $50 = +75          ->  60.00
    # row 3: hold, +1 x -1.0 pt x $50 = -50                -> -50.00
    # row 4: the window ends flat: sell 1 (-7.50)          ->  -7.50
    np.testing.assert_allclose(result.pnl, [42.5, 10.0, 60.0, -50.0, -7.5])
    np.testing.assert_array_equal(result.positions, [1.0, -1.0, 1.0, 1.0, 0.0])
    assert result.metrics.total_pnl == pytest.approx(55.0)


def test_oracle_positions_reject_a_signal_of_the_wrong_length() -> None:
    market = tiny_market([100.0, 101.0, 102.0])

    with pytest.raises(InvalidInputError, match=r"one value per market row \(3\)"):
        oracle_positions(np.zeros(2), market, whole_fold(3), ENV, ES, capital=1.0)


def test_baseline_results_leave_the_oracle_out_without_a_signal() -> None:
    market = tiny_market([100.0, 101.0, 102.0])

    results = baseline_results(
        market, whole_fold(3), ["flat", "oracle"], ENV, ES, capital=1.0, seed=0
    )

    assert [r.policy for r in results] == ["flat"]


def test_signal_at_bars_takes_the_last_sample_of_the_same_day() -> None:
    sample_ts = np.array([10, 20, 30, 110, 120], dtype=np.int64)
    sample_day = np.array([1, 1, 1, 2, 2], dtype=np.int32)
    signal = np.array([0.1, 0.2, 0.3, 0.4, 0.5], dtype=np.float32)
    ts_close = np.array([5, 20, 25, 100, 115, 200], dtype=np.int64)
    day = np.array([1, 1, 1, 2, 2, 2], dtype=np.int32)

    values = signal_at_bars(ts_close, day, sample_ts, sample_day, signal)

    # before day 1's first sample: 0; at 20: that sample; day 2 at 100: day 1's last is stale
    np.testing.assert_allclose(values, [0.0, 0.2, 0.2, 0.0, 0.4, 0.5], rtol=1e-6)


def _write_side_file(folder: Path, day: dt.date, ts: list[int], signal: list[float]) -> None:
    np.savez(
        folder / signal_file_name(day),
        ts_recv=np.array(ts, dtype=np.int64),
        signal=np.array(signal, dtype=np.float32),
    )


def test_load_planted_signal_absent_without_side_files_says_so(tmp_path: Path) -> None:
    planted = load_planted_signal(tmp_path, np.array([1]), np.array([19_800], dtype=np.int32))

    assert planted.values is None
    assert "real data has none" in planted.reason
    notes = reference_notes(planted, ["flat", "oracle"], {})
    assert notes == (f"oracle: absent: no planted signal in {tmp_path} (real data has none)",)


def test_load_planted_signal_absent_when_a_trading_day_is_missing(tmp_path: Path) -> None:
    day = dt.date(2024, 3, 1)
    _write_side_file(tmp_path, day, [10, 20], [0.5, -0.5])
    epoch_day = (day - dt.date(1970, 1, 1)).days

    planted = load_planted_signal(
        tmp_path, np.array([15, 25]), np.array([epoch_day, epoch_day + 3], dtype=np.int32)
    )

    assert planted.values is None
    assert "miss 1 of the cache's trading days (first 2024-03-04)" in planted.reason


def test_load_planted_signal_reads_every_day_in_time_order(tmp_path: Path) -> None:
    days = [dt.date(2024, 3, 1), dt.date(2024, 3, 4)]
    _write_side_file(tmp_path, days[1], [110, 120], [0.4, 0.5])
    _write_side_file(tmp_path, days[0], [10, 20], [0.1, 0.2])
    epoch = [(d - dt.date(1970, 1, 1)).days for d in days]

    planted = load_planted_signal(
        tmp_path, np.array([15, 25, 115]), np.array([epoch[0], epoch[0], epoch[1]], np.int32)
    )

    assert planted.values is not None
    np.testing.assert_allclose(planted.values, [0.1, 0.2, 0.4], rtol=1e-6)
