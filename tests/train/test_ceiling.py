"""The ceiling reference: the planted signal's projection on the fold's features, traded as the
oracle trades the signal; fitted on training rows, its test window's signal never read."""

from __future__ import annotations

import numpy as np
import pytest

from fxstore.config import EnvConfig
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.references import REFERENCES, ReferenceInputs, available
from fxstore.train.evaluate.references.ceiling import project_signal
from fxstore.train.evaluate.references.oracle import PlantedSignal
from fxstore.train.evaluate.results import baseline_results, reference_notes
from fxstore.train.evaluate.walkforward import Fold

ES = ContractSpec("ES", 50.0, 0.25)
ENV = EnvConfig(commission_per_contract=1.25)
N = 600
FOLD = Fold(
    index=0,
    train=(0, 300),
    validation=(310, 400),
    test=(420, N),
    train_span=(19_800, 19_809),
    validation_span=(19_810, 19_813),
    test_span=(19_814, 19_819),
)


def _market(features: np.ndarray, close: np.ndarray) -> Market:
    n = len(close)
    return Market(
        features=features.astype(np.float32),
        close=close,
        half_spread=np.full(n, 0.125),
        is_roll=np.zeros(n, dtype=bool),
        trading_day=(19_800 + np.arange(n) // 30).astype(np.int32),
        feature_names=tuple(f"f_{k}" for k in range(features.shape[1])),
        bars_per_day=30.0,
    )


def _signal_market(seed: int = 0) -> tuple[Market, np.ndarray]:
    """Three features; the signal is a linear mix of the first two plus a part they miss;
    prices follow the signal."""
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((N, 3))
    hidden = rng.standard_normal(N)
    signal = 0.8 * features[:, 0] - 0.5 * features[:, 1] + 0.3 * hidden
    close = 5_000.0 + np.cumsum(np.r_[0.0, 0.5 * signal[:-1]] + 0.25 * rng.standard_normal(N))
    return _market(features, close), signal


def test_project_signal_recovers_a_signal_the_features_span() -> None:
    rng = np.random.default_rng(1)
    features = rng.standard_normal((N, 4))
    signal = 2.0 * features[:, 0] - features[:, 3] + 0.5
    market = _market(features, 5_000.0 + np.arange(N) * 0.25)

    projection = project_signal(signal, market, FOLD)

    # the fit is on float32 features: the projection is the signal to float32 precision
    np.testing.assert_allclose(projection[FOLD.test[0] :], signal[FOLD.test[0] :], atol=1e-3)


def test_project_signal_never_reads_the_signal_past_the_validation_slice() -> None:
    market, signal = _signal_market()
    changed = signal.copy()
    changed[FOLD.validation[1] :] = np.random.default_rng(9).standard_normal(N - FOLD.validation[1])

    np.testing.assert_array_equal(
        project_signal(signal, market, FOLD), project_signal(changed, market, FOLD)
    )


def test_ceiling_positions_at_a_row_use_no_feature_of_a_later_row() -> None:
    market, signal = _signal_market()
    row = FOLD.test[0] + 50
    later = np.asarray(market.features).copy()
    later[row + 1 :] = 0.0
    cut = _market(later, np.asarray(market.close))
    inputs = ReferenceInputs(market, FOLD, ENV, ES, 100_000.0, 0, signal)
    inputs_cut = ReferenceInputs(cut, FOLD, ENV, ES, 100_000.0, 0, signal)

    full = REFERENCES["ceiling"].positions(inputs)
    part = REFERENCES["ceiling"].positions(inputs_cut)

    assert full is not None and part is not None
    k = row - FOLD.test[0]
    np.testing.assert_array_equal(full.test[: k + 1], part.test[: k + 1])


def test_ceiling_of_features_that_span_the_signal_is_the_oracle() -> None:
    rng = np.random.default_rng(2)
    features = rng.standard_normal((N, 2))
    signal = features[:, 0] - features[:, 1]
    close = 5_000.0 + np.cumsum(np.r_[0.0, 0.5 * signal[:-1]])
    market = _market(features, close)

    ceiling, oracle = baseline_results(
        market, FOLD, ["ceiling", "oracle"], ENV, ES, capital=100_000.0, seed=0, planted=signal
    )

    np.testing.assert_array_equal(ceiling.positions, oracle.positions)
    assert ceiling.metrics.total_pnl == pytest.approx(oracle.metrics.total_pnl)
    assert oracle.metrics.total_pnl > 0


def test_ceiling_trades_only_the_part_of_the_signal_the_features_carry() -> None:
    market, signal = _signal_market(3)
    lo, hi = FOLD.test

    projection = project_signal(signal, market, FOLD)
    (ceiling,) = baseline_results(
        market, FOLD, ["ceiling"], ENV, ES, capital=100_000.0, seed=0, planted=signal
    )

    # 0.8 f0 - 0.5 f1 seen, 0.3 x noise unseen: correlation sqrt(0.89 / 0.98) = 0.953
    assert np.corrcoef(projection[lo:hi], signal[lo:hi])[0, 1] == pytest.approx(0.953, abs=0.02)
    assert ceiling.metrics.total_pnl > 0
    assert np.isfinite(ceiling.in_sample_sharpe)  # fitted: scored in sample too


def test_ceiling_is_left_out_without_a_planted_signal() -> None:
    market, _signal = _signal_market()

    results = baseline_results(
        market, FOLD, ["flat", "ceiling", "oracle"], ENV, ES, capital=1.0, seed=0
    )

    assert [r.policy for r in results] == ["flat"]
    assert available(("flat", "linear", "ceiling", "oracle"), False) == ("flat", "linear")


def test_reference_notes_say_why_the_ceiling_is_absent_on_real_data() -> None:
    notes = reference_notes(
        PlantedSignal(None, "no planted signal in /x (real data has none)"),
        ("linear", "ceiling", "oracle"),
        {},
    )

    assert notes == (
        "ceiling: absent: no planted signal in /x (real data has none)",
        "oracle: absent: no planted signal in /x (real data has none)",
    )


def test_reference_notes_give_shares_of_the_oracle_and_the_ceiling() -> None:
    market, signal = _signal_market(3)
    results = baseline_results(
        market,
        FOLD,
        ["linear", "ceiling", "oracle"],
        ENV,
        ES,
        capital=100_000.0,
        seed=0,
        planted=signal,
    )
    totals = {r.policy: r.metrics for r in results}

    notes = reference_notes(
        PlantedSignal(signal, "planted"), ("linear", "ceiling", "oracle"), totals
    )

    share = totals["ceiling"].total_pnl / totals["oracle"].total_pnl
    assert notes[0] == "ceiling and oracle: planted"
    assert notes[2].startswith(f"ceiling's share of the oracle's PnL: {share:.1%} (")
    assert notes[1].startswith("linear's share of the oracle's PnL: ")
    assert len(notes) == 3


def test_baseline_positions_refuse_the_planted_signal_references() -> None:
    from fxstore.errors import InvalidInputError
    from fxstore.train.evaluate.references.baselines import baseline_positions

    market, _signal = _signal_market()

    with pytest.raises(InvalidInputError, match="'ceiling' trades the planted signal"):
        baseline_positions("ceiling", market, 0, 10, ENV, seed=0)
