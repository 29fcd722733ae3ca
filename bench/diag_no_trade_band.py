"""Issue 16 diagnostic: would a no-trade band on the agent's Q-values rescue its greedy policy?

The agent stands aside on the demo market (IC 0.1) because its greedy policy loses on every
validation evaluation (daily Sharpe -10 to -27): it trades some 150-200 times per validation
slice and the costs exceed what its Q-values know. This trains the agent as ``fxstore train``
does and, at every validation evaluation, also scores the greedy policy with a no-trade band:
it leaves the position it holds only when the best action's expected value exceeds the held
one's by more than the band (reward units: one-sigma bar moves). It records, per evaluation
and band, the validation and test PnL, per-bar Sharpe and position changes, and how well the
flat agent's Q(long) - Q(short) correlates with the next 1 and 4 bars' price move on the
training, validation and test rows. Nothing is selected on the test numbers; they are there
to show whether a band the validation slice would pick carries over.

Run (CPU, the demo's store: ``fxstore demo`` first)::

    PYTHONPATH=. python bench/diag_no_trade_band.py --store data --profile smoke \
        --name no_trade_band_demo_cpu
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
from _common import write_result

from fxstore.config import EnvConfig
from fxstore.train import loop
from fxstore.train.env import Market, evaluate_positions, policy_positions
from fxstore.train.metrics import sharpe_per_bar, to_host
from fxstore.train.policy import QFunction, observations
from fxstore.train.profiles import load_profile

BANDS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8)


def banded_positions(
    q_values: QFunction, market: Market, lo: int, hi: int, config: EnvConfig
) -> dict[float, np.ndarray]:
    """Positions of the greedy policy with each band of `BANDS` over rows [lo, hi)."""
    xp, n_pos = market.xp, len(config.positions)
    rows = xp.arange(lo, hi, dtype=xp.int64)
    q = np.stack(
        [to_host(q_values(observations(market, rows, float(h), config))) for h in config.positions],
        axis=1,
    )  # (rows, held position, action)
    held = np.arange(n_pos)
    gain = q.max(axis=2) - q[:, held, held]
    return {
        band: policy_positions(
            np.where(gain > band, q.argmax(axis=2), held[None, :]), market, lo, hi, config
        )
        for band in BANDS
    }


def q_edge_ic(
    q_values: QFunction, market: Market, lo: int, hi: int, config: EnvConfig
) -> dict[str, float]:
    """Correlation of the flat agent's Q(long) - Q(short) with the next 1 and 4 bars' move."""
    xp = market.xp
    rows = xp.arange(lo, hi, dtype=xp.int64)
    q = to_host(q_values(observations(market, rows, 0.0, config)))
    edge = (
        q[:, -1] - q[:, 0]
    )  # positions are ordered: the last is the longest, the first the shortest
    close = to_host(market.close)
    out = {}
    for h in (1, 4):
        move = np.full(hi - lo, np.nan)
        end = np.minimum(np.arange(lo, hi) + h, market.n_rows - 1)
        move[:] = close[end] - close[lo:hi]
        ok = np.isfinite(move) & (np.arange(lo, hi) + h < market.n_rows)
        out[f"h{h}"] = (
            float(np.corrcoef(edge[ok], move[ok])[0, 1]) if ok.sum() > 2 else float("nan")
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=Path("data"))
    parser.add_argument("--symbol", default="ES.FUT")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--name", default="no_trade_band")
    args = parser.parse_args()
    evals: list[dict[str, object]] = []
    scored = loop._validation_sharpe

    def validation_sharpe(agent, market, fold, config, spec):  # type: ignore[no-untyped-def]
        score = scored(agent, market, fold, config, spec)
        record: dict[str, object] = {"fold": fold.index, "step_updates": agent.step}
        record["q_edge_ic"] = {
            name: q_edge_ic(agent.q_values, market, lo, hi, config.env)
            for name, (lo, hi) in (
                ("train", fold.train),
                ("validation", fold.validation),
                ("test", fold.test),
            )
        }
        for name, (lo, hi) in (("validation", fold.validation), ("test", fold.test)):
            per_band = {}
            for band, pos in banded_positions(agent.q_values, market, lo, hi, config.env).items():
                pnl = to_host(evaluate_positions(market, pos, lo, hi, config.env, spec).pnl)
                sharpe = sharpe_per_bar(
                    pnl, bars_per_day=market.bars_per_day, capital=config.capital
                )
                per_band[str(band)] = {
                    "pnl": float(pnl.sum()),
                    "sharpe_bar": float(sharpe) if np.isfinite(sharpe) else 0.0,
                    "changes": int((np.diff(pos) != 0).sum()),
                }
            record[name] = per_band
        evals.append(record)
        return score

    loop._validation_sharpe = validation_sharpe  # type: ignore[assignment]
    config = dataclasses.replace(load_profile(args.profile), symbol=args.symbol)
    result = loop.train(config, args.store)
    picked = []
    for fold in sorted({int(e["fold"]) for e in evals}):  # type: ignore[call-overload]
        mine = [e for e in evals if e["fold"] == fold]
        best = max(
            ((e, b) for e in mine for b in map(str, BANDS)),
            key=lambda eb: eb[0]["validation"][eb[1]]["sharpe_bar"],  # type: ignore[index]
        )
        picked.append({"fold": fold, "band": float(best[1]), **best[0]["test"][best[1]]})  # type: ignore[index]
    write_result(
        args.name,
        {
            "profile": args.profile,
            "bands": list(BANDS),
            "evals": evals,
            "validation_picked": picked,
            "validation_picked_test_pnl": sum(float(p["pnl"]) for p in picked),
            "totals": {k: v.to_json() for k, v in result.totals.items()},
        },
    )


if __name__ == "__main__":
    main()
