"""Money: PnL is booked with the contract facts the bars were built with, never a guess from
the store symbol; facts that cannot be right are refused at ingest, leaving nothing behind."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fxstore.cli import cli
from fxstore.config import BacktestConfig, EnvConfig, FeatureConfig, WalkForwardConfig
from fxstore.errors import InvalidInputError
from fxstore.features.precompute import precompute
from fxstore.ingest.run.pipeline import ingest
from fxstore.train.env.data import open_cache
from fxstore.train.env.market import contract_spec
from fxstore.train.loop import train
from fxstore.train.runs.backtest import run_backtest
from tests.conftest import SynthMarket
from tests.faults._market import expiration_ns, subset
from tests.faults.conftest import INGEST
from tests.train._tiny import TINY

#: Walk-forward folds that fit the 32-day subsets (about 15 days once features warm up).
FOLDS = WalkForwardConfig(train_days=8, test_days=4, validation_fraction=0.25)
ESM4 = 432406


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return result.output.strip().splitlines()[-1]


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
    assert _run(*_ingest_args(folder, root, "--multiplier", "5")).exit_code == 0

    precompute(FeatureConfig(), root)  # was: "the bars' tick size is not known"
    cache = open_cache(root, "ES.FUT", None)

    spec = contract_spec("ES.FUT", None, cache.contracts)
    assert (spec.multiplier, spec.tick_size, spec.source) == (5.0, 0.25, "bars")


def test_ingest_id_of_another_root_is_refused_and_writes_nothing(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    folder = subset(two_roll_market, tmp_path / "in", n_days=3)
    root = tmp_path / "store"

    line = _error_line(
        _run(*_ingest_args(folder, root, "--symbol", "MES.FUT", "--instrument-mode", f"id={ESM4}"))
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

    line = _error_line(_run(*_ingest_args(folder, root)))

    assert line.startswith("Error: the definition of ESH4 (instrument id 432403) ")
    assert line.endswith(f"{why}; {_FIX}")
    assert not (root / "bars").exists()


def test_ingest_definition_expired_before_its_data_is_refused_and_leaves_nothing(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    expired = expiration_ns(dt.date(2024, 1, 19))
    folder = subset(two_roll_market, tmp_path / "in", n_days=3, expiration=expired)
    root = tmp_path / "store"

    line = _error_line(_run(*_ingest_args(folder, root)))

    assert line == (
        "Error: the definition of ESH4 (instrument id 432403) says it expired on 2024-01-19, "
        f"but the data has its records on trading day 2024-02-26; {_FIX}"
    )
    assert not (root / "bars").exists()


def test_contract_spec_of_contracts_that_disagree_is_refused() -> None:
    contracts = {
        "ESH4": {"multiplier": 50.0, "tick_size": 0.25, "instrument_class": "F"},
        "ESM4": {"multiplier": 5.0, "tick_size": 0.25, "instrument_class": "F"},
    }

    with pytest.raises(InvalidInputError) as info:
        contract_spec("ES.FUT", None, contracts)

    assert str(info.value) == (
        "the bars of 'ES.FUT' hold contracts of different multiplier (ESH4 50, ESM4 5): one "
        "multiplier books a whole series; ingest them as separate series, or pass "
        "--multiplier to book every contract at one value."
    )


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
