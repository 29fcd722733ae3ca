"""--signal-ic: the planted signal's information coefficient is what was asked for.

The IC is the correlation between the signal just after a bar's close and the fair value's
move over the next bar (bars of events_per_day / 75 records, the default ingest's size here).
Measured on the generator's own fair-value kernel (fxstore.synth.events.advance_walk, with
the day constants DaySimulation builds) over 250,000 bars, so the sampling error (about
1/sqrt(n) = 0.002) is well inside the ±20% asked of an IC of 0.02. The DBN-level check
(the book, the tick grid) is in test_signal_ic_dbn, marked slow.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pytest

from fxstore.config import SynthConfig
from fxstore.errors import InvalidInputError
from fxstore.synth.day import DaySimulation, plan_day
from fxstore.synth.events import advance_walk
from fxstore.synth.signal import (
    DEFAULT_BARS_PER_DAY,
    SAMPLES_PER_HALF_LIFE,
    planted_ic,
    planted_strength,
    strength_for_ic,
)

DAY = dt.date(2024, 5, 6)
N_BARS = 250_000


def _kernel_ic(config: SynthConfig) -> float:
    sim = DaySimulation(config, plan_day(config, DAY, 4700.0, 4700.0))
    consts = sim._day  # the constants the day's kernels run with
    m = round(config.events_per_day / DEFAULT_BARS_PER_DAY)
    walk = np.array([0.0, sim.signal_start])
    signal, move = np.empty(N_BARS), np.empty(N_BARS)
    for i in range(N_BARS):
        signal[i], before = walk[1], walk[0]
        advance_walk(walk, i * m, m, consts)
        move[i] = walk[0] - before
    return float(np.corrcoef(signal, move)[0, 1])


@pytest.mark.parametrize("ic", [0.02, 0.05, 0.1])
def test_signal_ic_measured_on_the_kernel_is_within_20_percent(ic: float) -> None:
    config = SynthConfig(start=DAY, end=DAY, events_per_day=5_000, seed=3, signal_ic=ic)

    measured = _kernel_ic(config)

    assert measured == pytest.approx(ic, rel=0.2)


def test_signal_ic_zero_is_no_signal() -> None:
    config = SynthConfig(start=DAY, end=DAY, events_per_day=20_000, signal_ic=0.0)

    assert planted_strength(config) == 0.0


def test_strength_for_ic_inverts_planted_ic() -> None:
    strength = strength_for_ic(0.05, half_life_records=2000, bar_records=2000)

    assert planted_ic(strength, half_life_records=2000, bar_records=2000) == pytest.approx(0.05)
    # strength 1 (the demo's) is an IC of about 0.58 at the default size
    assert planted_ic(1.0, half_life_records=2000, bar_records=2000) == pytest.approx(
        0.584, abs=1e-3
    )


def test_strength_for_ic_above_strength_one_raises() -> None:
    with pytest.raises(InvalidInputError, match=r"`signal_ic` must be in \[0, 0\.584\]"):
        strength_for_ic(0.6, half_life_records=2000, bar_records=2000)


def test_synth_config_signal_ic_and_strength_together_raise() -> None:
    with pytest.raises(InvalidInputError, match="set `signal_ic` or `signal_strength`, not both"):
        SynthConfig(start=DAY, end=DAY, signal_strength=0.5, signal_ic=0.05)


@pytest.mark.slow
def test_signal_ic_dbn_measured_from_the_book_is_near_the_model(tmp_path: Path) -> None:
    from fxstore.synth import generate_market
    from fxstore.synth.signal import signal_file_name
    from tests.synth.dbn_io import read_dbn

    config = SynthConfig(
        start=DAY, end=DAY + dt.timedelta(days=13), events_per_day=200_000, seed=5, signal_ic=0.3
    )
    summary = generate_market(config, tmp_path, workers=2)  # the same bytes as one
    # side-file samples (every half-life / SAMPLES_PER_HALF_LIFE records) per bar
    k = round(
        config.events_per_day
        / DEFAULT_BARS_PER_DAY
        / (config.signal_half_life // SAMPLES_PER_HALF_LIFE)
    )
    xs, ys = [], []
    for path, day in zip(summary.files, summary.trading_days, strict=True):
        recs = read_dbn(path)[1]
        r = recs[recs["instrument_id"] == np.bincount(recs["instrument_id"]).argmax()]
        mid = (r["bid_px_00"].astype(np.float64) + r["ask_px_00"]) / 2e9
        with np.load(tmp_path / signal_file_name(day), allow_pickle=False) as data:
            ts, signal = data["ts_recv"], data["signal"].astype(np.float64)
        at = np.searchsorted(r["ts_recv"], ts, side="right") - 1
        start = np.arange(0, len(ts) - k, k)
        ok = at[start] >= 0
        xs.append(signal[start][ok])
        ys.append(mid[at[start + k]][ok] - mid[at[start]][ok])
    x, y = np.concatenate(xs), np.concatenate(ys)

    # ~1,100 bars: sampling error ~0.03
    assert np.corrcoef(x, y)[0, 1] == pytest.approx(0.3, abs=4 / math.sqrt(len(x)))


def test_cli_synth_signal_ic_writes_the_market_and_its_side_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fxstore.cli import cli

    args = ["synth", str(tmp_path), "--start", "2024-05-06", "--end", "2024-05-06"]
    result = CliRunner().invoke(
        cli,
        [*args, "--events-per-day", "5000", "--signal-ic", "0.05", "-q"],
        catch_exceptions=False,
    )

    assert result.exit_code == 0
    assert (tmp_path / "glbx-mdp3-20240506.planted-signal.npz").is_file()


def test_cli_synth_signal_ic_with_signal_is_an_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fxstore.cli import cli

    args = ["synth", str(tmp_path), "--start", "2024-05-06", "--end", "2024-05-06"]
    result = CliRunner().invoke(cli, [*args, "--signal", "0.5", "--signal-ic", "0.05"])

    assert result.exit_code == 1
    assert result.output.endswith(
        "Error: set `signal_ic` or `signal_strength`, not both; were 0.05 and 0.5.\n"
    )
