"""Where a training run's wall time goes: the host's seconds in each part of the loop.

On the H200 the 9-fold year took 57-72 s on machines whose hosts differed, while
the update itself is a fraction of a millisecond of GPU time, so the host's side of the loop
sets the pace. This wraps the loop's parts with host timers (acting, the environment step,
the n-step accumulation, the replay's add, the learner step and its pieces, evaluation, the
waits for the device, checkpoints), runs ``fxstore.train.loop.train`` on one store with one
profile, and prints each part's calls, host seconds (exclusive of the parts it calls) and µs
per call, against the run's wall time. On a GPU the parts queue work without waiting for it
(but for the waits and evaluation), so a part's host time is what the host spends issuing
it; where the parts' sum is close to the wall time, the host is the limit, not the GPU.

With ``--sync`` each action first waits for the device, timed as its own part ("device
backlog before act"): that is how far the GPU's queued work (the learner steps of the step
before) runs behind the host. A large backlog means the GPU, not the host, sets the pace;
without ``--sync`` that wait hides in whichever call finds CUDA's launch queue full.

Run:  FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/diag_loop_phases.py \
          --store S --profile bench/profiles/learn_gpu.toml [--max-folds 1] [--env-steps N]
          [--sync] [--fine] [--name loop_phases]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import profile_config, write_result

import fxstore.train.loop as loop_module
from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.replay import NStepAccumulator, PrioritizedReplay
from fxstore.train.env.vecenv import VecEnv

#: (part, owner, attribute): methods of classes, or functions of the loop module.
PARTS: list[tuple[str, Any, str]] = [
    ("act", Agent, "act"),
    ("environment step", VecEnv, "step"),
    ("n-step push", NStepAccumulator, "push"),
    ("n-step push into the replay", NStepAccumulator, "push_into"),
    ("replay add", PrioritizedReplay, "add"),
    ("replay sample", PrioritizedReplay, "sample"),
    ("update", Agent, "update_async"),
    ("priority write-back", PrioritizedReplay, "update_priorities"),
    ("evaluation", loop_module, "_evaluate"),
    ("wait for the device", loop_module, "_sync"),
    ("checkpoint", loop_module, "_save"),
]
PARTS = [part for part in PARTS if hasattr(part[1], part[2])]  # parts of older checkouts
# the learner step as one object, where this checkout has it (the CUDA-graph step)
try:
    _learner: Any = importlib.import_module("fxstore.train.agent.learner")
    PARTS.append(("learner step", _learner.LearnerStep, "__call__"))
except ImportError:
    pass


def _fine_parts() -> list[tuple[str, Any, str]]:
    """A fold's work outside the loop (the forecast's and linear's fits, the scoring, the
    ensemble) and, on CuPy, the pieces of acting and of the learner step (the Q-values'
    layers, the ε-greedy kernel and its draws, the sampler's host part) (``--fine``)."""
    parts: list[tuple[str, Any, str]] = [
        ("act: Q-values (host side)", Agent, "q_values"),
        ("fold: the forecast's fit", loop_module, "forecast_values"),
        ("fold: linear's fit", loop_module, "fit_linear"),
        ("fold: scoring with the references", loop_module, "evaluate_fold"),
        ("fold: the seeds' scores", loop_module, "_score"),
        ("fold: the ensemble", loop_module, "_ensemble"),
        ("run: the baselines", loop_module, "baseline_results"),
    ]
    try:
        from fxstore.train.gpu import act, env_kernels, rng, update_kernels
    except ImportError:  # no CuPy: the numpy path has none of these pieces
        return parts
    return [
        *parts,
        ("act: dense+ReLU layer", update_kernels.CupyOps, "dense_relu"),
        ("act: head GEMM", update_kernels.CupyOps, "matmul"),
        ("act: expected-Q kernel", update_kernels.CupyOps, "q_values"),
        ("act: epsilon-greedy kernel", act, "epsilon_greedy"),
        ("act: counter draws", rng.CounterRng, "next_bases"),
        ("environment: step kernel", env_kernels.CupyEnvKernels, "step"),
        ("learner: sampler's host part", PrioritizedReplay, "stage_sample"),
        ("learner: agent input buffers", Agent, "input_buffers"),
    ]


class Timers:
    """Exclusive host time per part: a part's time less the time of the parts it calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._stack: list[list[float]] = []  # [start, time in parts called from it]

    def wrap(self, part: str, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [time.perf_counter(), 0.0]
            self._stack.append(frame)
            try:
                return func(*args, **kwargs)
            finally:
                self._stack.pop()
                elapsed = time.perf_counter() - frame[0]
                self.seconds[part] = self.seconds.get(part, 0.0) + elapsed - frame[1]
                self.calls[part] = self.calls.get(part, 0) + 1
                if self._stack:
                    self._stack[-1][1] += elapsed

        return timed


@contextmanager
def timed_parts(timers: Timers, sync: bool = False) -> Iterator[None]:
    """PARTS wrapped with `timers` for the duration (put back after); with `sync`, each
    :meth:`Agent.act` first waits for the device, timed as "device backlog before act"."""
    saved = [(owner, name, getattr(owner, name)) for _, owner, name in PARTS]
    try:
        if sync:
            act = Agent.act
            wait = timers.wrap("device backlog before act", _wait_for_device)

            def act_after_wait(self: Agent, *args: Any, **kwargs: Any) -> Any:
                wait(self.xp)
                return act(self, *args, **kwargs)

            Agent.act = act_after_wait  # type: ignore[method-assign]
        for part, owner, name in PARTS:
            setattr(owner, name, timers.wrap(part, getattr(owner, name)))
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _wait_for_device(xp: Any) -> None:
    if xp.__name__ == "cupy":
        xp.cuda.get_current_stream().synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--max-folds", type=int, default=None)
    parser.add_argument("--env-steps", type=int, default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--sync", action="store_true", help="wait for the device before act")
    parser.add_argument(
        "--fine", action="store_true", help="also time the pieces of acting and learning"
    )
    parser.add_argument("--name", default="loop_phases")
    args = parser.parse_args()
    if args.fine:
        PARTS.extend(_fine_parts())
    config = profile_config(
        args.profile, max_folds=args.max_folds, env_steps=args.env_steps, device=args.device
    )
    timers = Timers()
    start = time.perf_counter()
    with timed_parts(timers, args.sync):
        loop_module.train(config, args.store)
    wall = time.perf_counter() - start
    parts = {
        part: {
            "calls": timers.calls[part],
            "host_s": timers.seconds[part],
            "us_per_call": timers.seconds[part] / timers.calls[part] * 1e6,
        }
        for part in sorted(timers.seconds, key=lambda p: -timers.seconds[p])
    }
    timed = sum(timers.seconds.values())
    rest = wall - timed
    print(f"wall {wall:.1f} s; the parts below {timed:.1f} s, the rest of the run {rest:.1f} s")
    for part, row in parts.items():
        print(
            f"{row['host_s']:8.2f} s  {row['calls']:8d} calls  {row['us_per_call']:9.1f} us  {part}"
        )
    write_result(
        args.name,
        {
            "store": str(args.store),
            "profile": config.profile,
            "config": config.to_json(),
            "wall_s": wall,
            "sync_before_act": args.sync,
            "fine": args.fine,
            "parts_s": timed,
            "parts": parts,
        },
    )


if __name__ == "__main__":
    main()
