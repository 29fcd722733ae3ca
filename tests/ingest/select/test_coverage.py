from __future__ import annotations

from pathlib import Path

import pytest

from fxstore.config import IngestConfig, InstrumentSelection
from fxstore.errors import SymbolNotFoundError
from fxstore.ingest import ingest
from fxstore.ingest.dbn.symbology import Symbology, SymbolSpan
from fxstore.ingest.run import pipeline
from fxstore.ingest.select.coverage import check_selection, describe_roots
from tests.conftest import SynthMarket

DAY_NS = 86_400 * 10**9
T0 = 1_704_153_600 * 10**9  # 2024-01-02 00:00 UTC


def _symbology(*symbols: tuple[int, str]) -> Symbology:
    symbology = Symbology()
    for instrument_id, symbol in symbols:
        symbology.add_span(instrument_id, SymbolSpan(T0, T0 + DAY_NS, symbol))
    return symbology


def test_describe_roots_groups_outrights_by_root_and_counts_the_rest() -> None:
    symbology = _symbology((1, "ESH4"), (2, "ESM4"), (3, "NQH4"), (4, "ESH4-ESM4"))

    assert describe_roots(symbology) == (
        "ES (2 outrights: ESH4, ESM4); NQ (1 outrights: NQH4); 1 spreads or other instruments"
    )


@pytest.mark.parametrize(
    ("selection", "root"),
    [
        (InstrumentSelection("all"), None),
        (InstrumentSelection("id", 2), None),
        (InstrumentSelection("front-month"), "ES"),
    ],
)
def test_check_selection_listed_passes(selection: InstrumentSelection, root: str | None) -> None:
    check_selection(selection, root, _symbology((1, "ESH4"), (2, "ESM4")), "the files")


def test_check_selection_without_symbology_passes() -> None:
    check_selection(InstrumentSelection("id", 7), None, Symbology(), "the files")


def test_check_selection_unlisted_id_raises_listing_ids() -> None:
    with pytest.raises(SymbolNotFoundError) as err:
        check_selection(InstrumentSelection("id", 99), None, _symbology((1, "ESH4")), "x.dbn")

    assert str(err.value) == (
        "No instrument id 99 in x.dbn; they list 1 instrument ids: 1 (ESH4). Pick one "
        "(`fxstore scan` lists them) or --instrument-mode all."
    )


def test_check_selection_other_root_raises_naming_the_symbol_to_pass() -> None:
    symbology = _symbology((1, "ESH4"), (2, "ESH4-ESM4"))

    with pytest.raises(SymbolNotFoundError) as err:
        check_selection(InstrumentSelection("front-month"), "NQ", symbology, "x.dbn")

    assert str(err.value) == (
        "No outright of root 'NQ' in x.dbn; they list ES (1 outrights: ESH4); 1 spreads or "
        "other instruments: pass --symbol ES.FUT."
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (IngestConfig(symbol="NQ.FUT"), "No outright of root 'NQ' in the "),
        (
            IngestConfig(symbol="ES.FUT", instrument_mode=InstrumentSelection("id", 99999)),
            "No instrument id 99999 ",
        ),
    ],
)
def test_ingest_selecting_nothing_raises_and_writes_nothing(
    two_roll_market: SynthMarket, tmp_path: Path, config: IngestConfig, message: str
) -> None:
    with pytest.raises(SymbolNotFoundError, match=message):
        ingest(config, [two_roll_market.folder], tmp_path)

    assert list(tmp_path.iterdir()) == []


def test_ingest_keeping_no_record_raises_and_leaves_no_folder(
    two_roll_market: SynthMarket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records decide where the symbology cannot (here: the early check is off)."""
    monkeypatch.setattr(pipeline, "check_selection", lambda *_args: None)
    config = IngestConfig(symbol="ES.FUT", instrument_mode=InstrumentSelection("id", 99999))

    with pytest.raises(SymbolNotFoundError, match=r"kept none of the .* MBP-10 records read"):
        ingest(config, [two_roll_market.folder], tmp_path)

    assert list(tmp_path.iterdir()) == []
