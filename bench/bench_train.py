"""Learner speed on a GPU: one C51 dueling double-DQN update, fxstore (CuPy) vs PyTorch eager
and PyTorch captured in a CUDA graph.

DESIGN.md's target: one update (batch 16,384, width 256, Adam, grad clip) on an H200 in
<= 1.2 ms, faster than the same network and update in PyTorch eager. For every (batch, width)
in the grid, in one run on one GPU, medians over --repeat blocks of --iters updates each,
timed with CUDA events:

  (a) fxstore: ``Agent.update_async`` on a fixed batch on the device (forward of s and s'
      on the online net, s' on the target net, C51 projection, cross-entropy, backward,
      clip, Adam, Polyak), captured in one CUDA graph (the default) and kernel by kernel
      (``cuda_graph = false``) -- and the whole learner step: replay sample + update +
      priority write-back;
  (b) PyTorch eager: the same network, loss and update written the usual way (scatter-add
      projection, autograd, clip_grad_norm_, torch.optim.Adam with foreach, Polyak via
      _foreach ops);
  (c) PyTorch CUDA graph: (b) with Adam(capturable=True), captured once with
      ``torch.cuda.graph`` after a warm-up on a side stream (PyTorch's "whole-network
      capture" recipe) and replayed: what any PyTorch user can do in twenty lines;

each with float32 matmuls and with TF32 matmul inputs (``AgentConfig.tf32``; PyTorch's
``allow_tf32``), plus kernel launches per update for both, counted with the PyTorch
profiler (CUPTI sees CuPy's kernels too; a graph's kernels count one by one).
Environment steps/s are bench_env.py's.

Run:  FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/bench_train.py
      [--batches 4096,16384] [--widths 256,512] [--precisions fp32,tf32] [--iters 50]
      [--repeat 7] [--name train_gpu]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import cupy
import numpy as np
from _common import write_result

from fxstore.config import AgentConfig
from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.learner import LearnerStep
from fxstore.train.agent.replay import Batch, PrioritizedReplay

N_OBS = 31
N_ACTIONS = 5


def cuda_ms(func: Callable[[], object], iters: int, repeat: int) -> tuple[float, list[float]]:
    """Median milliseconds per call of `func` over `repeat` blocks of `iters` calls."""
    for _ in range(5):
        func()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(iters):
            func()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / iters)
    return statistics.median(times), times


def make_batch(batch: int, seed: int) -> Batch:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((batch, N_OBS)).astype(np.float32)
    next_obs = rng.standard_normal((batch, N_OBS)).astype(np.float32)
    return Batch(
        obs=cupy.asarray(obs),
        action=cupy.asarray(rng.integers(0, N_ACTIONS, batch)),
        reward=cupy.asarray(rng.standard_normal(batch).astype(np.float32)),
        discount=cupy.asarray(np.where(rng.random(batch) < 0.05, 0.0, 0.9**3).astype(np.float32)),
        next_obs=cupy.asarray(next_obs),
        weight=cupy.asarray(rng.uniform(0.2, 1.0, batch).astype(np.float32)),
        index=cupy.arange(batch, dtype=cupy.int64),
    )


def agent_config(
    batch: int, width: int, tf32: bool = False, cuda_graph: bool = True
) -> AgentConfig:
    return AgentConfig(
        hidden=width,
        layers=2,
        batch_size=batch,
        replay_size=max(4 * batch, 1),
        tf32=tf32,
        cuda_graph=cuda_graph,
    )


def in_place(agent: Agent, data: Batch) -> Batch:
    """`data` copied once into `agent`'s input buffers, which an update then reads in place:
    as in training, where the replay samples into them (and as the PyTorch updates here
    read their static input tensors)."""
    inputs = agent.input_buffers(int(data.action.shape[0]))
    for name in Batch._fields:
        getattr(inputs, name)[...] = getattr(data, name)
    return inputs


def ours(batch: int, width: int, iters: int, repeat: int, tf32: bool) -> dict[str, object]:
    """fxstore's update captured in a CUDA graph (the default) and kernel by kernel, on its
    input buffers, and the learner step (replay sample into those buffers + update +
    priority write-back) with the graph, as the training loop runs it."""
    data = make_batch(batch, 0)
    out: dict[str, object] = {}
    for name, cuda_graph in (("eager", False), ("graph", True)):
        agent = Agent(agent_config(batch, width, tf32, cuda_graph), N_OBS, N_ACTIONS, xp=cupy)
        inputs = in_place(agent, data)
        ms, all_ms = cuda_ms(lambda a=agent, b=inputs: a.update_async(b), iters, repeat)
        agent.check_finite()
        out[f"update_{name}_ms"], out[f"update_{name}_ms_all"] = ms, all_ms
        out[f"launches_{name}"] = count_launches(lambda a=agent, b=inputs: a.update_async(b))
    out["update_ms"], out["update_ms_all"] = out["update_graph_ms"], out["update_graph_ms_all"]
    out["launches_per_update"] = out["launches_graph"]
    config = agent_config(batch, width, tf32)
    replay = PrioritizedReplay(
        4 * batch, N_OBS, alpha=config.per_alpha, eps=config.per_eps, xp=cupy, seed=0
    )
    fill = make_batch(4 * batch, 1)
    replay.add(fill.obs, fill.action, fill.reward, fill.discount, fill.next_obs)

    inputs = agent.input_buffers(batch)

    def separate_step() -> None:
        sampled = replay.sample(batch, 0.4, out=inputs)
        replay.update_priorities(sampled.index, agent.update_async(sampled))

    # the learner step as training runs it (one CUDA graph), and as three separate calls
    learn = LearnerStep(agent, replay, batch)
    out["learner_step_ms"], out["learner_step_ms_all"] = cuda_ms(lambda: learn(0.4), iters, repeat)
    out["learner_step_graphed"] = learn.graphed
    out["learner_step_separate_ms"], out["learner_step_separate_ms_all"] = cuda_ms(
        separate_step, iters, repeat
    )
    agent.check_finite()
    return out


def torch_update(
    batch: int, width: int, tf32: bool, *, capturable: bool = False
) -> tuple[Callable[[], object], Any]:
    """The same C51 dueling double-DQN update in PyTorch eager; returns (update, torch).

    `capturable`: Adam keeps its step on the device, so the update can be graph-captured."""
    import torch
    from torch import nn

    torch.backends.cuda.matmul.allow_tf32 = tf32  # the same matmul precision as ours
    config = agent_config(batch, width)
    dev = torch.device("cuda")
    z = torch.linspace(config.v_min, config.v_max, config.n_atoms, device=dev)
    dz = (config.v_max - config.v_min) / (config.n_atoms - 1)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.torso = nn.Sequential(
                nn.Linear(N_OBS, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU()
            )
            self.value = nn.Linear(width, config.n_atoms)
            self.adv = nn.Linear(width, N_ACTIONS * config.n_atoms)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.torso(x)
            v = self.value(h).unsqueeze(1)
            a = self.adv(h).view(-1, N_ACTIONS, config.n_atoms)
            return torch.log_softmax(v + a - a.mean(1, keepdim=True), dim=-1)

    net, target = Net().to(dev), Net().to(dev)
    target.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(
        net.parameters(), lr=config.lr, eps=config.adam_eps, foreach=True, capturable=capturable
    )
    data = make_batch(batch, 0)
    obs, nobs = torch.from_dlpack(data.obs), torch.from_dlpack(data.next_obs)
    act, rew = torch.from_dlpack(data.action), torch.from_dlpack(data.reward)
    disc, w = torch.from_dlpack(data.discount), torch.from_dlpack(data.weight)
    rows = torch.arange(batch, device=dev)
    online_params, target_params = list(net.parameters()), list(target.parameters())

    def update() -> torch.Tensor:
        with torch.no_grad():
            a_star = (net(nobs).exp() * z).sum(-1).argmax(1)
            p_next = target(nobs).exp()[rows, a_star]
            tz = (rew[:, None] + disc[:, None] * z).clamp(config.v_min, config.v_max)
            b = (tz - config.v_min) / dz
            lo, hi = b.floor().long(), b.ceil().long()
            m = torch.zeros_like(p_next)
            m.scatter_add_(1, lo, p_next * (hi.float() - b + (lo == hi).float()))
            m.scatter_add_(1, hi, p_next * (b - lo.float()))
        logp = net(obs)[rows, act]
        per_sample = -(m * logp).sum(-1)
        loss = (w * per_sample).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(online_params, config.grad_clip, foreach=True)
        opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(target_params, online_params, config.target_tau)
        return per_sample.detach()

    return update, torch


def count_launches(func: Callable[[], object], calls: int = 20) -> float:
    """CUDA kernel launches per call of `func`, from the PyTorch profiler (CUPTI)."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return float("nan")
    func()
    torch.cuda.synchronize()
    cupy.cuda.Device().synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            func()
        cupy.cuda.Device().synchronize()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    return len(kernels) / calls


def torch_graphed_update(batch: int, width: int, tf32: bool) -> Callable[[], object]:
    """(c): the update of :func:`torch_update` captured in one CUDA graph; returns replay."""
    update, torch = torch_update(batch, width, tf32, capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: allocator pools, Adam state, cuBLAS workspaces
        for _ in range(3):
            update()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        update()
    return graph.replay


def graphed(batch: int, width: int, iters: int, repeat: int, tf32: bool) -> dict[str, object]:
    import torch

    replay = torch_graphed_update(batch, width, tf32)
    ms, all_ms = cuda_ms(replay, iters, repeat)
    torch.cuda.synchronize()
    return {"update_ms": ms, "update_ms_all": all_ms, "launches_per_update": count_launches(replay)}


def theirs(batch: int, width: int, iters: int, repeat: int, tf32: bool) -> dict[str, object]:
    update, torch = torch_update(batch, width, tf32)

    def timed() -> None:
        update()

    ms, all_ms = cuda_ms(timed, iters, repeat)
    torch.cuda.synchronize()
    return {"update_ms": ms, "update_ms_all": all_ms, "launches_per_update": count_launches(update)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="4096,16384")
    parser.add_argument("--widths", default="256,512")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--precisions", default="fp32,tf32", help="matmul input precisions")
    parser.add_argument("--name", default="train_gpu", help="results file bench/results/NAME.json")
    args = parser.parse_args()
    rows = []
    grid = [
        (precision, int(batch), int(width))
        for precision in args.precisions.split(",")
        for batch in args.batches.split(",")
        for width in args.widths.split(",")
    ]
    for precision, batch, width in grid:
        tf32 = precision == "tf32"
        try:
            mine = ours(batch, width, args.iters, args.repeat, tf32)
        except Exception as err:  # a CuPy without the TF32 switch: record it, go on
            rows.append({"precision": precision, "batch": batch, "width": width, "error": str(err)})
            print(f"{precision} batch {batch} width {width}: {err}")
            continue
        ref = theirs(batch, width, args.iters, args.repeat, tf32)
        graph = graphed(batch, width, args.iters, args.repeat, tf32)
        row = {
            "precision": precision,
            "batch": batch,
            "width": width,
            "fxstore": mine,
            "pytorch_eager": ref,
            "pytorch_graph": graph,
            "speedup_vs_pytorch": ref["update_ms"] / mine["update_ms"],  # type: ignore[operator]
            "speedup_vs_pytorch_graph": graph["update_ms"] / mine["update_ms"],  # type: ignore[operator]
            "fxstore_samples_per_s": batch / (mine["learner_step_ms"] / 1e3),  # type: ignore[operator]
        }
        rows.append(row)
        print(
            f"{precision} batch {batch:6d} width {width:4d}: fxstore update "
            f"{mine['update_ms']:.3f} ms in a graph, {mine['update_eager_ms']:.3f} ms eager "
            f"({mine['launches_eager']:.0f} launches; learner step "
            f"{mine['learner_step_ms']:.3f} ms as one graph: {mine['learner_step_graphed']}, "
            f"{mine['learner_step_separate_ms']:.3f} ms as separate calls), PyTorch eager "
            f"{ref['update_ms']:.3f} ms ({ref['launches_per_update']:.0f} launches): "
            f"{row['speedup_vs_pytorch']:.2f}x; PyTorch CUDA graph {graph['update_ms']:.3f} ms: "
            f"{row['speedup_vs_pytorch_graph']:.2f}x"
        )
    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    payload = {"gpu": gpu, "n_obs": N_OBS, "n_actions": N_ACTIONS, "iters": args.iters}
    path = write_result(args.name, {**payload, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
