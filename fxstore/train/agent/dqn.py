"""The distributional double DQN of `fxstore train`: a dueling C51 MLP and its learner.

The network (Bellemare et al. 2017; Wang et al. 2016): obs (B, n_obs) -> `layers` x
(Linear + ReLU, width `hidden`) -> one head GEMM giving the value logits V (B, N) and the
advantage logits A (B, n_actions, N); ``logits[a] = V + A[a] - mean_a A``, probabilities are a
softmax over the N atoms of each action and ``Q(s, a) = sum_i p_i z_i`` on the support
``z = linspace(v_min, v_max, N)``.

Forward and backward passes are written out by hand. Every parameter is a view into one flat
float32 buffer (weights stored (n_in, n_out), so a layer is ``x @ W + b``), and so are the
gradient and Adam's moments: Adam, clipping, the Polyak update and checkpoints are one fused
pass over one buffer. On CuPy the elementwise chains run as fused kernels
(:mod:`fxstore.train.gpu.update_kernels`, imported only then) between cuBLAS GEMMs; every reduction
has a fixed order (no atomics), so a seed gives the same losses on a device.

Loss (double DQN, n-step): a* = argmax_a Q_online(s', a); the target distribution is the
TARGET net's p(s', a*) moved to r + discount · z and projected back onto the support; the loss
is the cross-entropy to the online p(s, a), weighted by the importance weights, averaged over
the batch. Its per-sample value (unweighted) is the new replay priority.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, Final, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from fxstore.config import AgentConfig
from fxstore.errors import InvalidInputError, TrainingDivergedError
from fxstore.train.agent.checkpoint import check_state
from fxstore.train.agent.ops import (
    STEP_SCALARS,
    AdamInputs,
    C51Inputs,
    NumpyOps,
    Ops,
    Workspace,
    loss_and_grad_norm,
    project_distribution,
)
from fxstore.train.agent.replay import F32, I64, Array, Batch
from fxstore.train.gpu.rng import CounterRng
from fxstore.train.gpu.xp import to_host

__all__ = ["Agent", "Batch", "RandomGenerator", "UpdateStats", "make_rng", "project_distribution"]

logger = logging.getLogger(__name__)

#: What ``Agent._progress`` holds (float64): updates done, the update whose loss or gradient
#: was not finite (0: none), the running loss sum and count, the last loss and gradient norm.
_PROGRESS: Final = ("done", "diverged_at", "loss_total", "loss_count", "loss", "grad_norm")

_Float = TypeVar("_Float", bound=np.floating[Any])


class RandomGenerator(Protocol):
    """The calls :meth:`Agent.act` makes: both numpy's and CuPy's ``Generator`` have them."""

    def random(self, size: int) -> Array: ...

    def integers(self, low: int, high: int, size: int) -> Array: ...


def make_rng(xp: ModuleType, seed: int) -> RandomGenerator:
    """A seeded ``numpy.random.Generator`` or ``cupy.random.Generator`` for `xp`."""
    rng: RandomGenerator = xp.random.default_rng(seed)
    return rng


@dataclass(frozen=True, slots=True)
class UpdateStats:
    """What one update did, as host numbers (read back with the divergence check)."""

    loss: float
    """Importance-weighted mean cross-entropy of the batch, before the update."""
    grad_norm: float
    """Global L2 norm of the gradient before clipping."""
    step: int
    """Updates done, this one included."""


#: Rows of the weights are stored padded to a multiple of this many float32s (16 bytes): the
#: first layer's input rows (n_obs, 31 for the default features) and the head's columns
#: (51 x 6 = 306) would otherwise be unaligned, and cuBLAS then picks kernels of 1-element
#: alignment that run at about half the speed of the aligned ones (the update's profile).
_ALIGN: Final = 4


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each tensor of the network lies in the flat buffer: name -> (offset, shape).

    A tensor is stored padded (:attr:`stored`): the first layer's weight has ``n_in`` rows
    (n_obs rounded up to `align`), the head ``head_ld`` columns and bias entries (its width
    rounded up). The padding stays exactly zero: its inputs (the padded observation column)
    and its gradients (the padded head columns) are zero, so Adam and the Polyak update keep
    it there. :meth:`views` gives the network's own (unpadded) tensors."""

    n_obs: int
    n_actions: int
    hidden: int
    layers: int
    n_atoms: int
    align: int = _ALIGN

    @property
    def head_width(self) -> int:
        return self.n_atoms * (1 + self.n_actions)

    @property
    def n_in(self) -> int:
        """Stored rows of the first layer's weight (n_obs, padded)."""
        return _round_up(self.n_obs, self.align)

    @property
    def head_ld(self) -> int:
        """Stored columns of the head's weight and bias (head_width, padded)."""
        return _round_up(self.head_width, self.align)

    @property
    def tensors(self) -> list[tuple[str, tuple[int, ...]]]:
        """(name, stored shape) in buffer order."""
        shapes: list[tuple[str, tuple[int, ...]]] = []
        width = self.n_in
        for i in range(self.layers):
            shapes += [
                (f"torso.{i}.weight", (width, self.hidden)),
                (f"torso.{i}.bias", (self.hidden,)),
            ]
            width = self.hidden
        return [
            *shapes,
            ("head.weight", (width, self.head_ld)),
            ("head.bias", (self.head_ld,)),
        ]

    @property
    def size(self) -> int:
        return sum(math.prod(shape) for _, shape in self.tensors)

    def stored(self, flat: npt.NDArray[_Float]) -> dict[str, npt.NDArray[_Float]]:
        """Views of `flat` per tensor, padding included (what the GEMMs read and write)."""
        out: dict[str, npt.NDArray[_Float]] = {}
        offset = 0
        for name, shape in self.tensors:
            out[name] = flat[offset : offset + math.prod(shape)].reshape(shape)
            offset += math.prod(shape)
        return out

    def views(self, flat: npt.NDArray[_Float]) -> dict[str, npt.NDArray[_Float]]:
        """Views of `flat` per tensor without the padding; 'head.*' also as 'value.*' and
        'adv.*' column slices."""
        out = self.stored(flat)
        first = "torso.0.weight" if self.layers else "head.weight"
        out[first] = out[first][: self.n_obs]
        n, w = self.n_atoms, self.head_width
        out["head.weight"], out["head.bias"] = out["head.weight"][:, :w], out["head.bias"][:w]
        out["value.weight"], out["adv.weight"] = (
            out["head.weight"][:, :n],
            out["head.weight"][:, n:],
        )
        out["value.bias"], out["adv.bias"] = out["head.bias"][:n], out["head.bias"][n:]
        return out


def _rows_for(weight: F32, x: F32) -> F32:
    """`weight`'s first ``x.shape[1]`` rows: the first layer's stored weight has padded rows
    that an unpadded input (an observation batch of n_obs columns) does not reach."""
    return weight if x.shape[1] == weight.shape[0] else weight[: x.shape[1]]


def _init_params(layout: _Layout, seed: int) -> npt.NDArray[np.float32]:
    """He/Kaiming-uniform weights (gain √2 in the torso, 1 in the linear head), zero biases."""
    rng = np.random.default_rng(seed)
    flat = np.zeros(layout.size, dtype=np.float32)
    for name, view in layout.views(flat).items():
        if name.startswith(("torso.", "head.")) and name.endswith(".weight"):
            gain = 2.0 if name.startswith("torso.") else 1.0
            bound = math.sqrt(3.0 * gain / view.shape[0])
            view[...] = rng.uniform(-bound, bound, size=view.shape)
    return flat


def _ops_for(xp: ModuleType, tf32: bool, cuda_graph: bool) -> Ops:
    if xp is np:
        return NumpyOps()
    from fxstore.train.gpu.update_kernels import CupyOps

    return CupyOps(tf32=tf32, cuda_graph=cuda_graph)


_STATE_KEYS = ("params", "target_params", "adam_m", "adam_v")
_HINT = "lower `lr` or `grad_clip`"


class Agent:
    """A dueling C51 double DQN with its target network and Adam state, on numpy or CuPy.

    Parameters
    ----------
    config
        Network shape, support, optimiser and target-update settings.
    n_obs
        Observation width.
    n_actions
        Discrete actions.
    xp
        F32 module of the weights and of every array given to or returned by the agent.
    """

    def __init__(
        self, config: AgentConfig, n_obs: int, n_actions: int, *, xp: ModuleType = np
    ) -> None:
        for name, value in (("n_obs", n_obs), ("n_actions", n_actions)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"`{name}` must be an int >= 1, was {value!r}.")
        self.config, self.n_obs, self.n_actions, self.xp = config, n_obs, n_actions, xp
        self.step = 0
        """Updates done."""
        self._layout = _Layout(n_obs, n_actions, config.hidden, config.layers, config.n_atoms)
        self._ops = _ops_for(xp, config.tf32, config.cuda_graph)
        support = np.linspace(config.v_min, config.v_max, config.n_atoms).astype(np.float32)
        self._set_buffers(xp.asarray(_init_params(self._layout, config.seed)), support)

    def _set_buffers(self, params: F32, support: npt.NDArray[np.floating]) -> None:
        """Take `params` as the online weights; target = a copy, fresh Adam state."""
        xp = self.xp
        self._params, self._target = params, params.copy()
        self._m, self._v, self._grad = (xp.zeros_like(params) for _ in range(3))
        self._support = xp.asarray(support, dtype=params.dtype)
        self._scalars = xp.zeros(2, dtype=xp.float64)  # loss sum, squared gradient norm
        # updates done, the update that diverged (0: none), loss total and count, last loss
        # and gradient norm: kept on the device (CuPy) so that an update needs no sync
        self._progress = xp.zeros(len(_PROGRESS), dtype=xp.float64)
        self._step_out = xp.zeros(len(STEP_SCALARS), dtype=xp.float32)
        # the stored (padded) tensors: what the GEMMs read and write
        self._net = self._layout.stored(self._params)
        self._target_net = self._layout.stored(self._target)
        self._grad_net = self._layout.stored(self._grad)
        self._workspace: Workspace | None = None
        self._compiled: Callable[[], None] | None = None

    def _cast(self, dtype: type[np.floating]) -> None:
        """Recast every buffer to `dtype` (numpy only; float64 for gradient checks)."""
        support = to_host(self._support).astype(dtype)
        params, target = self._params.astype(dtype), self._target.astype(dtype)
        self._set_buffers(params, support)
        self._target[...] = target

    @property
    def parameters(self) -> dict[str, F32]:
        """Writable views of the online weights by name ('torso.0.weight', ..., 'adv.bias').

        Weights are (n_in, n_out); 'head.*' holds 'value.*' then 'adv.*' as its columns.
        """
        return self._layout.views(self._params)

    def _torso(
        self,
        net: Mapping[str, F32],
        x: F32,
        out: list[F32] | None = None,
        masks: list[Any] | None = None,
    ) -> list[F32]:
        """Activations [x, h_1, ..., h_layers] of the torso (into `out` when given; with
        `masks`, each layer keeps what its backward pass needs there)."""
        acts = [x]
        for i in range(self._layout.layers):
            into = (
                out[i]
                if out is not None
                else self.xp.empty((x.shape[0], self._layout.hidden), dtype=self._params.dtype)
            )
            w = _rows_for(net[f"torso.{i}.weight"], acts[-1])
            mask = masks[i] if masks is not None else None
            self._ops.dense_relu(acts[-1], w, net[f"torso.{i}.bias"], into, mask)
            acts.append(into)
        return acts

    def q_values(self, obs: F32) -> F32:
        """Expected Q (n, n_actions) float32 of the online net for obs (n, n_obs)."""
        obs = self.xp.asarray(obs, dtype=self._params.dtype)
        h = self._torso(self._net, obs)[-1]
        head = self._ops.matmul(h, _rows_for(self._net["head.weight"], h))
        w = self._layout.head_width
        return self._ops.q_values(head[:, :w], self._net["head.bias"][:w], self._support)

    def act(self, obs: F32, epsilon: float, rng: RandomGenerator) -> I64:
        """ε-greedy actions (n,) int64: greedy over :meth:`q_values`, uniform with prob ε.

        `rng` is :func:`make_rng` of the agent's array module or a
        :class:`fxstore.train.gpu.rng.CounterRng`; each call draws ``n`` uniforms, then ``n``
        integers, so a seed gives the same actions. On CuPy with a CounterRng (the training
        loop's) the choice after the Q-values is one kernel with the same draws
        (:mod:`fxstore.train.gpu.act`).
        """
        xp = self.xp
        q = self.q_values(obs)
        if xp is not np and isinstance(rng, CounterRng) and q.strides[1] == q.itemsize:
            from fxstore.train.gpu.act import epsilon_greedy

            chosen: I64 = epsilon_greedy(q, epsilon, *rng.next_bases(2))
            return chosen
        greedy = q.argmax(axis=1)
        n = greedy.shape[0]
        explore = xp.less(rng.random(n), epsilon)
        random = rng.integers(0, self.n_actions, n)
        out: I64 = xp.where(explore, random, greedy).astype(xp.int64)
        return out

    def update(self, batch: Batch) -> tuple[UpdateStats, F32]:
        """One Adam step on `batch`; returns the stats and the new priorities (B,) float32.

        The priorities are the per-sample cross-entropies before weighting. This waits for
        the device (it reads the loss back); the training loop uses :meth:`update_async`.

        Raises
        ------
        InvalidInputError
            The batch arrays have the wrong shapes.
        TrainingDivergedError
            The loss or the gradient is not finite; the message names the step and the
            tensor (checked before the weights change, so they stay as they were).
        """
        priority = self.update_async(batch)
        loss, grad_norm = self.check_finite(batch)
        return UpdateStats(loss=loss, grad_norm=grad_norm, step=self.step), priority

    def update_async(self, batch: Batch) -> F32:
        """One Adam step on `batch` without waiting for the device; returns the priorities.

        On numpy a non-finite loss or gradient raises here, as in :meth:`update`. On CuPy
        the device skips that update and every later one (the weights stay as they were
        before it) and the next :meth:`check_finite` raises. On CuPy the returned (B,) array
        is the agent's own buffer, overwritten by the next update.
        """
        batch = self._check_batch(batch)
        ws = self._workspace_for(batch.action.shape[0])
        ws.load(batch)
        if self.xp is np:
            self._device_forward_backward(ws)
            loss, grad_norm = loss_and_grad_norm(self._scalars, ws.size)
            if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                raise self._diverged(batch, loss, grad_norm)
            self._apply_step(ws)
            self.step += 1
            return ws.ce.copy()
        if self._compiled is None:
            self._compiled = self._ops.compile(
                functools.partial(self._device_update, ws), (*self._buffers(), self._progress)
            )
        self._compiled()
        self.step += 1
        return ws.ce

    def capture_with(
        self,
        batch: Batch,
        before: Callable[[], None],
        after: Callable[[F32], None],
        state: Sequence[Any],
    ) -> Callable[[], None] | None:
        """One CUDA graph of `before()`, this agent's update on `batch` (its own input
        buffers, as :meth:`input_buffers` gives them) and `after(priorities)`; each call of
        the returned replay is one update (:attr:`step` advances). `state`: the buffers
        that `before` and `after` change and that outlive them (put back after the first,
        eager run, as for the update's own graph). None where graphs are off (numpy, or
        ``cuda_graph = false``): run the parts one by one.

        ``fxstore.train.agent.learner.LearnerStep`` captures the replay's sampling and priority
        write-back with the update this way, so a learner step is one launch."""
        if self.xp is np or not self.config.cuda_graph:
            return None
        ws = self._workspace_for(batch.action.shape[0])
        if batch is not ws.batch:
            raise ValueError("capture_with needs the agent's own input buffers (input_buffers)")

        def body() -> None:
            before()
            self._device_update(ws)
            after(ws.ce)

        graph = self._ops.compile(body, (*self._buffers(), self._progress, *state))

        def replay() -> None:
            graph()
            self.step += 1

        return replay

    def check_finite(self, batch: Batch | None = None) -> tuple[float, float]:
        """Raise if an update since the last check had a non-finite loss or gradient.

        Returns the last update's (loss, gradient norm). On CuPy this waits for the device.
        `batch`, when it is the last update's, is searched for the non-finite input.

        Raises
        ------
        TrainingDivergedError
            Naming the update, and the first non-finite weight, input or gradient.
        """
        _done, diverged_at, _total, _count, loss, grad_norm = (
            float(x) for x in to_host(self._progress)
        )
        if diverged_at:
            step, self.step = self.step, int(diverged_at) - 1
            raise self._diverged(batch if diverged_at == step else None, loss, grad_norm)
        return loss, grad_norm

    def loss_totals(self) -> tuple[float, int]:
        """(sum, count) of the losses of the updates done since :meth:`set_loss_totals`."""
        total, count = (float(x) for x in to_host(self._progress[2:4]))
        return total, int(count)

    def set_loss_totals(self, total: float, count: int) -> None:
        """Start the running loss sum and count from (`total`, `count`) (a resumed fold's)."""
        self._progress[2:4] = self.xp.asarray([total, count], dtype=self.xp.float64)

    def input_buffers(self, size: int) -> Batch:
        """The buffers an update of batch size `size` reads its batch from: sample into them
        (``PrioritizedReplay.sample(..., out=)``) and pass the result to :meth:`update_async`,
        and the batch is never copied. Overwritten by the next sample."""
        return self._workspace_for(size).batch

    def priority_buffer(self, size: int) -> F32:
        """The (size,) buffer where an update of batch size `size` leaves its new priorities
        (what :meth:`update_async` returns on CuPy)."""
        return self._workspace_for(size).ce

    def _workspace_for(self, size: int) -> Workspace:
        ws = self._workspace
        if ws is None or ws.size != size:
            lay = self._layout
            shape = (lay.n_obs, lay.n_in, lay.hidden, lay.layers, lay.head_ld)
            ws = self._workspace = Workspace(self.xp, self._params.dtype, size, shape)
            ws.masks = [self._ops.relu_mask(2 * size, lay.hidden) for _ in range(lay.layers)]
            self._compiled = None
        return ws

    def _check_batch(self, batch: Batch) -> Batch:
        xp, dtype = self.xp, self._params.dtype
        size = int(batch.action.shape[0])
        shapes = [(size, self.n_obs), (size,), (size,), (size,), (size, self.n_obs), (size,)]
        for name, shape in zip(Batch._fields, shapes, strict=False):  # index is not read
            got = tuple(getattr(batch, name).shape)
            if got != shape or size == 0:
                raise InvalidInputError(
                    f"batch `{name}` must have shape {shape} with B >= 1, was {got}."
                )

        def cast(x: Array, kind: type[np.generic]) -> npt.NDArray[Any]:
            out: npt.NDArray[Any] = x
            if not (isinstance(x, xp.ndarray) and x.dtype == kind):
                out = xp.asarray(x, dtype=kind)
            # else the same object: a batch sampled into the input buffers stays put
            return out

        return Batch(
            obs=cast(batch.obs, dtype.type),
            action=cast(batch.action, np.int64),
            reward=cast(batch.reward, dtype.type),
            discount=cast(batch.discount, dtype.type),
            next_obs=cast(batch.next_obs, dtype.type),
            weight=cast(batch.weight, dtype.type),
            index=batch.index,
        )

    def _loss_and_grad(self, batch: Batch) -> tuple[float, float, F32]:
        """Fill the gradient buffer; return (sum of w·ce, |grad|², ce (B,))."""
        ws = self._workspace_for(batch.action.shape[0])
        ws.load(batch)
        loss_sum, grad_sq = self._forward_backward(ws)
        return loss_sum, grad_sq, ws.ce

    def _forward_backward(self, ws: Workspace) -> tuple[float, float]:
        """Gradient into the gradient buffer, ce into `ws`; returns (sum w·ce, |grad|²)."""
        self._device_forward_backward(ws)
        loss_sum, grad_sq = (float(v) for v in to_host(self._scalars))  # the one sync
        return loss_sum, grad_sq

    def _device_forward_backward(self, ws: Workspace) -> None:
        """As :meth:`_forward_backward`, leaving (sum w·ce, |grad|²) in ``_scalars``."""
        ops, size, w = self._ops, ws.size, self._layout.head_width
        # padded rows: obs2's padded columns are zero, and so are d_head's (c51 writes only
        # the first `w`), so the padding's gradients are zero and it stays zero
        acts = self._torso(self._net, ws.obs2, ws.acts, ws.masks)
        target = self._torso(self._target_net, ws.obs2[size:], ws.target_acts)[-1]
        ops.matmul(acts[-1], self._net["head.weight"], ws.head)
        ops.matmul(target, self._target_net["head.weight"], ws.head_target)
        inputs = C51Inputs(
            head=ws.head[:, :w],
            head_target=ws.head_target[:, :w],
            bias=self._net["head.bias"][:w],
            bias_target=self._target_net["head.bias"][:w],
            batch=ws.batch,
            support=self._support,
            n_actions=self.n_actions,
        )
        ops.c51(inputs, ws.d_head[:, :w], ws.ce, ws.weighted_ce)
        self._backward([a[:size] for a in acts], ws)
        ops.total(ws.weighted_ce, self._scalars[0:1].reshape(()))
        ops.sum_squares(self._grad, self._scalars[1:2].reshape(()))

    def _device_update(self, ws: Workspace) -> None:
        """The whole update on CuPy, with no host sync: what one CUDA graph replays."""
        self._device_forward_backward(ws)
        self._apply_step(ws)

    def _apply_step(self, ws: Workspace) -> None:
        """Clip, Adam and the target update from the gradient buffer; the step's bookkeeping
        in ``_progress`` (skipped, and marked, when the loss or gradient is not finite)."""
        c = self.config
        self._ops.step_scalars(
            self._scalars, self._progress, self._step_out, batch=ws.size, config=c
        )
        self._ops.adam(self._adam_inputs())

    def _backward(self, acts: list[F32], ws: Workspace) -> None:
        """Write the gradient of every tensor, from d loss / d head output (B, W)."""
        ops, net, grad = self._ops, self._net, self._grad_net
        ops.grad_matmul(acts[-1].T, ws.d_head, grad["head.weight"])
        ops.col_sum(ws.d_head, grad["head.bias"])
        last = self._layout.layers - 1
        if last < 0:
            return
        # each layer's ReLU and bias gradients come with the GEMM that makes its gradient
        d_h = ws.d_hidden[0]
        ops.dense_relu_grad(
            ws.d_head, net["head.weight"].T, acts[last + 1], ws.masks[last], d_h,
            grad[f"torso.{last}.bias"],
        )  # fmt: skip
        for i in reversed(range(last + 1)):
            ops.grad_matmul(acts[i].T, d_h, grad[f"torso.{i}.weight"])
            if i:
                out = ws.d_hidden[1] if d_h is ws.d_hidden[0] else ws.d_hidden[0]
                ops.dense_relu_grad(
                    d_h, net[f"torso.{i}.weight"].T, acts[i], ws.masks[i - 1], out,
                    grad[f"torso.{i - 1}.bias"],
                )  # fmt: skip
                d_h = out

    def _adam_inputs(self) -> AdamInputs:
        """Adam with bias correction, clipping and the target update, by ``_step_out``."""
        c, f = self.config, np.float32
        return AdamInputs(
            params=self._params,
            grad=self._grad,
            m=self._m,
            v=self._v,
            target=self._target,
            step=self._step_out,
            beta1=f(c.adam_beta1),
            one_minus_beta1=f(1.0 - c.adam_beta1),
            beta2=f(c.adam_beta2),
            one_minus_beta2=f(1.0 - c.adam_beta2),
            lr=f(c.lr),
            eps=f(c.adam_eps),
            keep=f(1.0 - c.lr * c.weight_decay),
        )

    def _diverged(
        self, batch: Batch | None, loss: float, grad_norm: float
    ) -> TrainingDivergedError:
        """The error naming the first non-finite tensor (weights, then inputs, then gradients).

        `batch` is None when the update that diverged is not the last one (CuPy, found late):
        then its inputs and gradient are gone and only the weights are searched."""
        step = self.step + 1
        groups = [("weight", self._params), ("target weight", self._target)]
        if batch is not None:
            groups.append(("gradient of", self._grad))
        for what, flat in groups:
            host = np.asarray(to_host(flat), dtype=np.float64)
            for name, view in self._layout.views(host).items():
                bad = view[~np.isfinite(view)]
                if bad.size and not name.startswith("head."):  # named as value.* / adv.*
                    return TrainingDivergedError(
                        f"step {step}: {what} {name} is not finite ({bad.flat[0]}); {_HINT}."
                    )
            if what == "target weight" and batch is not None:
                for name in ("obs", "reward", "discount", "next_obs", "weight"):
                    values = to_host(getattr(batch, name))
                    if not np.isfinite(values).all():
                        return TrainingDivergedError(
                            f"step {step}: batch `{name}` is not finite; check the inputs."
                        )
        what, value = ("loss", loss) if not math.isfinite(loss) else ("gradient norm", grad_norm)
        return TrainingDivergedError(f"step {step}: {what} is not finite ({value}); {_HINT}.")

    def state_dict(self) -> dict[str, npt.NDArray[np.generic]]:
        """Everything an exact resume needs, as host numpy arrays (no pickle).

        'params', 'target_params', 'adam_m', 'adam_v': (P,) float32 flat buffers (the
        stored, padded layout; :meth:`load_state_dict` also takes older checkpoints'
        unpadded one);
        'step': () int64 updates done; 'shape': (5,) int64 n_obs, n_actions, hidden,
        layers, n_atoms.
        """
        buffers = zip(_STATE_KEYS, self._buffers(), strict=True)
        state: dict[str, npt.NDArray[np.generic]] = {
            key: to_host(buf, copy=True) for key, buf in buffers
        }
        state["step"] = np.array(self.step, dtype=np.int64)
        state["shape"] = self._shape()
        return state

    def load_state_dict(self, state: Mapping[str, npt.NDArray[np.generic]]) -> None:
        """Restore what :meth:`state_dict` returned (for an agent of the same shape).

        Raises
        ------
        InvalidInputError
            A key is missing, has the wrong shape, or 'shape' describes another network.
        """
        state = self._unpadded_to_stored(state)
        shapes = {key: (self._layout.size,) for key in _STATE_KEYS} | {"step": (), "shape": (5,)}
        check_state("agent state", state, shapes)
        if not np.array_equal(state["shape"], self._shape()):
            raise InvalidInputError(
                f"agent state 'shape' (n_obs, n_actions, hidden, layers, n_atoms) is "
                f"{list(np.asarray(state['shape']))}, this agent is {list(self._shape())}."
            )
        for key, buf in zip(_STATE_KEYS, self._buffers(), strict=True):
            buf[...] = self.xp.asarray(state[key], dtype=buf.dtype)
        self.step = int(np.asarray(state["step"]))
        self._progress[0:2] = self.xp.asarray([self.step, 0], dtype=self.xp.float64)

    def _unpadded_to_stored(
        self, state: Mapping[str, npt.NDArray[np.generic]]
    ) -> Mapping[str, npt.NDArray[np.generic]]:
        """`state` with flat buffers of the unpadded layout (checkpoints written before
        the weights were stored padded) moved into the stored one; else `state` itself."""
        lay = self._layout
        plain = replace(lay, align=1)
        if plain.size == lay.size or any(
            key not in state or np.shape(state[key]) != (plain.size,) for key in _STATE_KEYS
        ):
            return state
        out = dict(state)
        for key in _STATE_KEYS:
            old = np.asarray(state[key])
            new = np.zeros(lay.size, dtype=old.dtype)
            into, source = lay.views(new), plain.views(old)
            for name, _shape in plain.tensors:
                into[name][...] = source[name]
            out[key] = new
        return out

    def _buffers(self) -> tuple[F32, F32, F32, F32]:
        return self._params, self._target, self._m, self._v

    def _shape(self) -> npt.NDArray[np.int64]:
        lay = self._layout
        return np.array([lay.n_obs, lay.n_actions, lay.hidden, lay.layers, lay.n_atoms], np.int64)
