"""What the GPU gives a learner step, alone and beside others on their own CUDA streams.

The training loop's learner step (a prioritized draw from the replay, the agent's update,
the priorities written back: one CUDA graph, ``fxstore.train.agent.learner.LearnerStep``)
is timed here without the loop around it: K learners (an agent and a replay filled with
random transitions each), each on its own non-blocking stream, step in turn N times; the
wall time over K·N steps is the time a step costs when K seeds share one GPU. K = 1 is the
serial loop's case. If a step's time falls as K grows, the steps of one learner leave the
GPU idle between its many small kernels (launch latency, not work, sets the pace) and seeds
run side by side on streams would finish a year sooner; if it stays, the GPU is full.

Run:  FXSTORE_BENCH_MACHINE=nvidia-h100 PYTHONPATH=. python bench/diag_learner_streams.py \
          [--batch 4096,16384] [--learners 1,2,3] [--steps 300] [--n-obs 2]
          [--name learner_streams]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from _common import write_result

from fxstore.config import AgentConfig
from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.learner import LearnerStep
from fxstore.train.agent.replay import PrioritizedReplay

N_ACTIONS = 5


def make_learner(cupy: Any, n_obs: int, batch: int, replay_size: int, seed: int) -> LearnerStep:
    """An agent of the GPU profiles' network and a full replay of random transitions."""
    xp = cupy
    config = AgentConfig(hidden=256, layers=2, n_atoms=51, seed=seed)
    agent = Agent(config, n_obs, N_ACTIONS, xp=xp)
    replay = PrioritizedReplay(replay_size, n_obs, alpha=0.6, eps=1e-6, xp=xp, seed=seed)
    gen = xp.random.default_rng(seed)
    chunk = 100_000
    for start in range(0, replay_size, chunk):
        n = min(chunk, replay_size - start)
        replay.add(
            gen.standard_normal((n, n_obs), dtype=xp.float32),
            gen.integers(0, N_ACTIONS, n).astype(xp.int64),
            gen.standard_normal(n, dtype=xp.float32),
            xp.full(n, 0.9**3, dtype=xp.float32),
            gen.standard_normal((n, n_obs), dtype=xp.float32),
        )
    return LearnerStep(agent, replay, batch)


def seconds_per_step(
    cupy: Any, learners: list[LearnerStep], streams: list[Any], steps: int
) -> float:
    """Wall seconds per learner step with each learner on its stream, stepping in turn."""
    device = cupy.cuda.Device()
    device.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        for learn, stream in zip(learners, streams, strict=True):
            with stream:
                learn(0.5)
    device.synchronize()
    return (time.perf_counter() - start) / (steps * len(learners))


def main() -> None:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", default="4096,16384")
    parser.add_argument("--learners", default="1,2,3")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--n-obs", type=int, default=2)
    parser.add_argument("--replay-size", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--name", default="learner_streams")
    args = parser.parse_args()
    counts = [int(k) for k in args.learners.split(",")]
    rows: dict[str, dict[str, float]] = {}
    for batch in (int(b) for b in args.batch.split(",")):
        streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(max(counts))]
        learners = []
        for i, stream in enumerate(streams):
            with stream:
                learners.append(make_learner(cupy, args.n_obs, batch, args.replay_size, seed=i))
                for _ in range(20):  # capture and warm
                    learners[-1](0.5)
        row: dict[str, float] = {}
        for k in counts:
            times = [
                seconds_per_step(cupy, learners[:k], streams[:k], args.steps)
                for _ in range(args.repeat)
            ]
            row[str(k)] = statistics.median(times) * 1e6
            graphed = all(learn.graphed for learn in learners[:k])
            print(
                f"batch {batch}: {k} learner(s): {row[str(k)]:7.1f} us a step (graphed {graphed})"
            )
        rows[str(batch)] = row
        del learners, streams
        cupy.get_default_memory_pool().free_all_blocks()
    write_result(
        args.name,
        {
            "n_obs": args.n_obs,
            "replay_size": args.replay_size,
            "steps": args.steps,
            "us_per_step_by_batch_and_learners": rows,
            "speedup_by_batch": {
                b: {k: row["1"] / t for k, t in row.items()}
                for b, row in rows.items()
                if "1" in row
            },
        },
    )


if __name__ == "__main__":
    main()
