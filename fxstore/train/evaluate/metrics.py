"""Honest backtest metrics from per-bar PnL and positions: returns, risk, trades, a Sharpe CI.

Conventions (one place, so every number can be checked by hand):

- ``pnl[t]`` is the dollar PnL booked on bar t, net of costs; ``positions[t]`` the contracts
  held over bar t (signed). Returns are simple returns on a fixed `capital`:
  ``r[t] = pnl[t] / capital`` (no compounding), per bar and per trading day.
- Annualisation: per-bar ratios × √(252 · bars_per_day), daily ratios × √252, with
  `bars_per_day` from the fxcache manifest (bars are not minutes).
- Sharpe = mean / sample std (ddof 1); Sortino = mean / √mean(min(r, 0)²) (target 0).
  A ratio whose denominator is 0 (zero variance, no losing bar, a single observation) is
  NaN: undefined, never a misleading 0 or inf. NaN becomes ``null`` in :meth:`to_json`.
- Equity = capital + cumulative PnL; drawdown = equity − running peak, where the peak starts
  at `capital`, so a loss on the first bar is a drawdown. Both drawdowns are <= 0.
- A trade is a run of bars holding a position of one sign: it opens when the position leaves
  0 or flips sign and closes when it returns to 0 or flips. Its PnL is the sum over its bars
  plus the first flat bar after it (which books the exit cost); at a flip the bar's PnL goes
  to the new trade. A trade still open at the last bar counts, marked to market.

CuPy inputs: the per-bar sums run on the device (module from :func:`array_module`); running
peaks, trade runs and the bootstrap take one copy of the arrays to the host.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Final, TypeAlias

import numpy as np
import numpy.typing as npt

from fxstore.errors import InvalidInputError
from fxstore.train.evaluate.significance import probabilistic_sharpe_ratio, return_moments
from fxstore.train.gpu.xp import all_finite, array_module, to_host

__all__ = [
    "BacktestMetrics",
    "bootstrap_sharpe_ci",
    "compute_metrics",
    "daily_pnl",
    "max_drawdown",
    "sharpe_per_bar",
    "trade_pnls",
]

logger = logging.getLogger(__name__)

TRADING_DAYS_PER_YEAR: Final = 252
#: numpy or CuPy arrays (CuPy has no stubs: typed as their numpy twins).
FloatArray: TypeAlias = npt.NDArray[np.float64]
#: Contracts per bar, signed: whole numbers as int or float.
PositionArray: TypeAlias = (
    npt.NDArray[np.int64]
    | npt.NDArray[np.int32]
    | npt.NDArray[np.float64]
    | npt.NDArray[np.float32]
)
#: Spreads below this share of the largest |value| are rounding noise: zero variance.
_REL_TINY: Final = 1e-12


@dataclass(frozen=True, slots=True)
class BacktestMetrics:
    """Metrics of one backtest (see the module docstring for every definition).

    Money in dollars (float64); returns and drawdown fractions as fractions of capital.
    """

    n_bars: int
    n_days: int
    capital: float
    bars_per_day: float
    """From the fxcache manifest; annualises per-bar ratios."""
    total_pnl: float
    pnl_per_day: float
    """Mean PnL per trading day."""
    return_on_capital: float
    """total_pnl / capital."""
    annual_return: float
    """Mean daily return × 252 (arithmetic, no compounding)."""
    sharpe_bar: float
    """Per-bar Sharpe × √(252 · bars_per_day)."""
    sortino_bar: float
    sharpe_daily: float
    """Daily Sharpe × √252."""
    sortino_daily: float
    sharpe_daily_ci: tuple[float, float]
    """Stationary-bootstrap interval of `sharpe_daily` over days (see bootstrap_sharpe_ci)."""
    psr_daily: float
    """Probabilistic Sharpe ratio of the daily returns: P(true daily Sharpe > 0), skewness
    and kurtosis included (:mod:`fxstore.train.evaluate.significance`); NaN without variance."""
    max_drawdown: float
    """Deepest equity − running peak in dollars (<= 0)."""
    max_drawdown_fraction: float
    """Deepest (equity − peak) / peak, peak including capital (<= 0)."""
    calmar: float
    """annual_return / |max_drawdown_fraction|; NaN without a drawdown."""
    n_trades: int
    win_rate: float
    """Share of trades with PnL > 0; NaN without trades."""
    profit_factor: float
    """Sum of winning trades / |sum of losing trades|; NaN without a losing trade."""
    avg_trade_pnl: float
    trades_per_day: float
    turnover: float
    """Contracts traded per day: sum of |position change| (from flat) / n_days."""
    exposure: float
    """Share of bars with a non-zero position."""

    def to_json(self) -> dict[str, object]:
        """The metrics as JSON data; NaN and inf become None."""

        def clean(value: object) -> object:
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, tuple):
                return [clean(v) for v in value]
            return value

        return {k: clean(v) for k, v in asdict(self).items()}


def _check_inputs(
    pnl: FloatArray, positions: PositionArray, trading_day: npt.NDArray[np.int32]
) -> None:
    """Equal-length, non-empty 1-D arrays; finite PnL; non-decreasing days."""
    xp = array_module(pnl, positions, trading_day)
    if pnl.ndim != 1 or pnl.shape[0] == 0:
        raise InvalidInputError(f"`pnl` must be a non-empty 1-D array, had shape {pnl.shape}.")
    for name, arr in (("positions", positions), ("trading_day", trading_day)):
        if arr.shape != pnl.shape:
            raise InvalidInputError(
                f"`{name}` must have the shape of `pnl` {pnl.shape}, had {arr.shape}."
            )
    if not all_finite(pnl):
        raise InvalidInputError("`pnl` holds NaN or inf; every bar needs a finite PnL.")
    if bool((xp.diff(trading_day) < 0).any()):
        raise InvalidInputError("`trading_day` must be non-decreasing (bars in time order).")


def _check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"`{name}` must be a finite number, was {value!r}.")
    if value <= 0:
        hint = "; pass the fxcache manifest's bars_per_day" if name == "bars_per_day" else ""
        raise InvalidInputError(f"`{name}` must be > 0, was {value!r}{hint}.")
    return float(value)


def daily_pnl(pnl: FloatArray, trading_day: npt.NDArray[np.int32]) -> FloatArray:
    """Sum per-bar PnL into per-day PnL.

    Parameters
    ----------
    pnl : (n_bars,) float64
        Dollar PnL per bar.
    trading_day : (n_bars,) int
        Trading day of each bar, non-decreasing.

    Returns
    -------
    (n_days,) float64
        PnL of each distinct trading day, in order (same array module as `pnl`).
    """
    xp = array_module(pnl, trading_day)
    cum = xp.concatenate((xp.zeros(1), xp.cumsum(pnl.astype(xp.float64))))
    ends = xp.concatenate((xp.flatnonzero(xp.diff(trading_day)) + 1, xp.asarray([len(pnl)])))
    starts = xp.concatenate((xp.zeros(1, dtype=ends.dtype), ends[:-1]))
    out: FloatArray = cum[ends] - cum[starts]
    return out


def _ratios(returns: FloatArray, scale: float) -> tuple[float, float]:
    """Annualised (Sharpe, Sortino) of `returns`; NaN where the denominator is 0."""
    xp = array_module(returns)
    if returns.shape[0] < 2:
        return math.nan, math.nan
    mean = float(xp.mean(returns))
    std = float(xp.std(returns, ddof=1))
    downside = math.sqrt(float(xp.mean(xp.minimum(returns, 0.0) ** 2)))
    # a constant series has a std of rounding noise (mean of 0.1s is not exactly 0.1)
    tiny = _REL_TINY * float(xp.abs(returns).max())
    sharpe = mean / std * scale if std > tiny else math.nan
    sortino = mean / downside * scale if downside > tiny else math.nan
    return sharpe, sortino


def sharpe_per_bar(pnl: FloatArray, *, bars_per_day: float, capital: float) -> float:
    """Annualised per-bar Sharpe of `pnl` on `capital` (:attr:`BacktestMetrics.sharpe_bar`).

    NaN when undefined (fewer than 2 bars, or no variance: a flat book).
    """
    scale = math.sqrt(TRADING_DAYS_PER_YEAR * _check_positive("bars_per_day", bars_per_day))
    return _ratios(pnl / _check_positive("capital", capital), scale)[0]


def max_drawdown(pnl: FloatArray, capital: float) -> tuple[float, float]:
    """Deepest drawdown of ``capital + cumsum(pnl)``, in dollars and as a fraction of the peak.

    The running peak starts at `capital`. Both values are <= 0 (0 when equity never falls).
    """
    equity = capital + np.cumsum(to_host(pnl), dtype=np.float64)
    peak = np.maximum.accumulate(np.maximum(equity, capital))
    drawdown = equity - peak
    return float(drawdown.min(initial=0.0)), float((drawdown / peak).min(initial=0.0))


def trade_pnls(pnl: FloatArray, positions: PositionArray) -> npt.NDArray[np.float64]:
    """PnL of each round-trip trade, in order (see the module docstring for the rule).

    Returns
    -------
    (n_trades,) float64
        Empty when the position is never non-zero.
    """
    side = np.sign(to_host(positions)).astype(np.int8)
    prev = np.concatenate(([0], side[:-1]))
    opens = (side != 0) & (side != prev)
    trade = np.cumsum(opens) - 1  # trade id of each bar (-1 before the first)
    # a flat bar belongs to the trade just closed when the bar before held a position
    owned = (side != 0) | (prev != 0)
    ids = trade[owned]
    n_trades = int(opens.sum())
    weights = to_host(pnl)[owned].astype(np.float64)
    return np.bincount(ids, weights=weights, minlength=n_trades).astype(np.float64)


def bootstrap_sharpe_ci(
    daily: FloatArray,
    *,
    n_resamples: int = 1000,
    mean_block_days: float = 5.0,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of the annualised daily Sharpe by stationary bootstrap over days.

    Politis & Romano (1994): resampled series are blocks of consecutive days (wrapping
    around) with geometric lengths of mean `mean_block_days`, which keeps short-range
    dependence. Resamples with zero variance are dropped; (NaN, NaN) with < 2 days.

    Parameters
    ----------
    daily : (n_days,) float
        Daily PnL or daily returns (the ratio does not depend on the scale).
    n_resamples, mean_block_days, level, seed
        Resample count, mean block length in days (>= 1), interval level in (0, 1), RNG seed.

    Returns
    -------
    tuple[float, float]
        ``(lo, hi)``, the (1 − level)/2 and (1 + level)/2 quantiles.
    """
    if mean_block_days < 1 or not 0 < level < 1 or n_resamples < 1:
        raise InvalidInputError(
            f"need mean_block_days >= 1, 0 < level < 1 and n_resamples >= 1; were "
            f"{mean_block_days!r}, {level!r}, {n_resamples!r}."
        )
    x = to_host(daily).astype(np.float64)
    n = len(x)
    if n < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    pos = np.arange(n)
    is_new = rng.random((n_resamples, n)) < 1.0 / mean_block_days
    is_new[:, 0] = True
    block_at = np.maximum.accumulate(np.where(is_new, pos, 0), axis=1)  # where each block began
    starts = rng.integers(0, n, size=(n_resamples, n))
    index = (np.take_along_axis(starts, block_at, axis=1) + pos - block_at) % n
    sample = x[index]
    std = sample.std(axis=1, ddof=1)
    keep = std > _REL_TINY * np.abs(sample).max(axis=1)
    if not keep.any():
        return math.nan, math.nan
    sharpe = sample[keep].mean(axis=1) / std[keep] * math.sqrt(TRADING_DAYS_PER_YEAR)
    lo, hi = np.quantile(sharpe, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _psr(daily: npt.NDArray[np.float64]) -> float:
    """P(true daily Sharpe > 0) of daily PnL (NaN with < 2 days or no variance)."""
    sharpe, skew, kurtosis = return_moments(daily)
    if len(daily) < 2:
        return math.nan
    return probabilistic_sharpe_ratio(sharpe, len(daily), skew=skew, kurtosis=kurtosis)


def compute_metrics(
    pnl: FloatArray,
    positions: PositionArray,
    trading_day: npt.NDArray[np.int32],
    *,
    bars_per_day: float,
    capital: float,
    n_resamples: int = 1000,
    seed: int = 0,
) -> BacktestMetrics:
    """Compute every backtest metric from per-bar PnL and positions.

    Parameters
    ----------
    pnl : (n_bars,) float64
        Dollar PnL of each bar, net of costs.
    positions : (n_bars,) int or float
        Contracts held over each bar (signed).
    trading_day : (n_bars,) int32
        Trading day of each bar (days since 1970-01-01), non-decreasing.
    bars_per_day
        Mean bars per trading day, from the fxcache manifest (``bars_per_day``).
    capital
        Dollars the returns are measured against (> 0).
    n_resamples, seed
        Bootstrap resamples and seed for `sharpe_daily_ci`.

    Returns
    -------
    BacktestMetrics

    Raises
    ------
    InvalidInputError
        Empty or mismatched arrays, non-finite PnL, days out of order, or `capital` /
        `bars_per_day` not > 0.
    """
    capital = _check_positive("capital", capital)
    bars_per_day = _check_positive("bars_per_day", bars_per_day)
    _check_inputs(pnl, positions, trading_day)
    xp = array_module(pnl, positions)
    pnl = pnl.astype(xp.float64)
    n_bars = int(pnl.shape[0])
    days = daily_pnl(pnl, trading_day)
    n_days = int(days.shape[0])
    total = float(xp.sum(days))
    sharpe_bar, sortino_bar = _ratios(
        pnl / capital, math.sqrt(TRADING_DAYS_PER_YEAR * bars_per_day)
    )
    sharpe_day, sortino_day = _ratios(days / capital, math.sqrt(TRADING_DAYS_PER_YEAR))
    dd_dollars, dd_fraction = max_drawdown(pnl, capital)
    annual = total / capital / n_days * TRADING_DAYS_PER_YEAR
    trades = trade_pnls(pnl, positions)
    wins, losses = trades[trades > 0].sum(), trades[trades < 0].sum()
    step = xp.diff(positions.astype(xp.float64), prepend=0.0)
    return BacktestMetrics(
        n_bars=n_bars,
        n_days=n_days,
        capital=capital,
        bars_per_day=bars_per_day,
        total_pnl=total,
        pnl_per_day=total / n_days,
        return_on_capital=total / capital,
        annual_return=annual,
        sharpe_bar=sharpe_bar,
        sortino_bar=sortino_bar,
        sharpe_daily=sharpe_day,
        sortino_daily=sortino_day,
        sharpe_daily_ci=bootstrap_sharpe_ci(days, n_resamples=n_resamples, seed=seed),
        psr_daily=_psr(to_host(days)),
        max_drawdown=dd_dollars,
        max_drawdown_fraction=dd_fraction,
        calmar=annual / -dd_fraction if dd_fraction < 0 else math.nan,
        n_trades=len(trades),
        win_rate=float((trades > 0).mean()) if len(trades) else math.nan,
        profit_factor=float(wins / -losses) if losses < 0 else math.nan,
        avg_trade_pnl=float(trades.mean()) if len(trades) else math.nan,
        trades_per_day=len(trades) / n_days,
        turnover=float(xp.abs(step).sum()) / n_days,
        exposure=float((positions != 0).mean()),
    )
