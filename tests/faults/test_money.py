"""Money: PnL is booked with the contract facts the bars were built with, never a guess from
the store symbol; facts that cannot be right are refused at ingest, leaving nothing behind."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fxstore.config import BacktestConfig, EnvConfig, FeatureConfig, WalkForwardConfig
from fxstore.errors import InvalidInputError
from fxstore.features.precompute import precompute
from fxstore.ingest.run.pipeline import ingest
from fxstore.train.env.data import open_cache
from fxstore.train.env.market import contract_spec, evaluate_positions
from fxstore.train.loop import train
from fxstore.train.runs.backtest import run_backtest
from tests.conftest import SynthMarket
from tests.faults._inject import error_line, run_cli
from tests.faults._market import expiration_ns, subset
from tests.faults.conftest import INGEST
from tests.train._tiny import TINY

#: Walk-forward folds that fit the 32-day subsets (about 15 days once features warm up).
FOLDS = WalkForwardConfig(train_days=8, test_days=4, validation_fraction=0.25)
ESM4 = 432406


def _ingest_args(folder: Path, root: Path, *extra: str) -> list[str]:
    return [
        "ingest",
        str(folder),
        "--store",
        str(root),
        "--target-bars-per-day",
        "20",
        "--workers",
        "1",
        "-q",
        *extra,
    ]


@pytest.fixture(scope="module")
def mes_priced(two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 32 days whose definitions say $5 a point (the bars carry it), precomputed."""
    folder = subset(
        two_roll_market, tmp_path_factory.mktemp("in") / "x5", unit_of_measure_qty=5 * 10**9
    )
    root = tmp_path_factory.mktemp("x5_store")
    ingest(INGEST, [folder], root)
    precompute(FeatureConfig(), root)
    return root


def test_backtest_books_with_the_multiplier_the_bars_carry(mes_priced: Path) -> None:
    result = run_backtest(BacktestConfig(walkforward=FOLDS, plots=False), mes_priced)

    recorded = json.loads((result.run_dir / "config.json").read_text())["contract"]
    assert (recorded["multiplier"], recorded["tick_size"], recorded["source"]) == (
        5.0,
        0.25,
        "bars",
    )
    assert recorded["contracts"] == ["ESH4", "ESM4"]


def test_train_books_with_the_multiplier_the_bars_carry_and_records_it(mes_priced: Path) -> None:
    result = train(dataclasses.replace(TINY, max_folds=1, walkforward=FOLDS), mes_priced)

    recorded = json.loads((result.run_dir / "config.json").read_text())["contract"]
    assert (recorded["multiplier"], recorded["source"]) == (5.0, "bars")


def test_contract_spec_of_a_cache_is_the_bars_facts_not_the_roots(mes_priced: Path) -> None:
    cache = open_cache(mes_priced, "ES.FUT", None)

    spec = contract_spec("ES.FUT", None, cache.contracts)

    assert (spec.multiplier, spec.tick_value) == (5.0, 1.25)


def test_ingest_multiplier_option_keeps_the_tick_size_and_books_at_it(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    folder = subset(two_roll_market, tmp_path / "in")
    root = tmp_path / "store"
    assert run_cli(*_ingest_args(folder, root, "--multiplier", "5")).exit_code == 0

    precompute(FeatureConfig(), root)  # was: "the bars' tick size is not known"
    cache = open_cache(root, "ES.FUT", None)

    spec = contract_spec("ES.FUT", None, cache.contracts)
    assert (spec.multiplier, spec.tick_size, spec.source) == (5.0, 0.25, "bars")


def test_ingest_id_of_another_root_is_refused_and_writes_nothing(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    folder = subset(two_roll_market, tmp_path / "in", n_days=3)
    root = tmp_path / "store"

    line = error_line(
        run_cli(
            *_ingest_args(folder, root, "--symbol", "MES.FUT", "--instrument-mode", f"id={ESM4}")
        )
    )

    assert line == (
        f"Error: --instrument-mode id={ESM4} is ESM4 (its symbology), of root 'ES', not of "
        "--symbol MES.FUT (root 'MES'): its bars would be stored and booked as MES's; pass "
        "--symbol ES.FUT."
    )
    assert not (root / "bars").exists()


_FIX = (
    "the definition record is damaged or of another product; pass correct ones with "
    "--definitions PATH (or --multiplier to set the multiplier)."
)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"min_price_increment": 0}, "gives tick size (min_price_increment) 0: it must be > 0"),
        (
            {"unit_of_measure_qty": 50_000 * 10**9},
            "gives multiplier (unit_of_measure_qty) 50000, implausible for ES (contract specs: "
            "50; more than 10x away)",
        ),
        (
            {"unit_of_measure_qty": 2**63 - 1},
            "gives multiplier (unit_of_measure_qty) undefined: it must be > 0",
        ),
        ({"unit_of_measure_qty": 0}, "gives multiplier (unit_of_measure_qty) 0: it must be > 0"),
        (
            {"unit_of_measure_qty": -50 * 10**9},
            "gives multiplier (unit_of_measure_qty) -50: it must be > 0",
        ),
    ],
)
def test_ingest_implausible_definition_is_refused_and_leaves_nothing(
    two_roll_market: SynthMarket, tmp_path: Path, fields: dict[str, int], why: str
) -> None:
    folder = subset(two_roll_market, tmp_path / "in", n_days=3, **fields)
    root = tmp_path / "store"

    line = error_line(run_cli(*_ingest_args(folder, root)))

    assert line.startswith("Error: the definition of ESH4 (instrument id 432403) ")
    assert line.endswith(f"{why}; {_FIX}")
    assert not (root / "bars").exists()


def test_ingest_definition_expired_before_its_data_is_refused_and_leaves_nothing(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    expired = expiration_ns(dt.date(2024, 1, 19))
    folder = subset(two_roll_market, tmp_path / "in", n_days=3, expiration=expired)
    root = tmp_path / "store"

    line = error_line(run_cli(*_ingest_args(folder, root)))

    assert line == (
        "Error: the definition of ESH4 (instrument id 432403) says it expired on 2024-01-19, "
        f"but the data has its records on trading day 2024-02-26; {_FIX}"
    )
    assert not (root / "bars").exists()


def test_contract_spec_of_contracts_that_disagree_gives_each_its_own() -> None:
    contracts = {
        "ESH4": {"multiplier": 50.0, "tick_size": 0.25, "instrument_class": "F"},
        "ESM4": {"multiplier": 5.0, "tick_size": 0.25, "instrument_class": "F"},
    }

    spec = contract_spec("ES.FUT", None, contracts)

    assert spec.varies
    assert spec.by_contract == (("ESH4", 50.0, 0.25), ("ESM4", 5.0, 0.25))


def test_contract_spec_of_contracts_that_disagree_where_one_records_none_is_refused() -> None:
    contracts = {
        "ESH4": {"multiplier": 50.0, "tick_size": 0.25, "instrument_class": "F"},
        "ESM4": {"multiplier": 5.0, "tick_size": 0.25, "instrument_class": "F"},
        "ESU4": {"tick_size": 0.25, "instrument_class": "F"},
    }

    with pytest.raises(InvalidInputError) as info:
        contract_spec("ES.FUT", None, contracts)

    assert str(info.value) == (
        "the bars of 'ES.FUT' hold contracts of different multiplier (ESH4 50, ESM4 5), and "
        "ESU4 records none: its rows cannot be booked; re-run `fxstore ingest --force` with "
        "its definition (--definitions PATH), or pass --multiplier to book every contract at "
        "one value."
    )


@pytest.fixture(scope="module")
def respecified(two_roll_market: SynthMarket, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The last 32 days (ESM4, then ESU4 after the warm-up) with ESU4's definition saying $5
    a point and ESM4's $50 (a contract spec changed mid-series), ingested and precomputed."""
    folder = subset(
        two_roll_market,
        tmp_path_factory.mktemp("in") / "esu4_x5",
        only="ESU4",
        start=-1,
        unit_of_measure_qty=5 * 10**9,
    )
    root = tmp_path_factory.mktemp("respecified_store")
    ingest(INGEST, [folder], root)
    precompute(FeatureConfig(), root)
    return root


def _bar_contracts(root: Path, ts_close: np.ndarray) -> list[str]:
    """The contract of the bar closing at each of `ts_close`, as the bar files say it."""
    files = sorted((root / "bars").rglob("*.parquet"))
    table = pa.concat_tables(pq.read_table(f, columns=["ts_close", "contract"]) for f in files)
    closes = table.column("ts_close").cast(pa.int64()).to_pylist()
    by_close = dict(zip(closes, table.column("contract").to_pylist(), strict=True))
    return [by_close[int(ts)] for ts in ts_close]


def test_each_row_books_at_its_own_contracts_multiplier(respecified: Path) -> None:
    cache = open_cache(respecified, "ES.FUT", None)
    market, n = cache.market, cache.market.n_rows
    spec = contract_spec("ES.FUT", None, cache.contracts)
    contracts = _bar_contracts(respecified, cache.ts_close)
    mult = np.array([{"ESM4": 50.0, "ESU4": 5.0}[c] for c in contracts])
    config = EnvConfig(commission_per_contract=1.25, slippage_ticks=1.0)
    positions = np.random.default_rng(7).choice([-1.0, 0.0, 1.0, 2.0], size=n)

    book = evaluate_positions(market, positions, 0, n, config, spec)

    # by hand, row by row: the move at the row's own contract's multiplier, costs likewise
    close, roll = market.close, market.is_roll
    cost = market.half_spread * mult + 1.0 * 0.25 * mult + 1.25
    expected, held = np.zeros(n), 0.0
    for t in range(n - 1):
        h = positions[t]
        expected[t] = -abs(h - held) * cost[t]
        if roll[t + 1]:  # closed at the old contract's close, reopened in the new one
            reopen = t + 1 < n - 1
            expected[t] -= abs(h) * (cost[t] + (cost[t + 1] if reopen else 0.0))
            held = h if reopen else 0.0
        else:
            expected[t] += h * (close[t + 1] - close[t]) * mult[t]
            held = h
    expected[-1] = -abs(held) * cost[-1]
    assert set(contracts) == {"ESM4", "ESU4"} and int(roll.sum()) == 1
    np.testing.assert_allclose(book.pnl, expected, rtol=1e-12, atol=1e-9)


def test_backtest_and_train_record_each_contracts_facts(respecified: Path) -> None:
    backtest = run_backtest(BacktestConfig(walkforward=FOLDS, plots=False), respecified)
    trained = train(dataclasses.replace(TINY, max_folds=1, walkforward=FOLDS), respecified)

    for result in (backtest, trained):
        recorded = json.loads((result.run_dir / "config.json").read_text())["contract"]
        assert recorded["by_contract"] == {
            "ESM4": {"multiplier": 50.0, "tick_size": 0.25},
            "ESU4": {"multiplier": 5.0, "tick_size": 0.25},
        }
        assert (recorded["multiplier"], recorded["source"]) == (None, "bars")


def test_contract_spec_of_the_bars_gives_way_to_an_explicit_option() -> None:
    contracts = {"ESH4": {"multiplier": 50.0, "tick_size": 0.25, "instrument_class": "F"}}

    spec = contract_spec("ES.FUT", EnvConfig(multiplier=5.0), contracts)

    assert (spec.multiplier, spec.tick_size, spec.source) == (5.0, 0.25, "option")


def test_a_cache_without_its_bars_books_with_the_facts_it_recorded(
    mes_priced: Path, tmp_path: Path
) -> None:
    """As on a machine that pulled only the fxcache of an s3:// store."""
    root = tmp_path / "only_cache"
    shutil.copytree(mes_priced / "fxcache", root / "fxcache")

    cache = open_cache(root, "ES.FUT", None)

    assert contract_spec("ES.FUT", None, cache.contracts).multiplier == 5.0
