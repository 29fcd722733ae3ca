"""The synthetic bar tables the feature tests and the benchmark build in code."""

from __future__ import annotations

import numpy as np
import pytest

from fxstore.errors import InvalidInputError
from fxstore.features.synthetic import synthetic_bars
from fxstore.ingest.bars.builder import BAR_SCHEMA

pytestmark = pytest.mark.quick


def test_synthetic_bars_follow_the_bar_store_schema_and_invariants() -> None:
    bars = synthetic_bars(1_000, n_days=5, roll_days=(2, 4), seed=1)

    ts = bars.column("ts_close").to_numpy()
    ids = bars.column("instrument_id").to_numpy()
    days = bars.column("trading_day").to_numpy()
    assert bars.schema.equals(BAR_SCHEMA)
    assert bars.num_rows == 1_000 and len(np.unique(days)) == 5
    assert (np.diff(ts) > 0).all() and (bars.column("ts_open").to_numpy() <= ts).all()
    assert (bars.column("bid_px_00").to_numpy() < bars.column("ask_px_00").to_numpy()).all()
    assert len(np.unique(ids)) == 3 and (np.diff(ids.astype(np.int64)) >= 0).all()
    assert ids[days == days[0]].max() == ids[0]  # the first roll is on day 2, not before
    assert (bars.column("sell_volume").to_numpy() + bars.column("buy_volume").to_numpy()
            <= bars.column("volume").to_numpy()).all()  # fmt: skip


def test_synthetic_bars_same_seed_same_table() -> None:
    assert synthetic_bars(200, n_days=2, seed=3).equals(synthetic_bars(200, n_days=2, seed=3))


def test_synthetic_bars_fewer_bars_than_days_raises() -> None:
    with pytest.raises(InvalidInputError, match="need 1 <= n_days <= n_bars"):
        synthetic_bars(3, n_days=5)
