"""Contract facts reach the bars from the instrument master, never from an ES default."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fxstore.config import BarConfig, IngestConfig, SynthConfig
from fxstore.errors import InvalidInputError
from fxstore.ingest import ingest
from fxstore.synth import generate_market

pytestmark = pytest.mark.quick

PEER = Path(__file__).parents[2] / "data" / "peer-dbn"
BARS = BarConfig(target_bars_per_day=15)  # what a 4,000-event day can give


@pytest.fixture(scope="module")
def mes_market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mes") / "MES.FUT"
    config = SynthConfig(
        start=dt.date(2024, 3, 4), end=dt.date(2024, 3, 6), events_per_day=4000, root="MES"
    )
    generate_market(config, folder)
    return folder


def _first_day(out_dir: Path) -> dict[str, list[object]]:
    day = sorted(out_dir.glob("*.parquet"))[0]
    return pq.read_table(day, columns=["volume", "vwap", "dollar_volume"]).to_pydict()


@pytest.mark.parametrize(
    ("inputs", "source"),
    [("folder", "definition"), ("mbp10-only", "builtin")],  # synth writes definitions too
)
def test_ingest_mes_dollar_volume_uses_mes_multiplier(
    mes_market: Path, tmp_path: Path, inputs: str, source: str
) -> None:
    paths = [mes_market] if inputs == "folder" else sorted(mes_market.glob("*.mbp-10.dbn.zst"))

    summary = ingest(IngestConfig(symbol="MES.FUT", bars=BARS), paths, tmp_path)

    bars = _first_day(summary.out_dir)
    rows = zip(bars["volume"], bars["vwap"], bars["dollar_volume"], strict=True)
    for volume, vwap, dollars in rows:
        assert dollars == pytest.approx(float(volume) * float(vwap) * 5.0)  # $5 a point, not 50
    manifest = json.loads((summary.out_dir / "manifest.json").read_text())
    facts = manifest["contracts"]["MESH4"]
    assert (facts["multiplier"], facts["multiplier_source"], facts["tick_size"]) == (
        5.0,
        source,
        0.25,
    )


def test_ingest_multiplier_option_overrides_the_master(mes_market: Path, tmp_path: Path) -> None:
    config = IngestConfig(symbol="MES.FUT", bars=BarConfig(target_bars_per_day=15, multiplier=50.0))

    summary = ingest(config, [mes_market], tmp_path)

    manifest = json.loads((summary.out_dir / "manifest.json").read_text())
    facts = manifest["contracts"]["MESH4"]  # the option overrides the multiplier, nothing else
    assert (facts["multiplier"], facts["multiplier_source"]) == (50.0, "option")
    assert (facts["tick_size"], facts["source"], facts["expiration"]) == (
        0.25,
        "definition",
        "2024-03-15",
    )


def test_ingest_definition_files_are_read_and_recorded(mes_market: Path, tmp_path: Path) -> None:
    folder = tmp_path / "batch"
    shutil.copytree(mes_market, folder)
    shutil.copy(PEER / "GLBX.MDP3.definition-es-fut.dbn.zst", folder)

    summary = ingest(IngestConfig(symbol="MES.FUT", bars=BARS), [folder], tmp_path / "store")

    manifest = json.loads((summary.out_dir / "manifest.json").read_text())
    names = sorted(d["name"] for d in manifest["definitions"])
    assert names == [
        "GLBX.MDP3.definition-es-fut.dbn.zst",
        "glbx-mdp3-20240304-20240306.definition.dbn.zst",
    ]
    assert all(len(d["sha256"]) == 64 for d in manifest["definitions"])


def test_ingest_unknown_root_raises_naming_definitions(mes_market: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"root 'XYZ'.*--definitions PATH"):
        ingest(IngestConfig(symbol="XYZ.FUT"), [mes_market], tmp_path)

    assert list(tmp_path.iterdir()) == []
