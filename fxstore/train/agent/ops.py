"""The steps of one agent update, their numpy reference, and the buffers they work in.

:class:`fxstore.train.agent.dqn.Agent` writes its update once, against the :class:`Ops` protocol:
:class:`NumpyOps` here is the reference (and the CPU path), ``CupyOps`` in
:mod:`fxstore.train.gpu.update_kernels` the GPU twin. Every array an update reads or writes besides
the weights lives in a :class:`Workspace` made once per batch size, so on a GPU the whole
update can be captured as one CUDA graph and replayed (nothing is allocated inside it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from fxstore.config import AgentConfig
from fxstore.train.agent.replay import F32, Batch
from fxstore.train.gpu.xp import array_module

#: Per-update scalars, computed on the host (numpy) or the device (CuPy):
#: gradient clip factor, Adam's bias corrections 1 - beta**t, the target update's tau, and
#: 1.0 where the update applies (0.0 once a loss or gradient was not finite).
STEP_SCALARS = ("scale", "correction1", "correction2", "tau", "apply")


def loss_and_grad_norm(sums: npt.NDArray[np.float64], batch: int) -> tuple[float, float]:
    """(mean loss, gradient L2 norm) from the update's (sum of w·ce, |grad|²) on the host."""
    loss, grad_sq = float(sums[0]) / batch, float(sums[1])
    return loss, math.sqrt(grad_sq) if grad_sq >= 0 else math.nan


def host_step_scalars(config: AgentConfig, t: int, grad_norm: float) -> npt.NDArray[np.float32]:
    """STEP_SCALARS of update number `t` (apply = 1): the reference of the device's ``fx_step``."""
    period = config.target_period
    tau = config.target_tau if period == 0 or t % period == 0 else 0.0
    scale = min(1.0, config.grad_clip / (grad_norm + 1e-6))
    correction1, correction2 = 1.0 - config.adam_beta1**t, 1.0 - config.adam_beta2**t
    return np.array([scale, correction1, correction2, tau, 1.0], dtype=np.float32)


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


def dueling_log_probs(head: F32, n_actions: int) -> F32:
    """(rows, W) head output with bias -> (rows, n_actions, N) log-probabilities."""
    rows, width = head.shape
    n = width // (1 + n_actions)
    value, adv = head[:, None, :n], head[:, n:].reshape(rows, n_actions, n)
    logits = value + adv - adv.mean(axis=1, keepdims=True)
    shifted = logits - logits.max(axis=2, keepdims=True)
    out: F32 = shifted - np.log(np.exp(shifted).sum(axis=2, keepdims=True))
    return out


class Workspace:
    """Every array one update of batch size `size` reads or writes besides the weights.

    Parameters
    ----------
    xp
        numpy or CuPy.
    dtype
        The weights' dtype (float32; float64 in gradient checks).
    size
        Batch size B.
    shape
        The network's (n_obs, n_in, hidden, layers, head_ld): observation width and its
        stored (padded) width, hidden width, hidden layers and the head's stored width.
        Padded columns are zero and stay zero (nothing writes them).
    """

    def __init__(
        self,
        xp: ModuleType,
        dtype: np.dtype[Any],
        size: int,
        shape: tuple[int, int, int, int, int],
    ) -> None:
        n_obs, n_in, hidden, layers, head_width = shape
        b = self.size = size
        self.obs2: F32 = xp.zeros((2 * b, n_in), dtype)
        """(2B, n_in): the batch's obs, then its next_obs (one torso pass of the online net);
        the columns past n_obs are zero."""
        self.action = xp.zeros(b, np.int64)
        self.reward, self.discount, self.weight = (xp.zeros(b, dtype) for _ in range(3))
        self.acts: list[F32] = [xp.zeros((2 * b, hidden), dtype) for _ in range(layers)]
        self.target_acts: list[F32] = [xp.zeros((b, hidden), dtype) for _ in range(layers)]
        self.head: F32 = xp.zeros((2 * b, head_width), dtype)
        self.head_target: F32 = xp.zeros((b, head_width), dtype)
        self.d_head: F32 = xp.zeros((b, head_width), dtype)
        self.d_hidden: list[F32] = [xp.zeros((b, hidden), dtype) for _ in range(2 * (layers > 0))]
        self.ce: F32 = xp.zeros(b, dtype)
        """(B,) per-sample cross-entropy: the new priorities."""
        self.weighted_ce: F32 = xp.zeros(b, dtype)
        self.masks: list[Any] = []
        """Per hidden layer, what the ops' forward keeps for the backward pass (set by the
        agent: ``Ops.relu_mask``)."""
        self.index = xp.zeros(b, np.int64)
        """(B,) replay slots of the batch when a sampler wrote it here (not read by the update)."""
        self.batch = Batch(
            obs=self.obs2[:b, :n_obs],
            action=self.action,
            reward=self.reward,
            discount=self.discount,
            next_obs=self.obs2[b:, :n_obs],
            weight=self.weight,
            index=self.index,
        )
        """The input buffers as a batch: a replay may sample straight into them (obs and
        next_obs are row views of `obs2`: rows of n_obs adjacent floats, row stride n_in)."""

    def load(self, batch: Batch) -> None:
        """Copy `batch` (already of the right dtypes and shapes) into the input buffers;
        a field that is already the buffer (sampled into :attr:`batch`) is left alone."""
        for name in ("obs", "next_obs", "action", "reward", "discount", "weight"):
            source, target = getattr(batch, name), getattr(self.batch, name)
            if source is not target:
                target[...] = source


@dataclass(frozen=True, slots=True)
class C51Inputs:
    head: F32  # (2B, W) online head GEMM (no bias): rows [0, B) at s, [B, 2B) at s'
    head_target: F32  # (B, W) target head GEMM (no bias) at s'
    bias: F32  # (W,)
    bias_target: F32  # (W,)
    batch: Batch
    support: F32  # (N,)
    n_actions: int


@dataclass(frozen=True, slots=True)
class AdamInputs:
    params: F32
    grad: F32
    m: F32
    v: F32
    target: F32
    step: F32  # (5,) STEP_SCALARS, float32, on the weights' device
    beta1: np.float32
    one_minus_beta1: np.float32
    beta2: np.float32
    one_minus_beta2: np.float32
    lr: np.float32
    eps: np.float32
    keep: np.float32  # 1 - lr * weight_decay: decoupled decay (exactly 1 without it)


class Ops(Protocol):
    """The fused steps of one update; numpy reference here, CuPy in _gpu_kernels."""

    def matmul(self, a: F32, b: F32, out: F32 | None = None) -> F32: ...
    def grad_matmul(self, a: F32, b: F32, out: F32) -> None: ...
    def bias_relu(self, z: F32, bias: F32) -> None: ...
    def relu_grad(self, h: F32, grad: F32) -> None: ...
    def relu_mask(self, rows: int, cols: int) -> Any: ...
    def dense_relu(self, x: F32, w: F32, bias: F32, out: F32, mask: Any) -> None: ...
    def dense_relu_grad(
        self, d: F32, w_t: F32, h: F32, mask: Any, out: F32, bias_grad: F32
    ) -> None: ...
    def col_sum(self, x: F32, out: F32) -> None: ...
    def sum_squares(self, x: F32, out: F32) -> None: ...
    def total(self, x: F32, out: F32) -> None: ...
    def q_values(self, head: F32, bias: F32, support: F32) -> F32: ...
    def c51(self, h: C51Inputs, d_head: F32, ce: F32, weighted_ce: F32) -> None: ...
    def step_scalars(
        self,
        sums: npt.NDArray[np.float64],
        progress: npt.NDArray[np.float64],
        out: F32,
        *,
        batch: int,
        config: AgentConfig,
    ) -> None: ...
    def adam(self, s: AdamInputs) -> None: ...
    def compile(
        self, body: Callable[[], None], state: Sequence[npt.NDArray[Any]]
    ) -> Callable[[], None]: ...


class NumpyOps:
    """The reference implementation of every fused step (float32 unless given float64)."""

    def matmul(self, a: F32, b: F32, out: F32 | None = None) -> F32:
        result: F32 = np.matmul(a, b, out=out)
        return result

    def grad_matmul(self, a: F32, b: F32, out: F32) -> None:
        """``out = a @ b`` for a weight gradient: the inner dimension is the batch, the
        output a layer's weights."""
        self.matmul(a, b, out)

    def bias_relu(self, z: F32, bias: F32) -> None:
        np.maximum(z + bias, 0, out=z)

    def relu_grad(self, h: F32, grad: F32) -> None:
        grad[h <= 0] = 0

    def relu_mask(self, rows: int, cols: int) -> None:
        """What :meth:`dense_relu` keeps for :meth:`dense_relu_grad`: nothing here (the
        gradient reads the activation itself)."""
        return None

    def dense_relu(self, x: F32, w: F32, bias: F32, out: F32, mask: Any) -> None:
        """``out = relu(x @ w + bias)`` (a layer of the torso)."""
        self.matmul(x, w, out)
        self.bias_relu(out, bias)

    def dense_relu_grad(
        self, d: F32, w_t: F32, h: F32, mask: Any, out: F32, bias_grad: F32
    ) -> None:
        """``out = (d @ w_t) * (h > 0)``, the gradient at a torso layer's pre-activation
        from the next layer's (`h` its activation, `mask` what :meth:`dense_relu` kept),
        and `bias_grad` its column sums."""
        self.matmul(d, w_t, out)
        self.relu_grad(h, out)
        self.col_sum(out, bias_grad)

    def col_sum(self, x: F32, out: F32) -> None:
        out[...] = x.sum(axis=0, dtype=np.float64)

    def sum_squares(self, x: F32, out: F32) -> None:
        x64 = x.astype(np.float64)
        out[...] = x64 @ x64

    def total(self, x: F32, out: F32) -> None:
        out[...] = x.sum(dtype=np.float64)

    def q_values(self, head: F32, bias: F32, support: F32) -> F32:
        n_actions = head.shape[1] // support.shape[0] - 1
        out: F32 = np.exp(dueling_log_probs(head + bias, n_actions)) @ support
        return out

    def c51(self, h: C51Inputs, d_head: F32, ce: F32, weighted_ce: F32) -> None:
        """Projection, cross-entropy and its gradient w.r.t. the head output."""
        batch, n_actions, support = h.batch, h.n_actions, h.support
        rows = np.arange(batch.action.shape[0])
        n = support.shape[0]
        log_p = dueling_log_probs(h.head + h.bias, n_actions)
        b = rows.shape[0]
        best = (np.exp(log_p[b:]) @ support).argmax(axis=1)  # double DQN: online argmax
        log_pt = dueling_log_probs(h.head_target + h.bias_target, n_actions)
        target = project_distribution(
            np.exp(log_pt[rows, best]), batch.reward, batch.discount, support
        )
        log_pa = log_p[rows, batch.action]
        ce[...] = -(target * log_pa).sum(axis=1)
        # d(-sum m log softmax(l)) / dl = p · sum(m) - m, scaled by w / B for the weighted mean
        g = (batch.weight / b)[:, None] * (np.exp(log_pa) * target.sum(axis=1)[:, None] - target)
        d_adv = np.broadcast_to((-g / n_actions)[:, None, :], (b, n_actions, n)).copy()
        d_adv[rows, batch.action] += g
        d_head[:, :n] = g
        d_head[:, n:] = d_adv.reshape(b, n_actions * n)
        weighted_ce[...] = batch.weight * ce

    def step_scalars(
        self,
        sums: npt.NDArray[np.float64],
        progress: npt.NDArray[np.float64],
        out: F32,
        *,
        batch: int,
        config: AgentConfig,
    ) -> None:
        """STEP_SCALARS into `out` and the bookkeeping of agent._PROGRESS, as ``fx_step``."""
        loss, grad_norm = loss_and_grad_norm(sums, batch)
        finite, clean = math.isfinite(loss) and math.isfinite(grad_norm), progress[1] == 0
        t = int(progress[0]) + 1
        if clean:
            progress[4:6] = loss, grad_norm
            if not finite:
                progress[1] = t
        ok = clean and finite
        if ok:
            progress[0] = t
            progress[2:4] = progress[2] + loss, progress[3] + 1
        out[...] = host_step_scalars(config, t, grad_norm)
        out[4] = 1.0 if ok else 0.0

    def adam(self, s: AdamInputs) -> None:
        scale, correction1, correction2, tau, _apply = s.step
        g, m, v, params, target = s.grad * scale, s.m, s.v, s.params, s.target
        m *= s.beta1
        m += s.one_minus_beta1 * g
        v *= s.beta2
        v += s.one_minus_beta2 * (g * g)
        params *= s.keep
        params -= s.lr * (m / correction1) / (np.sqrt(v / correction2) + s.eps)
        target += tau * (params - target)

    def compile(
        self, body: Callable[[], None], state: Sequence[npt.NDArray[Any]]
    ) -> Callable[[], None]:
        return body
