"""The feature kinds: what each computes, its parameters, warm-up and normalisation.

A *kind* is a parameterised definition in code (``log_return`` with ``horizon``); a feature
set names instances of kinds (``ret_4 = log_return(horizon=4)``). Each kind has a version,
bumped whenever its formula changes, so the feature-set hash changes with it. The formulas
are computed in :mod:`fxstore.features.compute`; this module only describes them (no numpy),
so configuration code can validate feature sets cheaply.

Shared conventions (every formula below uses them):

``r_t``
    One-bar log return of the close within one contract: ``log(close_t / close_{t-1})`` when
    bars t-1 and t belong to the same instrument; 0 on the first bar after a roll (``is_roll``):
    the gap between two contracts is not a return, so the roll bar earns nothing, which is
    also what a P&L from ``mkt_close`` that skips ``is_roll`` bars gives. Multi-bar returns and
    targets are sums of ``r`` (so they never include a roll jump either); targets whose horizon
    spans a roll are kept, computed within each contract this way.
``sigma_t``
    The volatility normaliser: ``max(sqrt(mean(r_k**2 for k in t-W+1..t)), vol_floor)`` with
    ``W = vol_window``, from raw returns (never from normalised features); defined from bar W.
Windows
    A rolling statistic at bar t uses bars ``t-window+1 .. t`` (past and present only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from fxstore.errors import InvalidInputError

__all__ = ["KINDS", "MAX_TARGET_HORIZON_BARS", "Kind", "Param", "ParamValue", "check_name"]

#: A parameter value as TOML and JSON carry it.
ParamValue = int | float | str
Params = Mapping[str, ParamValue]

#: Books have ten levels (MBP-10).
_NAME_RE: Final = re.compile(r"[A-Za-z0-9_]+")


def check_name(name: object) -> None:
    """Raise InvalidInputError unless `name` is a feature name (letters, digits, '_')."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidInputError(
            f"feature name must hold only letters, digits and '_', was {name!r}."
        )


#: Books have ten levels (MBP-10).
N_LEVELS: Final = 10


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a kind: its type, default and allowed range or choices."""

    type: type[int] | type[float] | type[str]
    default: ParamValue
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Kind:
    """A parameterised feature (or target) definition."""

    name: str
    #: Bumped whenever the formula changes (part of the feature-set hash).
    version: int
    params: Mapping[str, Param]
    #: The formula, in words (shown by ``fxstore info`` and written to the manifest).
    formula: str
    #: How the value is made scale-free, causally.
    normalisation: str
    #: First bar (0-based) at which the value is defined, from params and vol_window.
    warmup: Callable[[Params, int], int]
    #: Bars after t a value needs (targets only; 0 for features).
    lookahead: Callable[[Params], int] = lambda _p: 0
    is_target: bool = False


def _int(default: int, low: int, high: int | None = None, doc: str = "") -> Param:
    return Param(int, default, low=low, high=high, doc=doc)


def _int_param(params: Params, name: str) -> int:
    return int(params[name])


_HORIZON: Final = _int(1, 1, doc="bars")
#: Longest forward return a target may look ahead. Every walk-forward gap holds at least the
#: longest target's bars, and that many trailing bars of the fxcache have no target: 256 bars
#: is over three trading days of default bars.
MAX_TARGET_HORIZON_BARS: Final = 256
_TARGET_HORIZON: Final = _int(1, 1, MAX_TARGET_HORIZON_BARS, doc="bars")
_WINDOW: Final = _int(100, 1, doc="bars of the rolling mean")
_LEVELS: Final = _int(N_LEVELS, 1, N_LEVELS, doc="book levels from the top")
_VOL: Final = "divided by sigma_t (the volatility normaliser)"
_DEMEAN: Final = "log value minus its rolling mean over `window` bars (causal)"


def _after_window(params: Params, _vol_window: int) -> int:
    return _int_param(params, "window") - 1


def _none(_params: Params, _vol_window: int) -> int:
    return 0


_KINDS: Final = (
    Kind(
        "log_return",
        1,
        {"horizon": _HORIZON},
        "sum(r_k for k in t-h+1..t) / (sigma_t * sqrt(h)), h = horizon",
        _VOL + " and sqrt(horizon)",
        lambda p, w: max(_int_param(p, "horizon"), w),
    ),
    Kind(
        "realised_vol",
        1,
        {"window": _int(16, 1, doc="bars")},
        "sqrt(mean(r_k**2 for k in t-n+1..t)) / sigma_t, n = window",
        _VOL,
        lambda p, w: max(_int_param(p, "window"), w),
    ),
    Kind(
        "ofi_level",
        1,
        {"level": _int(0, 0, N_LEVELS - 1, doc="book level, 0 = top"), "window": _WINDOW},
        "ofi_l,t / max(mean((bid_sz_l + ask_sz_l) / 2 over the window), 1 contract)",
        "divided by the level's rolling mean depth (Cont-Kukanov-Stoikov)",
        _after_window,
    ),
    Kind(
        "ofi_multi",
        1,
        {"levels": _LEVELS, "window": _WINDOW},
        "sum(ofi_l for l < levels) / max(rolling mean of sum((bid_sz_l + ask_sz_l) / 2), 1)",
        "divided by the rolling mean depth of the levels",
        _after_window,
    ),
    Kind(
        "book_imbalance",
        1,
        {"levels": _LEVELS},
        "(sum bid_sz_l - sum ask_sz_l) / (sum bid_sz_l + sum ask_sz_l), l < levels, at close",
        "bounded in [-1, 1]",
        _none,
    ),
    Kind(
        "spread_ticks",
        1,
        {},
        "(ask_px_00 - bid_px_00) / tick_size at close",
        "in ticks",
        _none,
    ),
    Kind(
        "microprice_offset",
        1,
        {},
        "(microprice - mid) / tick_size, microprice = (bid * ask_sz + ask * bid_sz) / (sizes)",
        "in ticks",
        _none,
    ),
    Kind(
        "depth",
        1,
        {"levels": _LEVELS, "window": _WINDOW},
        "log(1 + sum(bid_sz_l + ask_sz_l for l < levels)) minus its rolling mean",
        _DEMEAN,
        _after_window,
    ),
    Kind(
        "trade_imbalance",
        1,
        {},
        "(buy_volume - sell_volume) / volume",
        "bounded in [-1, 1]",
        _none,
    ),
    Kind(
        "trade_intensity",
        1,
        {"window": _WINDOW},
        "log(n_trades / duration_s) minus its rolling mean; duration as in bar_duration",
        _DEMEAN,
        _after_window,
    ),
    Kind(
        "bar_duration",
        1,
        {"window": _WINDOW},
        "log(max(ts_close - ts_open, 1 ms) in s) minus its rolling mean",
        _DEMEAN,
        _after_window,
    ),
    Kind(
        "vwap_distance",
        1,
        {},
        "(close - vwap) / tick_size",
        "in ticks",
        _none,
    ),
    Kind(
        "time_of_day",
        1,
        {"fn": Param(str, "sin", choices=("sin", "cos"), doc="sin or cos")},
        "fn(2 pi (ts_close - session open) / session length), CME session from 17:00 to 16:00 CT",
        "bounded in [-1, 1]",
        _none,
    ),
    Kind(
        "session_start",
        1,
        {},
        "1 on the first bar of a trading day, else 0",
        "0 or 1",
        _none,
    ),
    Kind(
        "forward_return",
        1,
        {"horizon": _TARGET_HORIZON},
        "sum(r_k for k in t+1..t+h) / (sigma_t * sqrt(h)), h = horizon (looks ahead: target)",
        _VOL + " at t (known at t) and sqrt(horizon)",
        lambda _p, w: w,
        lookahead=lambda p: _int_param(p, "horizon"),
        is_target=True,
    ),
)

#: Every kind by name.
KINDS: Final[Mapping[str, Kind]] = {kind.name: kind for kind in _KINDS}
