"""Where one agent update spends its GPU time: every kernel's median duration, per update.

After capturing the update in a CUDA graph (launch overhead gone), what is left is
the kernels' own time. This runs `--updates` updates of ``Agent.update_async`` (captured, as
training runs them) under the PyTorch profiler, whose CUPTI sees CuPy's and cuBLAS's kernels,
and prints each kernel's time per update, largest first, with the sum against the wall time
per update measured with CUDA events in the same process.

With ``--learner-step`` it profiles the training loop's learner step instead: the replay's
sample into the agent's input buffers, the update and the priority write-back.

Run:  FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/diag_update_kernels.py
      [--batch 16384] [--width 256] [--tf32] [--updates 50] [--learner-step [--separate]]
      [--epilogues relu_bias,relu_aux_bias,drelu_bgrad|none]
      [--name update_kernels]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import cupy
from _common import write_result
from bench_train import N_ACTIONS, N_OBS, agent_config, cuda_ms, in_place, make_batch

from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.learner import LearnerStep
from fxstore.train.agent.replay import PrioritizedReplay
from fxstore.train.gpu.cublaslt import (
    EPILOGUE_DRELU_BGRAD,
    EPILOGUE_RELU_AUX_BIAS,
    EPILOGUE_RELU_BIAS,
)

EPILOGUES = {
    "relu_bias": EPILOGUE_RELU_BIAS,
    "relu_aux_bias": EPILOGUE_RELU_AUX_BIAS,
    "drelu_bgrad": EPILOGUE_DRELU_BGRAD,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16_384)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--tf32", action="store_true")
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--learner-step", action="store_true", help="sample + update + write-back")
    parser.add_argument(
        "--separate",
        action="store_true",
        help="with --learner-step: its three parts as separate calls, not one CUDA graph",
    )
    parser.add_argument(
        "--epilogues",
        default=None,
        help="cuBLASLt epilogues to use, comma-separated of "
        f"{','.join(EPILOGUES)} or 'none' (default: the ops' own default)",
    )
    parser.add_argument("--name", default="update_kernels")
    args = parser.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    config = agent_config(args.batch, args.width, args.tf32)
    agent = Agent(config, N_OBS, N_ACTIONS, xp=cupy)
    if args.epilogues is not None:
        names = [] if args.epilogues == "none" else args.epilogues.split(",")
        agent._ops.epilogues = {EPILOGUES[n] for n in names}  # type: ignore[attr-defined]
    inputs = in_place(agent, make_batch(args.batch, 0))
    replay = PrioritizedReplay(
        4 * args.batch, N_OBS, alpha=config.per_alpha, eps=config.per_eps, xp=cupy, seed=0
    )
    fill = make_batch(4 * args.batch, 1)
    replay.add(fill.obs, fill.action, fill.reward, fill.discount, fill.next_obs)

    learn = LearnerStep(agent, replay, args.batch)

    def step() -> None:
        if not args.learner_step:
            agent.update_async(inputs)
        elif args.separate:
            sampled = replay.sample(args.batch, 0.4, out=inputs)
            replay.update_priorities(sampled.index, agent.update_async(sampled))
        else:
            learn(0.4)

    wall_ms, _ = cuda_ms(step, args.updates, 5)
    cupy.cuda.Device().synchronize()
    # the host's time to issue a step (no wait): below the wall time, the GPU is the limit
    host_us = []
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(10):
            step()
        host_us.append((time.perf_counter() - began) / 10 * 1e6)
        cupy.cuda.Device().synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.updates):
            step()
        cupy.cuda.Device().synchronize()
        torch.cuda.synchronize()
    agent.check_finite()
    per_kernel: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for event in prof.events():
        if event.device_type.name == "CUDA":
            per_kernel[event.name] += event.device_time / args.updates
            counts[event.name] += 1
    rows = sorted(per_kernel.items(), key=lambda kv: -kv[1])
    total_us = sum(per_kernel.values())
    what = "learner step" if args.learner_step else "update"
    print(
        f"{what}, batch {args.batch} width {args.width} tf32 {args.tf32}: "
        f"wall {wall_ms * 1e3:.0f} us, host issues one in {statistics.median(host_us):.0f} us"
    )
    print(f"per update, kernels sum to {total_us:.0f} us")
    for name, us in rows:
        print(f"{us:8.1f} us  x{counts[name] / args.updates:4.1f}  {name[:110]}")
    write_result(
        args.name,
        {
            "batch": args.batch,
            "width": args.width,
            "tf32": args.tf32,
            "learner_step": args.learner_step,
            "learner_step_separate": args.separate,
            "epilogues": sorted(
                n
                for n, e in EPILOGUES.items()
                if e in agent._ops.epilogues  # type: ignore[attr-defined]
            ),
            "epilogues_refused": sorted(
                n
                for n, e in EPILOGUES.items()
                if e in agent._ops.refused  # type: ignore[attr-defined]
            ),
            "wall_us_per_update": wall_ms * 1e3,
            "host_us_to_issue": statistics.median(host_us),
            "kernel_us_per_update": total_us,
            "kernels": [
                {"name": n, "us_per_update": us, "per_update": counts[n] / args.updates}
                for n, us in rows
            ],
        },
    )


if __name__ == "__main__":
    main()
