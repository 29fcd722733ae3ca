"""Splitting UTC-day files into trading-day fragments: OS errors are one StoreAccessError."""

from __future__ import annotations

import errno
import io
from pathlib import Path

import pytest

from fxstore.errors import StoreAccessError
from fxstore.ingest.run import resplit
from fxstore.ingest.run.resplit import SplitTask, split_file
from fxstore.market.calendar import DEFAULT_CALENDAR
from tests.conftest import SynthMarket

_FULL = "No space left on device"


class _FullDisk(io.BytesIO):
    """A file whose writes meet a full disk."""

    def write(self, _data: object) -> int:
        raise OSError(errno.ENOSPC, _FULL)


def _task(market: SynthMarket, tmp_path: Path) -> SplitTask:
    first = sorted(market.folder.glob("*.mbp-10.dbn.zst"))[1]
    return SplitTask(
        path=first,
        index=1,
        split_dir=tmp_path / ".split",
        chunk_records=10_000,
        calendar=DEFAULT_CALENDAR,
    )


@pytest.mark.parametrize("fails", ["open", "write"])
def test_split_file_full_disk_is_one_store_access_error_naming_the_fragment(
    two_roll_market_utc: SynthMarket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fails: str,
) -> None:
    def full_open(path: Path, _mode: str) -> io.BytesIO:
        if fails == "open":
            raise OSError(errno.ENOSPC, _FULL, str(path))
        return _FullDisk()

    monkeypatch.setattr(resplit, "open", full_open, raising=False)

    with pytest.raises(StoreAccessError) as info:
        split_file(_task(two_roll_market_utc, tmp_path))

    message = str(info.value)
    assert message.startswith(f"cannot write {tmp_path / '.split'}/")
    assert message.endswith(
        f"000001.rec ({_FULL}): free space on that disk or use another --store, then re-run "
        "(finished work is kept)."
    )
