"""Diagnostic: would a no-trade band on the agent's Q-values rescue its greedy policy?

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

from fxstore.train import loop
from fxstore.train.agent.policy import action_values, banded_positions
from fxstore.train.env.market import Market, evaluate_positions
from fxstore.train.evaluate.metrics import sharpe_per_bar
from fxstore.train.gpu.xp import to_host
from fxstore.train.profiles import load_profile

BANDS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8)


def q_edge_ic(q_flat: np.ndarray, market: Market, lo: int, hi: int) -> dict[str, float]:
    """Correlation of the flat agent's Q(longest) - Q(shortest) (`q_flat`: (rows, actions),
    positions in ascending order) with the next 1 and 4 bars' close-to-close move (rows whose
    horizon passes the cache's end left out; moves across a roll are not masked)."""
    edge = q_flat[:, -1] - q_flat[:, 0]
    close = to_host(market.close)
    out = {}
    for h in (1, 4):
        end = np.minimum(np.arange(lo, hi) + h, market.n_rows - 1)
        move = close[end] - close[lo:hi]
        ok = np.arange(lo, hi) + h < market.n_rows
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
        kept = scored(agent, market, fold, config, spec)  # (score, band): unchanged
        record: dict[str, object] = {"fold": fold.index, "step_updates": agent.step}
        flat = config.env.positions.index(0)
        windows = {"train": fold.train, "validation": fold.validation, "test": fold.test}
        tables = {
            name: action_values(agent.q_values, market, lo, hi, config.env)
            for name, (lo, hi) in windows.items()
        }
        record["q_edge_ic"] = {
            name: q_edge_ic(q[:, flat], market, *windows[name]) for name, q in tables.items()
        }
        for name in ("validation", "test"):
            lo, hi = windows[name]
            per_band = {}
            for band in BANDS:
                pos = banded_positions(tables[name], market, lo, hi, config.env, band)
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
        return kept

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
