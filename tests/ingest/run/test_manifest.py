from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from fxstore.config import BarConfig, IngestConfig
from fxstore.errors import FxStoreWarning
from fxstore.ingest import ingest, open_dbn
from fxstore.ingest.run.manifest import warn_if_target_missed, warn_implausible
from fxstore.ingest.run.plan import plan_ingest
from tests.conftest import SynthMarket

PLAN = plan_ingest(IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=100)))


def _days(n_bars: int, reasons: dict[str, int]) -> list[dict[str, object]]:
    return [{"n_bars": n_bars, "n_kept": 5000, "close_reasons": reasons}] * 3


def test_warn_if_target_missed_near_the_target_is_silent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_target_missed(PLAN, _days(80, {"threshold": 80}))


def test_warn_if_target_missed_says_the_rate_and_the_binding_limit() -> None:
    with pytest.warns(FxStoreWarning) as caught:
        warn_if_target_missed(PLAN, _days(40, {"threshold": 10, "max_trades": 30}))

    assert str(caught[0].message) == (
        "ES.FUT: 40.0 bars per trading day against --target-bars-per-day 100 (close reasons: "
        "threshold 25%, max_trades 75%); most bars closed at their trade limit (max_trades), "
        "which --band 3 sets from the day's trade rate: a wider band lets them follow the "
        "target."
    )


def test_warn_if_target_missed_by_the_flow_says_so() -> None:
    with pytest.warns(FxStoreWarning, match="this is the rate the flow gave"):
        warn_if_target_missed(PLAN, _days(40, {"threshold": 35, "max_trades": 5}))


def test_warn_if_target_missed_ignores_plain_bars() -> None:
    plan = plan_ingest(IngestConfig(bars=BarConfig("tick", threshold=10)))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_target_missed(plan, _days(1, {"threshold": 1}))


def test_ingest_unreachable_target_warns(two_roll_market: SynthMarket, tmp_path: Path) -> None:
    day = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))[:2]
    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=1e6))

    with pytest.warns(FxStoreWarning, match=r"bars per trading day against .* 1e\+06"):
        ingest(config, day, tmp_path)


def test_ingest_manifest_records_the_bar_rule_and_close_reasons_per_day(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    days = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))[:3]

    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20))

    with pytest.warns(FxStoreWarning, match="10.3 bars per trading day"):  # a small market
        summary = ingest(config, days, tmp_path)

    manifest = json.loads((summary.out_dir / "manifest.json").read_text())
    rule = manifest["bar_rule"]
    assert rule["band"] == 3.0 and rule["target_bars_per_day"] == 20.0
    assert rule["close_reasons"][:3] == ["threshold", "min_trades", "max_trades"]
    for entry in (d for d in manifest["days"] if d["n_bars"]):
        assert sum(entry["close_reasons"].values()) == entry["n_bars"]
        assert entry["close_reasons"].get("warmup") == 1


def test_ingest_truncated_input_is_recorded_and_warned_about_on_every_run(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    import zstandard

    day = sorted(two_roll_market.folder.glob("*.mbp-10.dbn.zst"))[3]
    with zstandard.ZstdDecompressor().stream_reader(day.read_bytes()) as reader:
        plain = reader.read()
    cut = tmp_path / day.name.removesuffix(".zst")
    cut.write_bytes(plain[:-100])  # a download that stopped 100 bytes short
    config = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=5))

    with pytest.warns(FxStoreWarning, match="partial record"):
        summary = ingest(config, [cut], tmp_path / "store")

    manifest = json.loads((summary.out_dir / "manifest.json").read_text())
    (entry,) = manifest["inputs"]
    assert entry["truncated"]["dropped_bytes"] == 368 - 100
    n_records = sum(c.records.size for c in open_dbn(day).iter_chunks())
    assert entry["truncated"]["records_kept"] == n_records - 1  # the cut record is dropped
    last_day = entry["truncated"]["last_trading_day"]
    assert [d["truncated"] for d in manifest["days"] if d["trading_day"] == last_day] == [
        [cut.name]
    ]
    with pytest.warns(FxStoreWarning, match=rf"input {cut.name} was truncated .* incomplete"):
        again = ingest(config, [cut], tmp_path / "store")
    assert again.up_to_date


def test_warn_implausible_names_the_count_range_bars_and_first_day() -> None:
    plan = plan_ingest(IngestConfig(symbol="ES.FUT"))
    entries = [
        {"trading_day": "2024-01-02", "contract": "ESH4", "n_bars": 90},
        {"trading_day": "2024-01-03", "contract": "ESH4", "n_bars": 90, "n_implausible_px": 3,
         "n_bars_implausible_px": 2},
    ]  # fmt: skip

    with pytest.warns(FxStoreWarning) as caught:
        warn_implausible(plan, entries)

    (message,) = [str(w.message) for w in caught]
    assert message.startswith("ES.FUT: 3 book states or trades priced outside the plausible")
    assert (
        "[100, 100000] points, builtin), or trades more than 20% from the book's mid or of more "
        "than 1,000,000 contracts, in 2 bars on 1 trading day(s), first 2024-01-03" in message
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_implausible(plan, entries[:1])  # nothing outside: no warning
