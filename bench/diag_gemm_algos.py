"""How much faster the update's GEMMs could be with another cuBLASLt algorithm than the one
each takes now.

The fp32 update at 16,384 x 256 is bound by its GEMMs (0.716 ms for the same GEMMs
in a captured PyTorch graph, `diag_gemm_ceiling.py`), and cuBLASLt's heuristic gives each
GEMM its first guess. This records every GEMM of one eager update (``Cublas.gemm``, the
split-K weight gradients of ``CupyOps.grad_matmul`` and ``CublasLt.matmul`` with its
epilogue), then for each times the call as the update makes it and every algorithm
cuBLASLt's heuristic offers for the same product and epilogue (up to `--algos`, reductions
through the workspace only, as the update allows), each captured in a CUDA graph as the
update runs, and prints the sum over the update: now, cuBLASLt's first guess, and the
fastest candidate per GEMM.

On the H200 (bench/results/gemm_algos_*.json) the fastest of cuBLASLt's eight
candidates would save 15 of 660 us at 16,384 x 256 fp32, 19 of 232 in TF32, 7 and 10 at
batch 4,096: too little to trade run-to-run determinism for (an algorithm picked by timing
can differ between runs, and with it the results' bits). cuBLASLt's first guess is the
kernel cublasGemmEx runs for the plain products (the same time), and worse than the split-K
weight gradient where that splits (125 against 75 us). Timed one call at a time instead of
in a graph, the host's 10-20 us to issue a small GEMM hid this: a first, per-call version
of this script showed savings that the update did not get.

Run:  FXSTORE_BENCH_MACHINE=nvidia-h200 PYTHONPATH=. python bench/diag_gemm_algos.py
      [--batch 16384] [--width 256] [--tf32] [--algos 32] [--name gemm_algos]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cupy
from _common import write_result
from bench_train import N_ACTIONS, N_OBS, agent_config, in_place, make_batch

from fxstore.train.agent.dqn import Agent
from fxstore.train.gpu import cublas as _cublas
from fxstore.train.gpu import cublaslt as _cublaslt
from fxstore.train.gpu import update_kernels as _gpu_kernels
from fxstore.train.gpu.cublaslt import EPILOGUE_DEFAULT

_CONFIG_ATTRS = {"id": 0, "tile": 1, "splitk": 2, "reduction": 3, "swizzle": 4, "stages": 6}


@dataclass
class Call:
    kind: str  # "gemm", "grad_matmul" or "lt"
    a: Any
    b: Any
    out: Any
    epilogue: int
    kwargs: dict[str, Any]

    def shape(self) -> str:
        ta = "T" if _cublas._operand(self.a)[0] else "N"
        tb = "T" if _cublas._operand(self.b)[0] else "N"
        return f"{self.a.shape}{ta} @ {self.b.shape}{tb} -> {self.out.shape} ep {self.epilogue}"


def record(agent: Agent, inputs: Any) -> list[Call]:
    """The GEMMs one eager update makes, in order."""
    calls: list[Call] = []
    inside = [False]
    originals = (
        _cublas.Cublas.gemm,
        _gpu_kernels.CupyOps.grad_matmul,
        _cublaslt.CublasLt.matmul,
    )

    def gemm(self: Any, a: Any, b: Any, out: Any) -> None:
        if not inside[0]:
            calls.append(Call("gemm", a, b, out, EPILOGUE_DEFAULT, {}))
        originals[0](self, a, b, out)

    def grad_matmul(self: Any, a: Any, b: Any, out: Any) -> None:
        calls.append(Call("grad_matmul", a, b, out, EPILOGUE_DEFAULT, {}))
        inside[0] = True
        try:
            originals[1](self, a, b, out)
        finally:
            inside[0] = False

    def lt(self: Any, a: Any, b: Any, out: Any, **kwargs: Any) -> None:
        if not inside[0]:
            calls.append(Call("lt", a, b, out, kwargs["epilogue"], dict(kwargs)))
        originals[2](self, a, b, out, **kwargs)

    _cublas.Cublas.gemm = gemm  # type: ignore[method-assign]
    _gpu_kernels.CupyOps.grad_matmul = grad_matmul  # type: ignore[method-assign]
    _cublaslt.CublasLt.matmul = lt  # type: ignore[method-assign]
    try:
        agent.update_async(inputs)
        cupy.cuda.Device().synchronize()
    finally:
        (
            _cublas.Cublas.gemm,
            _gpu_kernels.CupyOps.grad_matmul,
            _cublaslt.CublasLt.matmul,
        ) = originals  # type: ignore[method-assign]
    return calls


def time_us(func: Callable[[], None], reps: int = 20, repeat: int = 7) -> float:
    """GPU time of one `func()`: `reps` calls captured in one CUDA graph (as the update runs
    them), the graph's replay timed with events, the median of `repeat` replays over
    `reps`. Timed call by call, the host's ~10-20 us to issue a small GEMM would be timed
    instead of the GEMM."""
    func()
    stream = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.get_current_stream().synchronize()
    with stream:
        stream.begin_capture()
        try:
            for _ in range(reps):
                func()
        finally:
            graph = stream.end_capture()
        graph.launch(stream)
        times = []
        for _ in range(repeat):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            graph.launch(stream)
            stop.record(stream)
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e3 / reps)
    return statistics.median(times)


def describe(lib: Any, result: Any) -> dict[str, int]:
    """An algorithm's configuration (cublasLtMatmulAlgoConfigGetAttribute; -1: not read)."""
    lib.cublasLtMatmulAlgoConfigGetAttribute.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ]  # fmt: skip
    out = {}
    for name, attr in _CONFIG_ATTRS.items():
        value, written = ctypes.c_uint64(0), ctypes.c_size_t(0)
        status = lib.cublasLtMatmulAlgoConfigGetAttribute(
            ctypes.byref(result.algo), attr, ctypes.byref(value), 8, ctypes.byref(written)
        )
        out[name] = int(value.value) if status == 0 else -1
    return out


def candidates(lt: Any, call: Call, count: int) -> tuple[Any, list[Any]]:
    """The plan cuBLASLt's matmul would use for `call`, and up to `count` algorithms."""
    lib = lt._lib
    plan = lt._plan(call.a, call.b, call.out, call.epilogue, call.kwargs.get("aux_ld", 0))
    results = (_cublaslt._HeuristicResult * count)()
    found = ctypes.c_int(0)
    status = lib.cublasLtMatmulAlgoGetHeuristic(
        lt._handle, plan.desc, plan.a, plan.b, plan.d, plan.d, lt._pref, count,
        results, ctypes.byref(found),
    )  # fmt: skip
    if status != 0 or found.value == 0:
        print(f"   cuBLASLt heuristic: status {status}, {found.value} found for {call.shape()}")
        return plan, []
    return plan, [results[i] for i in range(found.value) if results[i].state == 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16_384)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--tf32", action="store_true")
    parser.add_argument("--algos", type=int, default=32)
    parser.add_argument("--name", default="gemm_algos")
    args = parser.parse_args()

    config = agent_config(args.batch, args.width, args.tf32, cuda_graph=False)
    agent = Agent(config, N_OBS, N_ACTIONS, xp=cupy)
    inputs = in_place(agent, make_batch(args.batch, 0))
    agent.update_async(inputs)  # plans made, buffers sized
    calls = record(agent, inputs)
    ops = agent._ops  # type: ignore[attr-defined]
    lt = ops._lt
    if lt is None:
        raise SystemExit("cuBLASLt is not available here")
    rows = []
    for i, call in enumerate(calls):
        if call.kind == "gemm":
            now = time_us(lambda c=call: ops._blas.gemm(c.a, c.b, c.out))
        elif call.kind == "grad_matmul":
            now = time_us(lambda c=call: ops.grad_matmul(c.a, c.b, c.out))
        else:
            now = time_us(lambda c=call: lt.matmul(c.a, c.b, c.out, **c.kwargs))
        plan, algos = candidates(lt, call, args.algos)
        first = plan.algo
        timed = []
        for k, algo in enumerate(algos):
            plan.algo = algo
            try:
                kwargs = call.kwargs or {"epilogue": EPILOGUE_DEFAULT}
                us = time_us(lambda c=call, kw=kwargs: lt.matmul(c.a, c.b, c.out, **kw))
            except RuntimeError as err:
                timed.append({"index": k, "error": str(err)})
                continue
            timed.append(
                {"index": k, "us": us, "workspace": int(algo.workspace_size),
                 **describe(lt._lib, algo)}
            )  # fmt: skip
        plan.algo = first
        ok = [t for t in timed if "us" in t]
        best = min(ok, key=lambda t: t["us"]) if ok else None
        row = {
            "call": i,
            "kind": call.kind,
            "shape": call.shape(),
            "now_us": now,
            "lt_first_us": ok[0]["us"] if ok and ok[0]["index"] == 0 else None,
            "lt_best_us": best["us"] if best else None,
            "lt_best": best,
            "candidates": timed,
        }
        rows.append(row)
        nan = float("nan")
        first_us, best_us = row["lt_first_us"] or nan, row["lt_best_us"] or nan
        print(
            f"{i:2d} {call.kind:11s} {call.shape():60s} now {now:7.1f} us, lt first "
            f"{first_us:7.1f}, best {best_us:7.1f} of {len(ok)} (#{best['index'] if best else '-'})"
        )
    total_now = sum(r["now_us"] for r in rows)
    total_first = sum(r["lt_first_us"] or r["now_us"] for r in rows)
    total_best = sum(min(r["now_us"], r["lt_best_us"] or r["now_us"]) for r in rows)
    print(
        f"update's GEMMs, batch {args.batch} width {args.width} tf32 {args.tf32}: "
        f"{total_now:.0f} us now, {total_first:.0f} us each by cuBLASLt's first guess, "
        f"{total_best:.0f} us with each GEMM's fastest ({total_now - total_best:.0f} us less)"
    )
    write_result(
        args.name,
        {
            "batch": args.batch,
            "width": args.width,
            "tf32": args.tf32,
            "gemms_now_us": total_now,
            "gemms_lt_first_us": total_first,
            "gemms_best_us": total_best,
            "calls": rows,
        },
    )


if __name__ == "__main__":
    main()
