"""Configuration of the trading environment: positions, costs, rolls and reward."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal, get_args

from fxstore.config._validate import validate_at_least, validate_choice, validate_number
from fxstore.errors import InvalidInputError

RollMode = Literal["roll", "close"]
RewardMode = Literal["dollars", "ticks", "vol"]


@dataclass(frozen=True, slots=True)
class EnvConfig:
    """How :class:`fxstore.train.env.vecenv.VecEnv` trades fxcache bars and books their PnL.

    At the close of bar t the agent picks a target position from `positions`; it trades to
    it at that close, paying commission, half the spread at the close and slippage per
    contract traded, and holds it over bar t -> t+1. Money is float64 dollars.
    """

    positions: tuple[int, ...] = (-2, -1, 0, 1, 2)
    """Target positions the actions stand for, in contracts (signed, distinct, holding 0)."""

    commission_per_contract: float = 1.25
    """Dollars per contract per side (exchange, clearing and broker fees)."""

    slippage_ticks: float = 0.0
    """Ticks paid per contract traded beyond half the spread at the bar's close."""

    roll: RollMode = "roll"
    """At a contract roll: 'roll' carries the position into the new contract (closing it at
    the old contract's last bar and reopening it at the new one's first, paying both);
    'close' closes it at the old contract's last bar and starts the new contract flat."""

    reward: RewardMode = "vol"
    """What the agent is rewarded in: 'dollars' (net PnL), 'ticks' (net PnL in tick values of
    one contract) or 'vol' (net PnL over the dollar move of a one-sigma bar of one contract,
    sigma the causal rolling RMS of one-bar log returns)."""

    multiplier: float | None = None
    """Dollars per index point of one contract; None: from the symbol's contract spec."""

    tick_size: float | None = None
    """Minimum price increment in index points; None: from the symbol's contract spec."""

    vol_window: int = 200
    """Bars of the rolling RMS behind the 'vol' reward (past bars only)."""

    def __post_init__(self) -> None:
        positions = self.positions
        if (
            not isinstance(positions, tuple)
            or len(positions) < 2
            or any(isinstance(p, bool) or not isinstance(p, int) for p in positions)
            or len(set(positions)) != len(positions)
            or 0 not in positions
        ):
            raise InvalidInputError(
                f"`positions` must be two or more distinct whole numbers of contracts holding "
                f"0, e.g. -2,-1,0,1,2; was {positions!r}."
            )
        costs = ("commission_per_contract", "slippage_ticks")
        for name in costs:  # both must be numbers before either is compared with 0
            validate_number(name, getattr(self, name))
        for name in costs:
            validate_at_least(name, getattr(self, name), 0)
        validate_choice("roll", self.roll, get_args(RollMode))
        validate_choice("reward", self.reward, get_args(RewardMode))
        for name in ("multiplier", "tick_size"):
            if getattr(self, name) is not None:
                validate_number(name, getattr(self, name), above=0.0)
        validate_number("vol_window", self.vol_window, above=1, integral=True)

    @property
    def max_position(self) -> int:
        """The largest |position| an action can hold, in contracts."""
        return max(abs(p) for p in self.positions)

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (for a run's ``config.json``)."""
        return {**asdict(self), "positions": list(self.positions)}
