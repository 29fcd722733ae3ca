"""A vectorised futures-trading environment over fxcache bars, and the PnL accounting it shares.

Timing (no look-ahead): the features of row t are known at the close of bar t. At that close
the agent picks a target position h_t from :attr:`EnvConfig.positions`, trades to it paying
``cost_t = half_spread_t * multiplier + slippage_ticks * tick_size * multiplier +
commission`` per contract traded, and holds it over bar t -> t+1, earning
``h_t * (close_{t+1} - close_t) * multiplier``. The PnL booked on row t is that move net of
the cost of the trade at t (float64 dollars). The multiplier and tick size are those of row
t's own contract: one pair for a whole series whose contracts agree, else each contract's
own (a contract spec changed mid-series), by the contract of each row the fxcache records.

Rolls: when row t+1 is the first bar of a new contract (``is_roll``), the two closes belong to
different contracts and their difference is no PnL. The position is closed at the old
contract's last close (paying ``|h_t| * cost_t``); with ``roll="roll"`` it is reopened at the
new contract's first close (paying ``|h_t| * cost_{t+1}``) and carried on, with
``roll="close"`` the new contract starts flat. A window ``[lo, hi)`` ends flat: the position
held into row ``hi - 1`` is closed there at its cost; when row ``hi - 1`` is a roll, the
position is closed at the old contract's last close only (never reopened just to close).

:func:`evaluate_positions` books a whole window of chosen positions at once (baselines,
backtests); :class:`fxstore.train.env.vecenv.VecEnv` steps many environments in parallel for
learning, on one array module (CuPy on a GPU, numpy otherwise). Both go through
:func:`_book`, so they agree to the last cent (tested); on CuPy, VecEnv steps with one fused
kernel (``_env_kernels``) that repeats :func:`_book`'s expressions and the start draws bit
for bit (tested against numpy).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

from fxstore.config import EnvConfig
from fxstore.errors import InvalidInputError, SchemaError
from fxstore.fxcache import REDO
from fxstore.market.master import ROOTS
from fxstore.train.gpu.xp import all_finite, array_module, to_host

if TYPE_CHECKING:
    from fxstore.train.env.loader import FxCacheView

__all__ = [
    "ContractSpec",
    "Market",
    "WindowPnL",
    "contract_spec",
    "evaluate_positions",
    "market_from_view",
    "policy_positions",
]

logger = logging.getLogger(__name__)

#: numpy or CuPy arrays (CuPy has no stubs: typed as their numpy twins).
F64: TypeAlias = npt.NDArray[np.float64]
F32: TypeAlias = npt.NDArray[np.float32]
I64: TypeAlias = npt.NDArray[np.int64]
Bool: TypeAlias = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class ContractSpec:
    """What one contract of a futures root is worth."""

    root: str
    multiplier: float
    """Dollars per index point."""
    tick_size: float
    """Minimum price increment, index points."""
    source: str = "builtin"
    """Where the multiplier came from: 'bars' (the instrument master's facts the bars were
    built with), 'option' (the run's --multiplier) or 'builtin' (fxstore's table of roots,
    for a cache that names no bar series)."""
    contracts: tuple[str, ...] = ()
    """The contracts of the bars whose facts were used (raw symbols), when from the bars."""
    by_contract: tuple[tuple[str, float, float], ...] = ()
    """``(raw symbol, multiplier, tick size)`` of every contract of the bars, when from the
    bars. Where they disagree (:attr:`varies`), each row books at its own contract's, and
    `multiplier` and `tick_size` are those of the latest contract (for display only)."""

    @property
    def tick_value(self) -> float:
        """Dollars per tick of one contract."""
        return self.multiplier * self.tick_size

    @property
    def varies(self) -> bool:
        """Whether the contracts of the bars have different multipliers or tick sizes."""
        return len({(m, t) for _, m, t in self.by_contract}) > 1

    def to_json(self) -> dict[str, object]:
        """The spec as a run's ``config.json`` records it (``multiplier`` and ``tick_size``
        null where they differ by contract: ``by_contract`` gives each)."""
        return {
            "root": self.root,
            "multiplier": None if self.varies else self.multiplier,
            "tick_size": None if self.varies else self.tick_size,
            "source": self.source,
            "contracts": list(self.contracts),
            "by_contract": {
                raw: {"multiplier": m, "tick_size": t} for raw, m, t in self.by_contract
            },
        }


def contract_spec(
    symbol: str,
    config: EnvConfig | None = None,
    contracts: Mapping[str, Mapping[str, object]] | None = None,
) -> ContractSpec:
    """The contract spec of store symbol `symbol` ("ES.FUT" -> ES), overridden by `config`.

    Parameters
    ----------
    contracts
        The facts of every contract of the bars (raw symbol -> the ``contracts`` entry of
        the bar manifest: the instrument master's multiplier and tick size as ingest used
        them). The spec is theirs; outrights decide where there are any. Where they disagree
        (a contract spec changed mid-series), each row books at its own contract's facts
        (:attr:`ContractSpec.by_contract`). None (a cache that names no bar series): the
        instrument master's table of CME roots (:data:`fxstore.market.master.ROOTS`).

    Raises
    ------
    InvalidInputError
        No fact gives a multiplier or tick size and `config` does not either; the contracts
        of the bars disagree and one of them records none.
    """
    root = symbol.split(".", 1)[0]
    multiplier = config.multiplier if config is not None else None
    tick_size = config.tick_size if config is not None else None
    if contracts is not None:
        return _spec_of_contracts(symbol, root, contracts, multiplier, tick_size)
    known = ROOTS.get(root)
    if known is None and (multiplier is None or tick_size is None):
        raise InvalidInputError(
            f"no contract spec for {symbol!r} (root {root!r}; known: "
            f"{', '.join(sorted(ROOTS))}); pass --multiplier and --tick-size."
        )
    return ContractSpec(
        root,
        float(multiplier if multiplier is not None else known.multiplier),  # type: ignore[union-attr]
        float(tick_size if tick_size is not None else known.tick_size),  # type: ignore[union-attr]
        "option" if multiplier is not None else "builtin",
    )


def _values(contracts: Mapping[str, Mapping[str, object]], name: str) -> dict[str, float]:
    """Fact `name` of each of `contracts` that records it as a number."""
    return {
        raw: float(value)
        for raw, facts in contracts.items()
        if isinstance(value := facts.get(name), int | float) and not isinstance(value, bool)
    }


def _per_contract(
    symbol: str, contracts: Mapping[str, Mapping[str, object]], name: str, given: float | None
) -> dict[str, float] | None:
    """Fact `name` of each of `contracts`: `given` for all; else each one's own, where one
    records none taking the one value all others agree on. None: no contract records it.

    Raises
    ------
    InvalidInputError
        The contracts disagree and one of them records none.
    """
    if given is not None:
        return dict.fromkeys(contracts, float(given))
    values = _values(contracts, name)
    if not values:
        return None
    if len(set(values.values())) == 1:
        return dict.fromkeys(contracts, next(iter(values.values())))
    missing = sorted(set(contracts) - set(values))
    if missing:
        shown = ", ".join(f"{raw} {v:g}" for raw, v in sorted(values.items())[:4])
        raise InvalidInputError(
            f"the bars of {symbol!r} hold contracts of different {name} ({shown}), and "
            f"{', '.join(missing[:4])} records none: its rows cannot be booked; re-run "
            "`fxstore ingest --force` with its definition (--definitions PATH), or pass "
            f"--{name.replace('_', '-')} to book every contract at one value."
        )
    return values


def _spec_of_contracts(
    symbol: str,
    root: str,
    contracts: Mapping[str, Mapping[str, object]],
    multiplier: float | None,
    tick_size: float | None,
) -> ContractSpec:
    outrights = {k: v for k, v in contracts.items() if v.get("instrument_class") == "F"}
    used = outrights or contracts
    multipliers = _per_contract(symbol, used, "multiplier", multiplier)
    ticks = _per_contract(symbol, used, "tick_size", tick_size)
    table_tick = ROOTS[root].tick_size if root in ROOTS else None
    if ticks is None and table_tick is not None:  # bars of --multiplier before it kept the tick
        ticks = dict.fromkeys(used, table_tick)
    tick = tick_size if tick_size is not None else table_tick
    if not used and multiplier is not None and tick is not None:  # the options alone
        return ContractSpec(root, float(multiplier), float(tick), "option")
    if not used or multipliers is None or ticks is None:
        missing = "multiplier" if multipliers is None else "tick size"
        raise InvalidInputError(
            f"the bars of {symbol!r} record no {missing} for their contracts "
            f"({', '.join(sorted(used)) or 'none'}); pass --multiplier and --tick-size."
        )
    # the latest contract (by expiration, then name) gives the spec's one pair for display
    latest = max(used, key=lambda raw: (str(used[raw].get("expiration") or ""), raw))
    source = "option" if multiplier is not None else "bars"
    return ContractSpec(
        root,
        multipliers[latest],
        ticks[latest],
        source,
        tuple(sorted(used)),
        tuple((raw, multipliers[raw], ticks[raw]) for raw in sorted(used)),
    )


@dataclass(frozen=True, slots=True)
class Market:
    """One symbol's fxcache rows on one array module: what the environment trades.

    Rows are in time order (``ts_close`` strictly increasing). Arrays live on the module of
    `features` (numpy or CuPy), except `trading_day`, which stays on the host for the folds.
    """

    features: F32
    """float32 ``(n_rows, n_features)``: the observation part of each row."""
    close: F64
    """float64 ``(n_rows,)``: the bar's close, index points (``mkt_close``)."""
    half_spread: F64
    """float64 ``(n_rows,)``: half the spread at the bar's close, index points."""
    is_roll: npt.NDArray[np.bool_]
    """bool ``(n_rows,)``: the row is the first bar of a new contract."""
    trading_day: npt.NDArray[np.int32]
    """int32 ``(n_rows,)`` on the host: CME trading day, days since 1970-01-01."""
    feature_names: tuple[str, ...]
    """Feature columns, in the order of `features`' columns."""
    bars_per_day: float
    """Bars per distinct trading day of the whole cache (from its manifest)."""
    contract_runs: tuple[tuple[int, str], ...] = ()
    """``(first row, raw symbol)`` of each contract's run of rows, in row order (the first at
    row 0, each later one at a roll), as precompute recorded them; empty for a cache that
    does not record them (it books only where its contracts' facts agree)."""

    target_horizons: tuple[int, ...] = ()
    """Horizons (bars) of the fxcache's ``forward_return`` targets, increasing, without
    repeats: the horizons the ``linear`` reference forecasts; empty for a market made in code
    (``linear`` then uses the default set's)."""

    def __post_init__(self) -> None:
        horizons = self.target_horizons
        if list(horizons) != sorted(set(horizons)) or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in horizons
        ):
            raise InvalidInputError(
                f"`target_horizons` must be increasing whole numbers of bars >= 1, was "
                f"{horizons!r}."
            )
        n = self.features.shape[0]
        starts = [row for row, _ in self.contract_runs]
        if starts and (starts[0] != 0 or starts != sorted(set(starts)) or starts[-1] >= n):
            raise SchemaError(
                f"`contract_runs` must start at row 0 and increase strictly below {n}, "
                f"was {starts[:8]}."
            )
        if self.features.ndim != 2 or self.features.shape[1] != len(self.feature_names):
            raise SchemaError(
                f"`features` must be (n_rows, {len(self.feature_names)}), was "
                f"{self.features.shape}."
            )
        if self.is_roll.dtype != np.bool_:
            raise SchemaError(f"`is_roll` must be a bool array, was {self.is_roll.dtype}.")
        for name in ("close", "half_spread", "is_roll", "trading_day"):
            if getattr(self, name).shape != (n,):
                raise SchemaError(
                    f"`{name}` must have shape ({n},), was {getattr(self, name).shape}."
                )
        if n < 2:
            raise InvalidInputError(f"a market needs at least 2 rows to trade, has {n}.")

    @property
    def n_rows(self) -> int:
        """Rows (bars)."""
        return int(self.features.shape[0])

    @property
    def xp(self) -> ModuleType:
        """The array module of the arrays (numpy or CuPy)."""
        return array_module(self.features)

    def rows(self, lo: int, hi: int) -> Market:
        """Rows ``[lo, hi)`` as a market of their own (views of the arrays): its contract runs
        start at its row 0 with the contract that row belongs to."""
        runs = [(max(row - lo, 0), raw) for row, raw in self.contract_runs if row < hi]
        runs = [run for k, run in enumerate(runs) if k + 1 == len(runs) or runs[k + 1][0] > 0]
        return dataclasses.replace(
            self,
            features=self.features[lo:hi],
            close=self.close[lo:hi],
            half_spread=self.half_spread[lo:hi],
            is_roll=self.is_roll[lo:hi],
            trading_day=self.trading_day[lo:hi],
            contract_runs=tuple(runs),
        )

    def feature(self, name: str) -> F32:
        """The column of feature `name` (``f_`` prefix optional), on the market's module."""
        column = name if name.startswith("f_") else f"f_{name}"
        if column not in self.feature_names:
            raise InvalidInputError(
                f"the fxcache has no feature {column!r}; it has {', '.join(self.feature_names)}."
            )
        return self.features[:, self.feature_names.index(column)]


def market_from_view(view: FxCacheView) -> Market:
    """The rows of an open fxcache view as a :class:`Market`, on the view's device.

    Features are copied into one device matrix (:meth:`FxCacheView.features_to_device`);
    the market columns are gathered from the mapped shards.
    """
    features, _targets = view.features_to_device()
    xp = array_module(features)
    columns = view.columns

    def joined(name: str) -> npt.NDArray[np.generic]:
        out: npt.NDArray[np.generic] = xp.concatenate([xp.asarray(p) for p in columns[name]])
        return out

    trading_day = np.concatenate([to_host(p) for p in columns["trading_day"]])
    bars_per_day = view.manifest.get("bars_per_day")
    if not isinstance(bars_per_day, int | float) or bars_per_day <= 0:
        raise SchemaError(
            f"the fxcache manifest of {view.symbol!r} has no positive `bars_per_day` "
            f"(was {bars_per_day!r}); {REDO}."
        )
    is_roll = joined("is_roll").astype(bool)
    return Market(
        features=features,
        close=joined("mkt_close").astype(xp.float64, copy=False),
        half_spread=joined("mkt_half_spread").astype(xp.float64, copy=False),
        is_roll=is_roll,
        trading_day=trading_day.astype(np.int32, copy=False),
        feature_names=view.feature_names,
        bars_per_day=float(bars_per_day),
        contract_runs=_contract_runs(view, to_host(is_roll)),
        target_horizons=_target_horizons(view.manifest, view.symbol),
    )


def _contract_runs(view: FxCacheView, is_roll: Bool) -> tuple[tuple[int, str], ...]:
    """The ``source.contract_runs`` of the view's manifest, checked against its rolls: each
    run but the first starts at a roll row, and every roll starts a run. Empty when the
    manifest records none (an fxcache built before it did).

    Raises
    ------
    SchemaError
        The record is malformed or disagrees with the rows' rolls.
    """
    source = view.manifest.get("source")
    recorded = source.get("contract_runs") if isinstance(source, Mapping) else None
    if recorded is None:
        return ()
    runs = tuple(
        (int(run[0]), str(run[1]))
        for run in (recorded if isinstance(recorded, list) else [None])
        if isinstance(run, list)
        and len(run) == 2
        and isinstance(run[0], int)
        and isinstance(run[1], str)
    )
    rolls = [0, *np.flatnonzero(is_roll[1:]) + 1]
    if len(runs) != len(recorded) or [row for row, _ in runs] != [int(r) for r in rolls]:
        raise SchemaError(
            f"the fxcache manifest of {view.symbol!r}: `source.contract_runs` must give "
            f"[first row, contract] of each contract's rows, starting at row 0 and at each "
            f"roll ({[int(r) for r in rolls][:8]}), was {recorded!r:.200}; {REDO}."
        )
    return runs


def _target_horizons(manifest: Mapping[str, object], symbol: str) -> tuple[int, ...]:
    """The horizons of the ``forward_return`` targets the manifest's feature set records."""
    definition = manifest.get("featureset")
    targets = definition.get("targets", []) if isinstance(definition, Mapping) else []
    if not isinstance(targets, list):
        raise SchemaError(
            f"the fxcache manifest of {symbol!r} records its targets as {targets!r}, not a "
            f"list; {REDO}."
        )
    horizons = set()
    for target in targets:
        if not isinstance(target, Mapping) or target.get("kind") != "forward_return":
            continue
        params = target.get("params")
        horizon = params.get("horizon") if isinstance(params, Mapping) else None
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
            raise SchemaError(
                f"the fxcache manifest of {symbol!r} records target {target.get('name')!r} "
                f"without a whole `horizon` >= 1 (was {horizon!r}); {REDO}."
            )
        horizons.add(horizon)
    return tuple(sorted(horizons))


def _check_window(market: Market, lo: int, hi: int) -> None:
    if not 0 <= lo < hi <= market.n_rows or hi - lo < 2:
        raise InvalidInputError(
            f"window [{lo}, {hi}) must hold at least 2 of the market's {market.n_rows} rows."
        )


@dataclass(frozen=True, slots=True)
class _Costs:
    """Per-row prices of trading one contract, for one EnvConfig and spec."""

    cost: F64  # (n_rows,) dollars per contract traded at the row's close
    unit: F64  # (n_rows,) dollars per unit of reward at the row
    multiplier: F64  # (n_rows,) dollars per index point of the row's contract


def _rolling_sigma(close: F64, is_roll: Bool, window: int, xp: ModuleType) -> F64:
    """Causal RMS of within-contract one-bar log returns over the last `window` rows.

    Row t uses the returns of rows max(1, t - window + 1) .. t (fewer at the start, never a
    future row); a roll's return is 0 (the gap between contracts is not a move). Row 0 has
    no return yet and gets 0, which the caller floors.
    """
    r = xp.zeros_like(close)
    r[1:] = xp.where(is_roll[1:], 0.0, xp.diff(xp.log(close)))
    cum = xp.concatenate([xp.zeros(1), xp.cumsum(r * r)])
    t = xp.arange(close.shape[0])
    first = xp.maximum(t - window + 1, 1)
    count = xp.maximum(t - first + 1, 1)
    mean_sq = (cum[t + 1] - cum[first]) / count
    out: F64 = xp.sqrt(xp.maximum(mean_sq, 0.0))
    return out


def _row_facts(market: Market, spec: ContractSpec) -> tuple[F64, F64] | None:
    """Each row's multiplier and tick size, on the market's module, where the contracts'
    facts differ (None where one pair books every row).

    Raises
    ------
    InvalidInputError
        The market does not record each row's contract, or a row's contract has no facts.
    """
    if not spec.varies:
        return None
    shown = ", ".join(f"{raw} {m:g} x {t:g}" for raw, m, t in spec.by_contract[:4])
    if not market.contract_runs:
        raise InvalidInputError(
            f"the contracts of the bars have different multipliers or tick sizes ({shown}), "
            f"but the fxcache does not record which rows are whose; {REDO} (or pass "
            "--multiplier and --tick-size to book every contract at one value)."
        )
    facts = {raw: (m, t) for raw, m, t in spec.by_contract}
    names = [raw for _, raw in market.contract_runs]
    unknown = sorted(set(names) - set(facts))
    if unknown:
        raise InvalidInputError(
            f"the rows of contract(s) {', '.join(unknown[:4])} have no multiplier or tick "
            f"size among the facts of the bars ({shown}); {REDO}."
        )
    starts = [row for row, _ in market.contract_runs]
    lengths = np.diff([*starts, market.n_rows])
    multiplier = np.repeat([facts[raw][0] for raw in names], lengths)
    tick_size = np.repeat([facts[raw][1] for raw in names], lengths)
    xp = market.xp
    return xp.asarray(multiplier, dtype=xp.float64), xp.asarray(tick_size, dtype=xp.float64)


def _costs(market: Market, config: EnvConfig, spec: ContractSpec) -> _Costs:
    xp = market.xp
    rows = _row_facts(market, spec)
    mult: float | F64 = spec.multiplier if rows is None else rows[0]
    tick: float | F64 = spec.tick_size if rows is None else rows[1]
    tick_value: float | F64 = spec.tick_value if rows is None else tick * mult
    cost = (
        market.half_spread * mult
        + config.slippage_ticks * tick * mult
        + config.commission_per_contract
    )
    if config.reward == "dollars":
        unit = xp.ones_like(market.close)
    elif config.reward == "ticks":
        unit = xp.full_like(market.close, tick_value) if rows is None else tick_value
    else:
        sigma = _rolling_sigma(market.close, market.is_roll, config.vol_window, xp)
        # At least one tick: a market that has not moved yet does not blow the reward up.
        unit = xp.maximum(sigma * market.close * mult, tick_value)
    per_row = xp.full_like(market.close, mult) if rows is None else rows[0]
    return _Costs(cost=cost, unit=unit, multiplier=per_row)


def _carried(xp: ModuleType, target: F64, roll: Bool, carry: Bool) -> F64:
    """The position coming into row t+1: `target`, or 0 across a roll not carried over."""
    out: F64 = xp.where(carry | ~roll, target, 0.0)
    return out


def _book(
    xp: ModuleType,
    held: F64,
    target: F64,
    t: I64,
    market: Market,
    costs: _Costs,
    carry: Bool,
) -> tuple[F64, F64, F64]:
    """PnL booked on rows `t` for trading from `held` to `target` and holding to row t+1.

    `carry` (bool, per row or one for all) says whether a position is reopened in the new
    contract when row t+1 is a roll: 'roll' mode, except where row t+1 ends the window or
    episode (reopening there only to close out at once would pay the cost twice for nothing).
    Returns ``(pnl, gross, carried)``: net and gross-of-costs float64 dollars, and the
    position held coming into row t+1 (0 after a roll not carried). Row t+1 must exist.
    """
    nxt = t + 1
    roll = market.is_roll[nxt]
    move = target * (market.close[nxt] - market.close[t]) * costs.multiplier[t]
    gross = xp.where(roll, 0.0, move)
    at_roll = xp.abs(target) * (costs.cost[t] + xp.where(carry, costs.cost[nxt], 0.0))
    paid = xp.abs(target - held) * costs.cost[t] + xp.where(roll, at_roll, 0.0)
    return gross - paid, gross, _carried(xp, target, roll, carry)


class WindowPnL(NamedTuple):
    """Per-row results of trading one window ``[lo, hi)``; arrays of length ``hi - lo``."""

    pnl: F64
    """float64 dollars booked on each row, net of costs (the last row books the close-out)."""
    positions: F64
    """Contracts held over each row (chosen at its close); 0 on the last row."""
    costs: F64
    """float64 dollars of costs paid on each row (included in `pnl`)."""
    trading_day: npt.NDArray[np.int32]
    """Each row's trading day (host)."""


def evaluate_positions(
    market: Market,
    positions: F64,
    lo: int,
    hi: int,
    config: EnvConfig,
    spec: ContractSpec,
) -> WindowPnL:
    """Book a window of chosen positions: what holding ``positions[i]`` over row lo+i earns.

    Parameters
    ----------
    positions
        ``(hi - lo,)`` contracts to hold over each row, chosen at its close from data up to
        it; the last entry is ignored (the window ends flat).

    Returns
    -------
    WindowPnL
        Arrays on the market's module, except `trading_day`.
    """
    _check_window(market, lo, hi)
    xp = market.xp
    target = xp.asarray(positions, dtype=xp.float64)
    if target.shape != (hi - lo,):
        raise InvalidInputError(f"`positions` must have shape ({hi - lo},), was {target.shape}.")
    if not all_finite(target):
        raise InvalidInputError("`positions` holds NaN or inf; every row needs a position.")
    costs = _costs(market, config, spec)
    target = target.copy()
    target[-1] = 0.0
    t = xp.arange(lo, hi - 1)
    carry = (t + 1 < hi - 1) & (config.roll == "roll")
    # The position coming into each row depends only on the previous row's target (and a
    # roll), so the whole window is booked at once.
    held = xp.concatenate([xp.zeros(1), _carried(xp, target[:-1], market.is_roll[t + 1], carry)])
    body, gross, _ = _book(xp, held[:-1], target[:-1], t, market, costs, carry)
    last_cost = xp.abs(held[-1:]) * costs.cost[hi - 1 : hi]
    pnl = xp.concatenate([body, -last_cost])
    paid = xp.concatenate([gross - body, last_cost])
    return WindowPnL(pnl, target, paid, market.trading_day[lo:hi])


def policy_positions(actions: I64, market: Market, lo: int, hi: int, config: EnvConfig) -> F64:
    """Positions of a policy whose action depends on the row and the position held coming in.

    Parameters
    ----------
    actions
        int ``(hi - lo, len(config.positions))``: the action index taken at each row for each
        held position (in the order of `config.positions`), e.g. the greedy actions of a
        Q-network evaluated on every (row, held position) pair at once.

    Returns
    -------
    numpy float64 ``(hi - lo,)``: the positions chosen, for :func:`evaluate_positions`.
    """
    _check_window(market, lo, hi)
    table = to_host(actions).astype(np.int64, copy=False)
    n_pos = len(config.positions)
    if table.shape != (hi - lo, n_pos):
        raise InvalidInputError(f"`actions` must be ({hi - lo}, {n_pos}), was {table.shape}.")
    if table.size and (table.min() < 0 or table.max() >= n_pos):
        raise InvalidInputError(f"`actions` must be in 0..{n_pos - 1}.")
    roll_next = np.zeros(hi - lo, dtype=bool)
    roll_next[:-1] = to_host(market.is_roll[lo + 1 : hi])
    return _scan_actions(table, roll_next, config)


def _scan_actions(table: I64, roll_next: Bool, config: EnvConfig) -> F64:
    values = np.asarray(config.positions, dtype=np.float64)
    flat = config.positions.index(0)
    close_at_roll = config.roll == "close"
    out = np.empty(table.shape[0])
    held = flat
    for i in range(table.shape[0]):
        action = int(table[i, held])
        out[i] = values[action]
        held = flat if close_at_roll and roll_next[i] else action
    return out
