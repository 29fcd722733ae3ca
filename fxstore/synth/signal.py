"""The planted signal's side files: what the ``oracle`` reference policy trades.

The planted signal ``s`` is an AR(1) over a day's records (:mod:`fxstore.synth.events`):
``s(r + 1) = phi * s(r) + sqrt(1 - phi²) * n_r``, ``n_r`` counter-based normals, so it can be
replayed from the day's keys without the kernels. The fair value's step after record r
carries ``kappa * s(r)``: ``s`` just after a record predicts the moves that follow it.

Next to each trading day's DBN file(s) goes ``glbx-mdp3-YYYYMMDD.planted-signal.npz`` (numpy,
no pickle) with two arrays: ``ts_recv`` (int64 ns, strictly increasing) of every
`step`-th record of the day, and ``signal`` (float32), ``s`` just after that record. Ingest
never reads it (it takes only ``*.dbn`` / ``*.dbn.zst`` files), so the signal never enters
the fxcache features; :mod:`fxstore.train.evaluate.references.oracle` looks it up at each bar's
close.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from fxstore._jit import njit
from fxstore.config import SynthConfig
from fxstore.errors import InvalidInputError
from fxstore.synth.rng import normal_at

__all__ = [
    "SIGNAL_FILE_SUFFIX",
    "SignalLog",
    "bridge_terms",
    "planted_ic",
    "planted_strength",
    "signal_file_name",
    "signal_path",
    "strength_for_ic",
]

logger = logging.getLogger(__name__)

#: Suffix of the side files, after ``glbx-mdp3-YYYYMMDD``.
SIGNAL_FILE_SUFFIX: Final = ".planted-signal.npz"
#: Samples per signal half-life: the oracle's signal is at most this share of a half-life old.
SAMPLES_PER_HALF_LIFE: Final = 100


def signal_file_name(day: dt.date) -> str:
    """The side file of trading day `day`, e.g. ``glbx-mdp3-20240506.planted-signal.npz``."""
    return f"glbx-mdp3-{day:%Y%m%d}{SIGNAL_FILE_SUFFIX}"


@njit
def signal_path(
    key: np.uint64, phi: float, s0: float, n_records: int, step: int
) -> npt.NDArray[np.float64]:
    """``s(k + 1)`` for records k = step - 1, 2 step - 1, ... < n_records (the AR(1) replay)."""
    c = np.sqrt(1.0 - phi * phi)
    out = np.empty(n_records // step, dtype=np.float64)
    s = s0
    j = 0
    for r in range(n_records):
        s = phi * s + c * normal_at(key, r)
        if (r + 1) % step == 0:
            out[j] = s
            j += 1
    return out


class SignalLog:
    """Collects a day's sample times from its records and writes its side file.

    Call :meth:`start_day`, :meth:`observe` for each chunk of records in order, then
    :meth:`end_day`.
    """

    def __init__(self, out_dir: Path, step: int) -> None:
        self._out_dir = out_dir
        self._step = max(1, int(step))
        self._seen = 0
        self._ts: list[npt.NDArray[np.int64]] = []

    def start_day(self) -> None:
        self._seen, self._ts = 0, []

    def observe(self, records: npt.NDArray[np.void]) -> None:
        """Keep ``ts_recv`` of every `step`-th record (the day's records, in order)."""
        first = (-(self._seen + 1)) % self._step  # index of the next sampled record
        self._ts.append(np.array(records["ts_recv"][first :: self._step], dtype=np.int64))
        self._seen += len(records)

    def end_day(
        self, day: dt.date, key: np.uint64, phi: float, s0: float, shift: float = 0.0
    ) -> Path:
        """Replay the day's signal (plus its bridge `shift`) and write its side file."""
        from fxstore.store import atomic_path

        signal = signal_path(key, phi, s0, self._seen, self._step) + shift
        ts = np.concatenate(self._ts) if self._ts else np.empty(0, np.int64)
        path = self._out_dir / signal_file_name(day)
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, ts_recv=ts[: len(signal)], signal=signal.astype(np.float32))
        return path


def bridge_terms(
    gap: float, n_records: int, sigma: float, kappa: float, phi: float
) -> tuple[float, float]:
    """The day's bridge: (signal shift, slope per record) that close a `gap` (ticks).

    The free walk X over the day's n records ends `gap` ticks short of the next day's
    anchor. Conditioning the Gaussian pair (X, s) on the end point (Matheron's rule) moves
    each by its covariance with X(n) over Var X(n) times the gap: X by about r / n of it,
    and the signal by ``b = sigma kappa S / Var X(n)``, ``S = (1 + phi) / (1 - phi)`` (the
    signal's covariance with X(n) away from the day's ends, used all day). The shifted
    signal then carries ``n sigma kappa b`` of the gap through its drift and the slope the
    rest, so the day still ends exactly at the anchor. A bridge of the drift alone (the
    slope ``gap / n``) would take a persistent signal's moves back over the day: a
    day-scale reversal that a policy could trade and real prices do not have.
    """
    if kappa == 0.0:
        return 0.0, gap / n_records
    n = float(n_records)
    carried = (1.0 + phi) / (1.0 - phi)
    v_n = n * carried - 2.0 * phi * (1.0 - phi**n_records) / (1.0 - phi) ** 2
    shift = gap * sigma * kappa * carried / (sigma * sigma * (n + kappa * kappa * v_n))
    return shift, (gap - n * sigma * kappa * shift) / n


def planted_ic(strength: float, *, half_life_records: int, bar_records: float) -> float:
    """Information coefficient of the planted signal at `strength`, from the model.

    The correlation between ``s`` just after a bar's close and the fair value's move over the
    next `bar_records` records: with load ``L = 2 strength`` (see synth.day), ``phi`` from the
    half-life, ``k = L sqrt((1 - phi) / (1 + phi))`` and m records a bar,

        IC = k (1 - phi^m) / (1 - phi) / sqrt(m + k² V_m),
        V_m = m (1 + phi) / (1 - phi) - 2 phi (1 - phi^m) / (1 - phi)²

    (V_m the variance of a sum of m consecutive values of the unit AR(1)). The price's tick
    grid and the book's lag add a little noise, so data give slightly less.
    """
    load = 2.0 * strength
    phi = 0.5 ** (1.0 / half_life_records)
    m = float(bar_records)
    kappa = load * math.sqrt((1.0 - phi) / (1.0 + phi))
    carried = (1.0 - phi**m) / (1.0 - phi)
    v_m = m * (1.0 + phi) / (1.0 - phi) - 2.0 * phi * (1.0 - phi**m) / (1.0 - phi) ** 2
    return float(kappa * carried / math.sqrt(m + kappa * kappa * v_m))


#: Bars a trading day that the default ingest makes of this market: its dollar-imbalance
#: bars aim at 100 (BarConfig.target_bars_per_day) but land at about 70-77 a day here
#: (69.5 and 76.3 measured on the demo's market), so the IC is calibrated for bars of 75.
DEFAULT_BARS_PER_DAY: Final = 75.0


def planted_strength(config: SynthConfig) -> float:
    """The strength the day kernels use: `signal_strength`, or the one of `signal_ic`.

    `signal_ic` is calibrated for bars of ``events_per_day / 75`` records, the size of the
    default ingest's imbalance bars on this market (:data:`DEFAULT_BARS_PER_DAY`).
    """
    if config.signal_ic is None:
        return config.signal_strength
    return strength_for_ic(
        config.signal_ic,
        half_life_records=config.signal_half_life,
        bar_records=config.events_per_day / DEFAULT_BARS_PER_DAY,
    )


def strength_for_ic(ic: float, *, half_life_records: int, bar_records: float) -> float:
    """The signal strength in [0, 1] whose :func:`planted_ic` is `ic` (bisection)."""
    top = planted_ic(1.0, half_life_records=half_life_records, bar_records=bar_records)
    if not 0.0 <= ic <= top:
        raise InvalidInputError(
            f"`signal_ic` must be in [0, {top:.3f}] (strength 0..1 at this market's size), "
            f"was {ic!r}."
        )
    if ic == 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if planted_ic(mid, half_life_records=half_life_records, bar_records=bar_records) < ic:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
