"""The pieces of ingest on nodes that share no folder that run without a cluster or S3."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fxstore.config import BarConfig, IngestConfig
from fxstore.errors import SchemaError
from fxstore.ingest import open_dbn
from fxstore.ingest.run.day_builder import GroupTask, ObjectIO, build_group
from fxstore.ingest.run.objects import build_group_in_task, object_path
from fxstore.ingest.run.plan import plan_ingest
from fxstore.remote import InputObject
from tests.conftest import SynthMarket

FRONT = IngestConfig(symbol="ES.FUT", bars=BarConfig(target_bars_per_day=20))


def _day_task(market: SynthMarket, index: int) -> GroupTask:
    source = open_dbn([market.folder])
    plan = plan_ingest(FRONT, [f.path for f in source.definitions])
    return GroupTask(paths=(source.files[index].path,), days=None, plan=plan)


def test_build_group_with_only_builds_that_instrument_on_that_day_alone(
    two_roll_market: SynthMarket,
) -> None:
    task = _day_task(two_roll_market, 12)
    first = build_group(task).days[0]
    other = max(first.activity)  # any instrument with records that day
    chosen = build_group(task, choose=lambda _day, _listed: {other}).days[0]

    again = build_group(dataclasses.replace(task, only=(first.day, other))).days[0]

    assert again.built == {other}
    assert again.bars[other].equals(chosen.bars[other])


def test_task_without_object_io_builds_the_group_as_it_is(two_roll_market: SynthMarket) -> None:
    task = _day_task(two_roll_market, 3)

    result = build_group_in_task(task)

    assert [d.day for d in result.days] == [d.day for d in build_group(task).days]


def test_task_error_names_the_object_not_the_scratch_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_roll_market: SynthMarket
) -> None:
    from fxstore.ingest.run import objects

    task = _day_task(two_roll_market, 3)
    item = InputObject("s3://bucket/raw/day.dbn.zst", 10, 0, None)

    class Cut:  # the object as the bucket holds it: cut short
        def download(self, _key: str, dest: Path) -> None:
            data = task.paths[0].read_bytes()
            dest.write_bytes(data[: len(data) // 2])

    monkeypatch.setattr(objects, "_bucket_of", lambda _item: Cut())
    remote = dataclasses.replace(task, paths=(object_path(item),), objects=ObjectIO(inputs=(item,)))

    with pytest.raises(SchemaError) as caught:
        build_group_in_task(remote)

    assert str(caught.value).startswith(f"{item.url}: ")
    assert "fxstore-task-" not in str(caught.value)


def test_local_input_among_s3_inputs_on_ray_is_refused_before_anything_starts(
    two_roll_market: SynthMarket, tmp_path: Path
) -> None:
    from fxstore.config.executor import ExecutorConfig
    from fxstore.errors import InvalidInputError
    from fxstore.ingest.run.pipeline import ingest

    pytest.importorskip("ray")
    on_ray = dataclasses.replace(FRONT, workers=0, executor=ExecutorConfig("ray"))
    item = InputObject("s3://bucket/raw/day.dbn.zst", 10, 0, None)

    with pytest.raises(InvalidInputError, match="a local input among s3:// inputs"):
        ingest(on_ray, [item, two_roll_market.folder], tmp_path)

    assert list(tmp_path.iterdir()) == []
