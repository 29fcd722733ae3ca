"""Configuration of ``fxstore train``: the C51 agent and the walk-forward training run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Final, Literal, get_args

from fxstore.config._validate import (
    validate_at_least,
    validate_bool,
    validate_choice,
    validate_in_range,
    validate_number,
)
from fxstore.config.backtest import BASELINE_POLICIES
from fxstore.config.env import EnvConfig
from fxstore.config.walkforward import WalkForwardConfig
from fxstore.errors import InvalidInputError
from fxstore.store import validate_key


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The distributional (C51) double DQN of `fxstore train` (:mod:`fxstore.train.agent.dqn`).

    A dueling MLP over `n_atoms` return atoms in [`v_min`, `v_max`], trained from
    prioritised n-step replay with Adam, global-norm clipping and a target network.
    """

    hidden: int = 256
    """Width of each hidden layer."""

    layers: int = 2
    """Hidden layers (Linear + ReLU) in the shared torso; 0: the head reads the observation
    directly (a linear distributional Q, the lowest capacity)."""

    n_atoms: int = 51
    """Atoms of the return distribution (C51: 51); > 1."""

    v_min: float = -10.0
    """Lowest return atom, in reward units."""

    v_max: float = 10.0
    """Highest return atom, in reward units; > `v_min`."""

    gamma: float = 0.99
    """Discount per environment step, in (0, 1]."""

    n_step: int = 3
    """Steps summed into each bootstrapped return (1 is one-step DQN)."""

    lr: float = 1e-4
    """Adam learning rate."""

    adam_beta1: float = 0.9
    """Adam decay of the first moment, in [0, 1)."""

    adam_beta2: float = 0.999
    """Adam decay of the second moment, in [0, 1)."""

    adam_eps: float = 1.5e-4
    """Adam's epsilon added to the root of the second moment (Rainbow: 1.5e-4)."""

    grad_clip: float = 10.0
    """Largest global L2 norm of the gradient; larger gradients are scaled down to it."""

    weight_decay: float = 0.0
    """Decoupled (AdamW) weight decay: each update first shrinks the online weights by the
    factor ``1 - lr * weight_decay`` (biases too), then takes the Adam step. 0: plain Adam."""

    batch_size: int = 1024
    """Transitions per update."""

    replay_size: int = 200_000
    """Capacity of the replay buffer in transitions (oldest overwritten first)."""

    per_alpha: float = 0.6
    """Priority exponent of prioritised replay: 0 samples uniformly. In [0, 1]."""

    per_beta_start: float = 0.4
    """Importance-weight exponent at the start of training, in [0, 1]."""

    per_beta_end: float = 1.0
    """Importance-weight exponent at the end of training, in [0, 1]."""

    per_eps: float = 1e-6
    """Added to every priority so no transition has probability 0; > 0."""

    target_tau: float = 0.005
    """Polyak rate of the target network, in (0, 1]: target += tau · (online − target).
    With `target_period` > 0, 1.0 makes the periodic update a hard copy."""

    target_period: int = 0
    """Updates between target-network updates (hard copies when `target_tau` is 1.0);
    0 applies the Polyak update after every update."""

    eps_start: float = 1.0
    """Exploration rate (ε-greedy) at step 0, in [0, 1]."""

    eps_end: float = 0.05
    """Exploration rate after `eps_decay_steps`, in [0, 1]."""

    eps_decay_steps: int = 10_000
    """Steps over which ε falls linearly from `eps_start` to `eps_end`."""

    seed: int = 0
    """Seed of the weight initialisation (and of replay sampling and exploration)."""

    tf32: bool = False
    """On a GPU, let cuBLAS round float32 matmul inputs to TF32 (tensor cores: faster, about
    1e-3 relative error per product; still deterministic). numpy ignores it."""
    cuda_graph: bool = True
    """On a GPU, capture the whole update (forward, C51 loss, backward, clipping, Adam, target
    update) once as a CUDA graph and replay it: one launch instead of dozens, and no wait for
    the device per update. Same results as running it kernel by kernel. numpy ignores it."""

    def __post_init__(self) -> None:
        validate_bool("tf32", self.tf32, spelled="true or false")
        validate_bool("cuda_graph", self.cuda_graph, spelled="true or false")
        for name in ("hidden", "n_step", "batch_size", "replay_size"):
            validate_number(name, getattr(self, name), above=0, integral=True)
        validate_at_least("layers", self.layers, 0, integral=True)
        validate_number("n_atoms", self.n_atoms, above=1, integral=True)
        validate_number("v_min", self.v_min)
        if validate_number("v_max", self.v_max) <= self.v_min:
            raise InvalidInputError(
                f"`v_max` must be > `v_min` ({self.v_min!r}), was {self.v_max!r}."
            )
        for name in ("lr", "adam_eps", "grad_clip", "per_eps"):
            validate_number(name, getattr(self, name), above=0.0)
        for name in ("gamma", "target_tau"):
            validate_in_range(name, getattr(self, name), 0.0, 1.0, open_low=True)
        for name in ("adam_beta1", "adam_beta2"):
            validate_in_range(name, getattr(self, name), 0.0, 1.0, open_high=True)
        for name in ("per_alpha", "per_beta_start", "per_beta_end", "eps_start", "eps_end"):
            validate_in_range(name, getattr(self, name), 0.0, 1.0)
        for name in ("target_period", "eps_decay_steps", "seed"):
            validate_at_least(name, getattr(self, name), 0, integral=True)
        if validate_at_least("weight_decay", self.weight_decay, 0.0) * self.lr >= 1.0:
            raise InvalidInputError(
                f"`weight_decay` times `lr` must be < 1 (the weights shrink by that factor "
                f"each update), was {self.weight_decay!r} x {self.lr!r}; lower one of them."
            )

    def epsilon(self, step: int) -> float:
        """ε-greedy exploration rate at environment step `step` (linear decay, then flat)."""
        if step >= self.eps_decay_steps or self.eps_decay_steps == 0:
            return float(self.eps_end)
        done = max(step, 0) / self.eps_decay_steps
        return float(self.eps_start + (self.eps_end - self.eps_start) * done)

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (for a run's ``config.json``)."""
        return asdict(self)


DeviceChoice = Literal["auto", "cpu", "cuda"]

#: The longest n-step return `horizon_discount` gives an agent (bars).
MAX_HORIZON_N_STEP: Final = 16

ForecastMode = Literal["off", "input", "only"]
"""What the agent sees of its fold's supervised forecast: nothing, one more column beside the
features, or that column alone (:mod:`fxstore.train.evaluate.forecast`)."""

ForecastModel = Literal["linear", "blend"]
"""Which supervised forecast the agent sees: the ``linear`` reference's model (horizon and
penalty chosen on the validation slice), or the blend of every horizon's ridge, each
penalty chosen by cross-validation on the training rows (:mod:`fxstore.train.evaluate.
forecast`)."""


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """What ``fxstore train`` does: environment, agent, folds, and how long each fold learns.

    Profiles (``smoke``, ``default``, ``production`` or a TOML file) fill these fields; see
    :func:`fxstore.train.profiles.load_profile`. Sizes left None are chosen from the device
    (a GPU's free memory) when the run starts and written to the run's ``config.json``.
    """

    symbol: str = "ES.FUT"
    """Store symbol of the fxcache, continuous (e.g. "ES.FUT")."""

    featureset: str | None = None
    """Feature-set hash under ``fxcache/<symbol>/``; None when there is one."""

    profile: str = "default"
    """Name of the profile the settings came from (recorded in the run)."""

    device: DeviceChoice = "auto"
    """'cuda' (CuPy), 'cpu' (numpy) or 'auto' (CUDA when CuPy finds a GPU)."""

    env: EnvConfig = field(default_factory=EnvConfig)
    """How the environment trades and books PnL."""

    agent: AgentConfig = field(default_factory=lambda: AgentConfig())
    """The learner; its `batch_size` and `replay_size` are replaced by the resolved sizes."""

    walkforward: WalkForwardConfig = field(
        default_factory=lambda: WalkForwardConfig(validation_fraction=0.2)
    )
    """How rows are cut into folds; the validation slice drives early stopping."""

    n_envs: int | None = None
    """Parallel environments stepped at once; None: 4,096 on a GPU, 64 on a CPU."""

    batch_size: int | None = None
    """Transitions per update; None: 16,384 on a GPU with >= 8 GB free, else the agent's."""

    replay_size: int | None = None
    """Replay capacity in transitions; None: what a quarter of a GPU's free memory holds
    (at most 2,000,000), or the agent's on a CPU."""

    episode_bars: int = 2000
    """Rows per training episode (capped at the training window), which ends flat."""

    env_steps: int = 20_000
    """Vectorised environment steps per fold (each adds `n_envs` transitions)."""

    learn_start: int = 10_000
    """Transitions in replay before the first update."""

    updates_per_step: int = 1
    """Learner updates per environment step once learning has started."""

    eval_every: int = 1000
    """Environment steps between validation evaluations (early stopping, progress)."""

    patience: int = 5
    """Validation evaluations without improvement before a fold stops early; 0: never."""

    checkpoint_every: int = 5000
    """Environment steps between checkpoints (0: only at the end of a fold)."""

    max_folds: int | None = None
    """Train on the first this many folds only; None: every fold."""

    capital: float = 100_000.0
    """Dollars the metrics' returns are measured on."""

    baselines: tuple[str, ...] = BASELINE_POLICIES
    """Baseline policies run on the same folds and costs for comparison."""

    seed: int = 0
    """Seed of everything random (weights, exploration, replay, episode starts)."""

    seeds: int = 1
    """Agents trained per fold, each from its own seed (the first from `seed`): the report
    gives the mean and spread over seeds of PnL, Sharpe and share of the oracle."""

    ensemble: bool = False
    """With `seeds` > 1, also trade the seeds' average: the mean of the action values of each
    seed's kept weights (seeds that stood aside left out), its no-trade band chosen on the
    validation slice, reported as policy ``ensemble`` beside the single seeds."""

    concurrent_seeds: bool = False
    """With `seeds` > 1, train a fold's seeds side by side instead of one after another: each
    takes a training step in turn, on a GPU each on its own CUDA stream, so the GPU runs one
    seed's small kernels while it would wait between another's. The results are the same
    bits (each seed's arrays, draws and kernels are its own); every seed's replay is in
    memory at once."""

    forecast: ForecastMode = "off"
    """The fold's ``linear`` forecast as the agent's input (:mod:`fxstore.train.evaluate.
    forecast`): "input" adds it as one more observation column beside the features, "only"
    gives the agent that column alone (and the position it holds); "off": the features only.
    The forecast is fitted on the fold's training rows (cross-fitted there), its horizon and
    penalty chosen on the validation slice, standardised by its spread on the training rows."""

    forecast_model: ForecastModel = "linear"
    """Which forecast `forecast` hands the agent: "linear", the ``linear`` reference's model
    (one horizon and penalty, chosen on the validation slice by the Sharpe of its band
    policy); "blend", the mean over the target horizons of each horizon's ridge prediction
    in standard deviations, each horizon's penalty chosen by its cross-validated
    correlation on the training rows (no horizon chosen, nothing read from validation)."""

    horizon_discount: bool = False
    """Each fold's agent looks as far ahead as the move its fold's ``linear`` model predicts
    (its horizon h in bars, chosen on the validation slice): the agent's `gamma` becomes
    ``0.5 ** (1 / h)`` (a reward h bars ahead counts half) and its `n_step` becomes h, at
    most :data:`MAX_HORIZON_N_STEP`; the profile's `gamma` and `n_step` are not used."""

    reward_forecast: float = 0.0
    """How much of each training step's reward is the move the fold's forecast expects
    instead of the move that happened (0..1): inside the training part a bar's move becomes
    ``(1 - w) * the move + w * slope * (forecast - its mean)``, the slope that of the next
    bar's move on the forecast over the training rows, where the forecast (`forecast_model`'s)
    is cross-fitted (:func:`fxstore.train.evaluate.forecast.reward_path`); the training
    part's drift is not rewarded. Costs, validation, the kept weights
    and every test result book the real moves. 0: the real moves only."""

    signal_dir: str | None = None
    """Folder of the planted signal's side files for the 'oracle' baseline; None: the store's
    synthetic market folder ``<root>/synth/<symbol>``."""

    no_trade_bands: tuple[float, ...] = (0.0,)
    """Candidate no-trade bands of the agent's greedy policy (reward units, e.g. one-sigma bar
    moves with ``reward = "vol"``): it leaves the position it holds only when the best
    action's expected value beats holding by more than the band. Each validation evaluation
    scores every band; the best (weights, band) pair is kept, and every band counts as a
    trial of the deflated Sharpe. (0.0,): plain greedy."""

    prior_trials: int = 1
    """Profiles or settings already tried on the same data before this run: multiplies the
    trial count of the agent's deflated Sharpe ratio (be honest: every run you looked at)."""

    def __post_init__(self) -> None:
        validate_key(self.symbol, "symbol")
        if self.featureset is not None:
            validate_key(self.featureset, "featureset")
        validate_choice("device", self.device, get_args(DeviceChoice))
        for name in ("n_envs", "batch_size", "replay_size", "max_folds"):
            if getattr(self, name) is not None:
                validate_number(name, getattr(self, name), above=0, integral=True)
        for name in ("episode_bars", "env_steps", "updates_per_step", "eval_every"):
            validate_number(name, getattr(self, name), above=0, integral=True)
        for name in ("learn_start", "patience", "checkpoint_every", "seed"):
            validate_at_least(name, getattr(self, name), 0, integral=True)
        validate_number("prior_trials", self.prior_trials, above=0, integral=True)
        validate_number("seeds", self.seeds, above=0, integral=True)
        validate_bool("ensemble", self.ensemble)
        validate_bool("concurrent_seeds", self.concurrent_seeds)
        validate_choice("forecast", self.forecast, get_args(ForecastMode))
        validate_choice("forecast_model", self.forecast_model, get_args(ForecastModel))
        validate_bool("horizon_discount", self.horizon_discount)
        validate_in_range("reward_forecast", self.reward_forecast, 0.0, 1.0)
        if self.ensemble and self.seeds < 2:
            raise InvalidInputError(
                f"`ensemble` averages several seeds' agents; it needs `seeds` >= 2, was "
                f"{self.seeds}."
            )
        if self.episode_bars < 2:
            raise InvalidInputError(f"`episode_bars` must be >= 2, was {self.episode_bars}.")
        validate_number("capital", self.capital, above=0.0)
        if not self.no_trade_bands:
            raise InvalidInputError("`no_trade_bands` must hold at least one band, was [].")
        for band in self.no_trade_bands:
            validate_at_least("no_trade_bands", band, 0.0)
        unknown = [b for b in self.baselines if b not in BASELINE_POLICIES]
        if unknown:
            raise InvalidInputError(
                f"unknown baseline {unknown[0]!r}; choose from {', '.join(BASELINE_POLICIES)}."
            )

    def to_json(self) -> dict[str, object]:
        """The settings as JSON data (the run's ``config.json``)."""
        out = asdict(self)
        out["env"] = self.env.to_json()
        out["baselines"] = list(self.baselines)
        out["no_trade_bands"] = list(self.no_trade_bands)
        return out
