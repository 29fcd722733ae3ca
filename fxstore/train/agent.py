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
(:mod:`fxstore.train._gpu_kernels`, imported only then) between cuBLAS GEMMs; every reduction
has a fixed order (no atomics), so a seed gives the same losses on a device.

Loss (double DQN, n-step): a* = argmax_a Q_online(s', a); the target distribution is the
TARGET net's p(s', a*) moved to r + discount · z and projected back onto the support; the loss
is the cross-entropy to the online p(s, a), weighted by the importance weights, averaged over
the batch. Its per-sample value (unweighted) is the new replay priority.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from fxstore.config import AgentConfig
from fxstore.errors import InvalidInputError, TrainingDivergedError
from fxstore.train.checkpoint import check_state
from fxstore.train.metrics import array_module, to_host
from fxstore.train.replay import F32, I64, Array, Batch

__all__ = ["Agent", "Batch", "RandomGenerator", "UpdateStats", "make_rng", "project_distribution"]

logger = logging.getLogger(__name__)

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


def project_distribution(probs: F32, reward: F32, discount: F32, support: F32) -> F32:
    """Project the distribution `probs` moved to ``reward + discount · z`` onto `support`.

    Tz_j = clip(r + d·z_j, v_min, v_max) lands at fractional atom b_j = (Tz_j − v_min) / Δz;
    its mass goes to the atoms either side of it in proportion to closeness. The weights
    ``clip(1 − |b_j − i|, 0, 1)`` do that in one dense (B, N, N) product, without a
    scatter-add: an integer b_j (l == u in Bellemare's loop) puts all its mass on atom b_j, so
    no mass is lost and each row keeps its sum.

    Parameters
    ----------
    probs
        (B, N) distributions over the atoms.
    reward, discount
        (B,) n-step reward and discount (0 at a terminal).
    support
        (N,) atoms, evenly spaced and increasing.

    Returns
    -------
    F32
        (B, N) projected distributions, same dtype as `probs`.
    """
    n = support.shape[0]
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (n - 1)
    moved = reward[:, None] + discount[:, None] * support[None, :]
    b = (moved.clip(v_min, v_max) - v_min) / delta
    b = b.clip(0, n - 1)  # rounding can put b a hair above n - 1: keep that mass
    atoms = array_module(b).arange(n, dtype=b.dtype)
    weight = (1 - abs(b[:, :, None] - atoms[None, None, :])).clip(0, 1)  # (B, j, i)
    out: F32 = (probs[:, None, :] @ weight)[:, 0, :]
    return out


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each tensor of the network lies in the flat buffer: name -> (offset, shape)."""

    n_obs: int
    n_actions: int
    hidden: int
    layers: int
    n_atoms: int

    @property
    def head_width(self) -> int:
        return self.n_atoms * (1 + self.n_actions)

    @property
    def tensors(self) -> list[tuple[str, tuple[int, ...]]]:
        shapes: list[tuple[str, tuple[int, ...]]] = []
        width = self.n_obs
        for i in range(self.layers):
            shapes += [
                (f"torso.{i}.weight", (width, self.hidden)),
                (f"torso.{i}.bias", (self.hidden,)),
            ]
            width = self.hidden
        return [
            *shapes,
            ("head.weight", (width, self.head_width)),
            ("head.bias", (self.head_width,)),
        ]

    @property
    def size(self) -> int:
        return sum(math.prod(shape) for _, shape in self.tensors)

    def views(self, flat: npt.NDArray[_Float]) -> dict[str, npt.NDArray[_Float]]:
        """Views of `flat` per tensor; 'head.*' also as 'value.*' and 'adv.*' column slices."""
        out: dict[str, npt.NDArray[_Float]] = {}
        offset = 0
        for name, shape in self.tensors:
            out[name] = flat[offset : offset + math.prod(shape)].reshape(shape)
            offset += math.prod(shape)
        n = self.n_atoms
        out["value.weight"], out["adv.weight"] = (
            out["head.weight"][:, :n],
            out["head.weight"][:, n:],
        )
        out["value.bias"], out["adv.bias"] = out["head.bias"][:n], out["head.bias"][n:]
        return out


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


class _Ops(Protocol):
    """The fused steps of one update; numpy reference here, CuPy in _gpu_kernels."""

    def matmul_precision(self) -> AbstractContextManager[None]: ...

    def bias_relu(self, z: F32, bias: F32) -> None: ...
    def relu_grad(self, h: F32, grad: F32) -> None: ...
    def col_sum(self, x: F32, out: F32) -> None: ...
    def sum_squares(self, x: F32, out: F32) -> None: ...
    def total(self, x: F32, out: F32) -> None: ...
    def q_values(self, head: F32, bias: F32, support: F32) -> F32: ...
    def c51(self, h: _C51Inputs) -> tuple[F32, F32, F32]: ...
    def adam(self, s: _AdamInputs) -> None: ...


@dataclass(frozen=True, slots=True)
class _C51Inputs:
    head: F32  # (2B, W) online head GEMM (no bias): rows [0, B) at s, [B, 2B) at s'
    head_target: F32  # (B, W) target head GEMM (no bias) at s'
    bias: F32  # (W,)
    bias_target: F32  # (W,)
    batch: Batch
    support: F32  # (N,)
    n_actions: int


@dataclass(frozen=True, slots=True)
class _AdamInputs:
    params: F32
    grad: F32
    m: F32
    v: F32
    target: F32
    scale: np.float32  # gradient clipping factor, <= 1
    beta1: np.float32
    one_minus_beta1: np.float32
    beta2: np.float32
    one_minus_beta2: np.float32
    correction1: np.float32  # 1 - beta1**t
    correction2: np.float32  # 1 - beta2**t
    lr: np.float32
    eps: np.float32
    tau: np.float32  # 0 between periodic target updates
    keep: np.float32  # 1 - lr * weight_decay: decoupled decay (exactly 1 without it)


def _dueling_log_probs(head: F32, n_actions: int) -> F32:
    """(rows, W) head output with bias -> (rows, n_actions, N) log-probabilities."""
    rows, width = head.shape
    n = width // (1 + n_actions)
    value, adv = head[:, None, :n], head[:, n:].reshape(rows, n_actions, n)
    logits = value + adv - adv.mean(axis=1, keepdims=True)
    shifted = logits - logits.max(axis=2, keepdims=True)
    out: F32 = shifted - np.log(np.exp(shifted).sum(axis=2, keepdims=True))
    return out


class _NumpyOps:
    """The reference implementation of every fused step (float32 unless given float64)."""

    def matmul_precision(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def bias_relu(self, z: F32, bias: F32) -> None:
        np.maximum(z + bias, 0, out=z)

    def relu_grad(self, h: F32, grad: F32) -> None:
        grad[h <= 0] = 0

    def col_sum(self, x: F32, out: F32) -> None:
        out[...] = x.sum(axis=0, dtype=np.float64)

    def sum_squares(self, x: F32, out: F32) -> None:
        x64 = x.astype(np.float64)
        out[...] = x64 @ x64

    def total(self, x: F32, out: F32) -> None:
        out[...] = x.sum(dtype=np.float64)

    def q_values(self, head: F32, bias: F32, support: F32) -> F32:
        n_actions = head.shape[1] // support.shape[0] - 1
        out: F32 = np.exp(_dueling_log_probs(head + bias, n_actions)) @ support
        return out

    def c51(self, h: _C51Inputs) -> tuple[F32, F32, F32]:
        """Projection, cross-entropy and its gradient w.r.t. the head output: (d_head, ce, w·ce)."""
        batch, n_actions, support = h.batch, h.n_actions, h.support
        rows = np.arange(batch.action.shape[0])
        n = support.shape[0]
        log_p = _dueling_log_probs(h.head + h.bias, n_actions)
        b = rows.shape[0]
        best = (np.exp(log_p[b:]) @ support).argmax(axis=1)  # double DQN: online argmax
        log_pt = _dueling_log_probs(h.head_target + h.bias_target, n_actions)
        target = project_distribution(
            np.exp(log_pt[rows, best]), batch.reward, batch.discount, support
        )
        log_pa = log_p[rows, batch.action]
        ce = -(target * log_pa).sum(axis=1)
        # d(-sum m log softmax(l)) / dl = p · sum(m) - m, scaled by w / B for the weighted mean
        g = (batch.weight / b)[:, None] * (np.exp(log_pa) * target.sum(axis=1)[:, None] - target)
        d_adv = np.broadcast_to((-g / n_actions)[:, None, :], (b, n_actions, n)).copy()
        d_adv[rows, batch.action] += g
        d_head = np.concatenate([g, d_adv.reshape(b, n_actions * n)], axis=1)
        return d_head, ce, batch.weight * ce

    def adam(self, s: _AdamInputs) -> None:
        g, m, v, params, target = s.grad * s.scale, s.m, s.v, s.params, s.target
        m *= s.beta1
        m += s.one_minus_beta1 * g
        v *= s.beta2
        v += s.one_minus_beta2 * (g * g)
        params *= s.keep
        params -= s.lr * (m / s.correction1) / (np.sqrt(v / s.correction2) + s.eps)
        target += s.tau * (params - target)


def _ops_for(xp: ModuleType, tf32: bool) -> _Ops:
    if xp is np:
        return _NumpyOps()
    from fxstore.train._gpu_kernels import CupyOps

    return CupyOps(tf32=tf32)


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
        self._ops = _ops_for(xp, config.tf32)
        support = np.linspace(config.v_min, config.v_max, config.n_atoms).astype(np.float32)
        self._set_buffers(xp.asarray(_init_params(self._layout, config.seed)), support)

    def _set_buffers(self, params: F32, support: npt.NDArray[np.floating]) -> None:
        """Take `params` as the online weights; target = a copy, fresh Adam state."""
        xp = self.xp
        self._params, self._target = params, params.copy()
        self._m, self._v, self._grad = (xp.zeros_like(params) for _ in range(3))
        self._support = xp.asarray(support, dtype=params.dtype)
        self._scalars = xp.zeros(2, dtype=xp.float64)  # loss sum, squared gradient norm
        self._net = self._layout.views(self._params)
        self._target_net = self._layout.views(self._target)
        self._grad_net = self._layout.views(self._grad)

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
        return dict(self._net)

    def _torso(self, net: Mapping[str, F32], x: F32) -> list[F32]:
        """Activations [x, h_1, ..., h_layers] of the torso."""
        acts = [x]
        for i in range(self._layout.layers):
            z = acts[-1] @ net[f"torso.{i}.weight"]
            self._ops.bias_relu(z, net[f"torso.{i}.bias"])
            acts.append(z)
        return acts

    def q_values(self, obs: F32) -> F32:
        """Expected Q (n, n_actions) float32 of the online net for obs (n, n_obs)."""
        obs = self.xp.asarray(obs, dtype=self._params.dtype)
        with self._ops.matmul_precision():
            head = self._torso(self._net, obs)[-1] @ self._net["head.weight"]
        return self._ops.q_values(head, self._net["head.bias"], self._support)

    def act(self, obs: F32, epsilon: float, rng: RandomGenerator) -> I64:
        """ε-greedy actions (n,) int64: greedy over :meth:`q_values`, uniform with prob ε.

        `rng` is :func:`make_rng` of the agent's array module; each call draws ``n``
        uniforms, then ``n`` integers, so a seed gives the same actions.
        """
        xp = self.xp
        greedy = self.q_values(obs).argmax(axis=1)
        n = greedy.shape[0]
        explore = xp.less(rng.random(n), epsilon)
        random = rng.integers(0, self.n_actions, n)
        out: I64 = xp.where(explore, random, greedy).astype(xp.int64)
        return out

    def update(self, batch: Batch) -> tuple[UpdateStats, F32]:
        """One Adam step on `batch`; returns the stats and the new priorities (B,) float32.

        The priorities are the per-sample cross-entropies before weighting.

        Raises
        ------
        InvalidInputError
            The batch arrays have the wrong shapes.
        TrainingDivergedError
            The loss or the gradient is not finite; the message names the step and the
            tensor (checked before the weights change, so they stay as they were).
        """
        batch = self._check_batch(batch)
        size = batch.action.shape[0]
        with self._ops.matmul_precision():
            loss_sum, grad_sq, ce = self._loss_and_grad(batch)
        loss, grad_norm = loss_sum / size, math.sqrt(grad_sq) if grad_sq >= 0 else math.nan
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            raise self._diverged(batch, loss, grad_norm)
        self._apply_adam(grad_norm)
        self.step += 1
        return UpdateStats(loss=loss, grad_norm=grad_norm, step=self.step), ce

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
            out: npt.NDArray[Any] = xp.ascontiguousarray(xp.asarray(x, dtype=kind))
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
        xp, ops, size = self.xp, self._ops, batch.action.shape[0]
        acts = self._torso(self._net, xp.concatenate([batch.obs, batch.next_obs]))
        target_head = self._torso(self._target_net, batch.next_obs)[-1]
        inputs = _C51Inputs(
            head=acts[-1] @ self._net["head.weight"],
            head_target=target_head @ self._target_net["head.weight"],
            bias=self._net["head.bias"],
            bias_target=self._target_net["head.bias"],
            batch=batch,
            support=self._support,
            n_actions=self.n_actions,
        )
        d_head, ce, weighted = ops.c51(inputs)
        self._backward([a[:size] for a in acts], d_head)
        ops.total(weighted, self._scalars[0:1].reshape(()))
        ops.sum_squares(self._grad, self._scalars[1:2].reshape(()))
        loss_sum, grad_sq = (float(v) for v in to_host(self._scalars))  # the one sync
        return loss_sum, grad_sq, ce

    def _backward(self, acts: list[F32], d_head: F32) -> None:
        """Write the gradient of every tensor, from d loss / d head output (B, W)."""
        xp, ops, net, grad = self.xp, self._ops, self._net, self._grad_net
        xp.matmul(acts[-1].T, d_head, out=grad["head.weight"])
        ops.col_sum(d_head, grad["head.bias"])
        if not self._layout.layers:
            return
        d_h = d_head @ net["head.weight"].T
        for i in reversed(range(self._layout.layers)):
            ops.relu_grad(acts[i + 1], d_h)
            xp.matmul(acts[i].T, d_h, out=grad[f"torso.{i}.weight"])
            ops.col_sum(d_h, grad[f"torso.{i}.bias"])
            if i:
                d_h = d_h @ net[f"torso.{i}.weight"].T

    def _apply_adam(self, grad_norm: float) -> None:
        """Clip, Adam with bias correction, then the Polyak or periodic target update."""
        c, t, f = self.config, self.step + 1, np.float32
        period = c.target_period
        tau = c.target_tau if period == 0 or t % period == 0 else 0.0
        self._ops.adam(
            _AdamInputs(
                params=self._params,
                grad=self._grad,
                m=self._m,
                v=self._v,
                target=self._target,
                scale=f(min(1.0, c.grad_clip / (grad_norm + 1e-6))),
                beta1=f(c.adam_beta1),
                one_minus_beta1=f(1.0 - c.adam_beta1),
                beta2=f(c.adam_beta2),
                one_minus_beta2=f(1.0 - c.adam_beta2),
                correction1=f(1.0 - c.adam_beta1**t),
                correction2=f(1.0 - c.adam_beta2**t),
                lr=f(c.lr),
                eps=f(c.adam_eps),
                tau=f(tau),
                keep=f(1.0 - c.lr * c.weight_decay),
            )
        )

    def _diverged(self, batch: Batch, loss: float, grad_norm: float) -> TrainingDivergedError:
        """The error naming the first non-finite tensor (weights, then inputs, then gradients)."""
        step = self.step + 1
        groups = [("weight", self._params), ("target weight", self._target)]
        for what, flat in [*groups, ("gradient of", self._grad)]:
            host = np.asarray(to_host(flat), dtype=np.float64)
            for name, view in self._layout.views(host).items():
                bad = view[~np.isfinite(view)]
                if bad.size and not name.startswith("head."):  # named as value.* / adv.*
                    return TrainingDivergedError(
                        f"step {step}: {what} {name} is not finite ({bad.flat[0]}); {_HINT}."
                    )
            if what == "target weight":
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

        'params', 'target_params', 'adam_m', 'adam_v': (P,) float32 flat buffers;
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

    def _buffers(self) -> tuple[F32, F32, F32, F32]:
        return self._params, self._target, self._m, self._v

    def _shape(self) -> npt.NDArray[np.int64]:
        lay = self._layout
        return np.array([lay.n_obs, lay.n_actions, lay.hidden, lay.layers, lay.n_atoms], np.int64)
