"""The ``oracle`` reference: a policy that sees the planted signal itself.

On the built-in synthetic market the signal that moves prices is known: synth writes it to a
side file per trading day next to the DBN files (:mod:`fxstore.synth.signal`); it never enters
the fxcache features. The oracle reads it at each bar's close (the last sample at or before
``ts_close`` on the same trading day; 0 before the day's first sample) and trades it as
``linear`` trades its prediction: +1 / −1 contract beyond a no-trade band, holding in between,
the band (multiples of the signal's standard deviation on the training rows) chosen on the
validation slice with the same costs
(:func:`fxstore.train.evaluate.references.linear.choose_band`). Its PnL is the
ceiling of what was learnable with these positions and costs. On real data there is no side
file, and the reports say the oracle is absent.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig
from fxstore.errors import InvalidInputError
from fxstore.train.env.market import ContractSpec, Market
from fxstore.train.evaluate.references.base import ReferenceInputs, ReferencePositions
from fxstore.train.evaluate.references.linear import band_positions, choose_band
from fxstore.train.evaluate.walkforward import Fold

__all__ = ["ORACLE", "PlantedSignal", "load_planted_signal", "oracle_positions", "signal_at_bars"]

logger = logging.getLogger(__name__)

#: Side files of the planted signal (fxstore.synth.signal.SIGNAL_FILE_SUFFIX).
_PATTERN = "glbx-mdp3-*.planted-signal.npz"
_EPOCH = dt.date(1970, 1, 1)
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class PlantedSignal:
    """The planted signal at every fxcache row, or why there is none."""

    values: F64 | None
    """float64 ``(n_rows,)`` signal at each row's close; None when absent."""
    reason: str
    """Where it came from, or why it is absent (for the report)."""


def signal_at_bars(
    ts_close: npt.NDArray[np.int64],
    trading_day: npt.NDArray[np.int32],
    sample_ts: npt.NDArray[np.int64],
    sample_day: npt.NDArray[np.int32],
    sample_signal: npt.NDArray[np.floating],
) -> F64:
    """The last sample at or before each bar's close on the bar's trading day (else 0).

    Samples are sorted by `sample_ts` (strictly increasing).
    """
    at = np.searchsorted(sample_ts, ts_close, side="right") - 1
    ok = at >= 0
    ok[ok] = sample_day[at[ok]] == trading_day[ok]
    out = np.zeros(len(ts_close))
    out[ok] = sample_signal[at[ok]]
    return out


def _read(path: Path) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32], int]:
    try:
        day = dt.datetime.strptime(path.name[10:18], "%Y%m%d").date()
        with np.load(path, allow_pickle=False) as data:
            ts, signal = data["ts_recv"].astype(np.int64), data["signal"].astype(np.float32)
    except (OSError, ValueError, KeyError) as err:
        raise InvalidInputError(
            f"{path}: not a planted-signal side file ({err}); regenerate it with fxstore synth."
        ) from err
    if ts.shape != signal.shape:
        raise InvalidInputError(f"{path}: ts_recv and signal differ in length; regenerate it.")
    return ts, signal, (day - _EPOCH).days


def load_planted_signal(
    folder: Path, ts_close: npt.NDArray[np.int64], trading_day: npt.NDArray[np.int32]
) -> PlantedSignal:
    """The planted signal of `folder`'s side files at every row, if they cover every day.

    Absent (``values`` None) when the folder has no side file (real data), or when the files
    miss a trading day of the rows (the fxcache was not built from this synthetic market).
    """
    files = sorted(Path(folder).glob(_PATTERN)) if Path(folder).is_dir() else []
    if not files:
        return PlantedSignal(None, f"no planted signal in {folder} (real data has none)")
    parts = [_read(p) for p in files]
    days = {d for _, _, d in parts}
    missing = sorted(set(np.unique(trading_day).tolist()) - days)
    if missing:
        first = (_EPOCH + dt.timedelta(days=int(missing[0]))).isoformat()
        return PlantedSignal(
            None,
            f"the planted-signal files in {folder} miss {len(missing)} of the cache's trading "
            f"days (first {first}): the cache was not built from that market",
        )
    ts = np.concatenate([p[0] for p in parts])
    signal = np.concatenate([p[1] for p in parts])
    day = np.concatenate([np.full(len(p[0]), p[2], np.int32) for p in parts])
    order = np.argsort(ts, kind="stable")
    values = signal_at_bars(ts_close, trading_day, ts[order], day[order], signal[order])
    return PlantedSignal(values, f"planted signal from {len(files)} files in {folder}")


def oracle_positions(
    signal: F64,
    market: Market,
    fold: Fold,
    env_config: EnvConfig,
    spec: ContractSpec,
    *,
    capital: float,
) -> tuple[F64, F64, float]:
    """The oracle's positions on the fold's test window and training part, and its band.

    `signal` is :attr:`PlantedSignal.values` (one value per market row). Without a
    validation slice the band is 0 (trade the signal's sign).
    """
    if signal.shape != (market.n_rows,):
        raise InvalidInputError(
            f"`signal` must have one value per market row ({market.n_rows}), had {signal.shape}."
        )
    lo, hi = fold.train
    spread = float(np.std(signal[lo:hi])) if hi > lo else 1.0
    v_lo, v_hi = fold.validation
    band = 0.0
    if v_hi - v_lo >= 2:
        band, _score = choose_band(
            market, signal[v_lo:v_hi], spread, fold.validation, env_config, spec, capital=capital
        )

    def held(a: int, b: int) -> F64:
        if not math.isfinite(band):
            return np.zeros(b - a)
        return band_positions(signal[a:b], band)

    return held(*fold.test), held(*fold.train), band


@dataclass(frozen=True, slots=True)
class _Oracle:
    """``oracle`` as a reference: absent (None) without a planted signal."""

    name: str = "oracle"
    needs_planted: bool = True

    def positions(self, inputs: ReferenceInputs) -> ReferencePositions | None:
        if inputs.planted is None:
            return None
        test, _train, _band = oracle_positions(
            inputs.planted,
            inputs.market,
            inputs.fold,
            inputs.env,
            inputs.spec,
            capital=inputs.capital,
        )
        return ReferencePositions(test)


ORACLE: Final = _Oracle()
