"""The floor under one agent update set by its GEMMs alone, in plain PyTorch (cuBLAS).

The target is an fp32 update of 0.7 ms at 16,384 x 256. This runs the update's eleven
GEMMs, with the shapes fxstore's update has (the online network over the batch's states and
next states, the target network over the next states, the backward pass and the three
weight gradients), and nothing else, captured in one CUDA graph with preallocated outputs,
and times the graph's replay: what the simplest program doing the same matrix work takes
on this GPU, in fp32 and in TF32. Everything else in an update (C51, bias and ReLU passes,
Adam) only adds to it.

Run:  FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/diag_gemm_ceiling.py
      [--batch 16384] [--width 256] [--name gemm_ceiling]
"""

from __future__ import annotations

import argparse
import statistics

from _common import write_result

N_IN = 32  # 31 features, padded as the agent stores them
HEAD = 308  # 6 x 51 atoms, padded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16_384)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--name", default="gemm_ceiling")
    args = parser.parse_args()
    import torch

    b, w = args.batch, args.width
    dev = torch.device("cuda")

    def t(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=dev)

    w0, w1, wh = t(N_IN, w), t(w, w), t(w, HEAD)
    x2, h2a, h2b = t(2 * b, N_IN), t(2 * b, w), t(2 * b, w)
    d_head, d_h = t(b, HEAD), t(b, w)
    # (a, b, out): out = a @ b, in the update's order
    gemms = [
        (x2, w0, t(2 * b, w)),  # online forward, states and next states
        (h2a, w1, t(2 * b, w)),
        (h2b, wh, t(2 * b, HEAD)),
        (x2[b:], w0, t(b, w)),  # target forward, next states
        (h2a[b:], w1, t(b, w)),
        (h2b[b:], wh, t(b, HEAD)),
        (d_head, wh.T, t(b, w)),  # backward through the head and the hidden layer
        (d_h, w1.T, t(b, w)),
        (h2b[:b].T, d_head, t(w, HEAD)),  # weight gradients over the batch
        (h2a[:b].T, d_h, t(w, w)),
        (x2[:b].T, d_h, t(N_IN, w)),
    ]
    flops = sum(2 * a.shape[0] * a.shape[1] * bb.shape[1] for a, bb, _ in gemms)
    rows = []
    for precision in ("fp32", "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                for a, bb, out in gemms:
                    torch.matmul(a, bb, out=out)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for a, bb, out in gemms:
                torch.matmul(a, bb, out=out)
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.repeat):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / args.iters)
        ms = statistics.median(times)
        print(
            f"{precision}: the update's {len(gemms)} GEMMs ({flops / 1e9:.1f} GFLOP) alone take "
            f"{ms:.3f} ms in one CUDA graph ({flops / ms / 1e9:.0f} TFLOP/s)"
        )
        tflops = flops / ms / 1e9
        rows.append({"precision": precision, "gemms_ms": ms, "all": times, "tflops": tflops})
    write_result(
        args.name,
        {
            "gpu": torch.cuda.get_device_name(),
            "batch": b,
            "width": w,
            "n_gemms": len(gemms),
            "gflop": flops / 1e9,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
