"""``fxstore train``: a C51 double-DQN agent trained walk-forward on one symbol's fxcache.

Reads top to bottom like a cleanrl script, inside :func:`train`:

1. open the fxcache on the device and cut its rows into walk-forward folds;
2. for each fold: fresh agent, replay and optimiser; parallel environments roll out on the
   fold's training rows while the learner samples replay; the greedy policy is scored on the
   validation slice every `eval_every` steps (early stopping keeps the best weights);
3. the best weights trade the fold's test window (never seen in training or stopping), next
   to the baselines on the same window and costs;
4. per-fold and total metrics, equity curves and checkpoints go into ``runs/<run-id>/``.

Everything random is a counter-based draw (:mod:`fxstore.train.gpu.rng`) or a generator whose
state is checkpointed, so ``--resume`` continues to the same result as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from fxstore.config import AgentConfig, TrainConfig
from fxstore.config.executor import ExecutorConfig
from fxstore.config.train import MAX_HORIZON_N_STEP
from fxstore.errors import InvalidInputError, RunInterruptedError
from fxstore.train.agent.dqn import Agent
from fxstore.train.agent.learner import LearnerStep
from fxstore.train.agent.memory import check_host_memory, resolve_sizes
from fxstore.train.agent.policy import action_values, banded_positions
from fxstore.train.agent.replay import NStepAccumulator, PrioritizedReplay
from fxstore.train.env.data import CachedMarket, open_cache
from fxstore.train.env.market import (
    F64,
    ContractSpec,
    Market,
    contract_spec,
    evaluate_positions,
)
from fxstore.train.env.vecenv import VecEnv
from fxstore.train.evaluate.forecast import forecast_market, forecast_values, reward_path
from fxstore.train.evaluate.metrics import sharpe_per_bar
from fxstore.train.evaluate.references.linear import fit_linear
from fxstore.train.evaluate.references.oracle import PlantedSignal
from fxstore.train.evaluate.references.ridge import LinearModel
from fxstore.train.evaluate.results import (
    BacktestResult,
    FoldResult,
    baseline_results,
    evaluate_fold,
    in_sample_sharpe,
    load_oracle,
    with_ts_close,
)
from fxstore.train.evaluate.seeds import agent_policies
from fxstore.train.evaluate.walkforward import Fold, make_folds
from fxstore.train.gpu import rng as crng
from fxstore.train.gpu.xp import to_host
from fxstore.train.runs.fold_state import (
    FoldState,
    Learner,
    restore_fold,
    save_fold,
    sync_losses,
)
from fxstore.train.runs.fold_tasks import (
    FoldTask,
    task_reporter,
    task_stop,
    train_folds_on_gpus,
    train_folds_on_ray,
)
from fxstore.train.runs.folder import RunFolder
from fxstore.train.runs.resume import check_resumed_cache
from fxstore.train.runs.status import StopRequest
from fxstore.train.runs.train_run import (
    finish_fold,
    interrupted,
    recording_run,
    write_run_result,
)

__all__ = ["Progress", "train"]

logger = logging.getLogger(__name__)

_STREAM_ENV: Final = 1
_STREAM_ACT: Final = 2
_STREAM_SEEDS: Final = 3
_LOG_EVERY: Final = 100


@dataclass(frozen=True, slots=True)
class KeptValues:
    """Action values (host float32, rows x held position x action) of a seed's kept weights
    on the fold's validation slice (empty unless an ensemble needs it), test window and
    training part, and the no-trade band it trades with."""

    validation: npt.NDArray[np.float32]
    test: npt.NDArray[np.float32]
    train: npt.NDArray[np.float32]
    band: float


FoldSteps = Generator[None, None, "KeptValues | None"]
"""One seed's training of a fold, a step per ``next()``, what it keeps as its return value."""


@dataclass(frozen=True, slots=True)
class Progress:
    """What the trainer reports to a progress display after each logged step."""

    fold: int
    n_folds: int
    step: int
    """Environment steps done in this fold."""
    total_steps: int
    loss: float
    """Mean loss over the updates since the last evaluation (NaN before learning starts)."""
    samples_per_s: float
    """Learner samples (batch x updates) per second since the last report."""
    val_sharpe: float
    """Per-bar Sharpe (annualised) of the last validation evaluation (NaN before one)."""
    last: bool = False
    """This seed's last report in the fold: its training ended (all steps done, or stopped
    early)."""
    seed: int = 0
    """Which of the fold's agents (seeds) reports, from 0."""
    n_seeds: int = 1
    """Agents (seeds) trained per fold."""


def train(
    config: TrainConfig,
    root: Path,
    *,
    resume: str | None = None,
    profile: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    on_start: Callable[[str], None] | None = None,
    stop: StopRequest | None = None,
    executor: ExecutorConfig | None = None,
    gpus: tuple[str, ...] = (),
) -> BacktestResult:
    """Train the agent walk-forward on `config.symbol`'s fxcache under `root`.

    Parameters
    ----------
    config
        What to train; with `resume`, the run's own ``config.json`` is used instead.
    root
        Store root (holds ``fxcache/`` and ``runs/``).
    resume
        Run id under ``runs/`` to continue: finished folds are kept, the fold in progress
        continues from its last checkpoint, and the result equals an uninterrupted run.
        Refused when the fxstore version, the settings, the built-in profile or the fxcache
        changed since the run started (:mod:`fxstore.train.runs.resume`), when it is not a
        training run, has nothing to resume from, or is being written by a live process.
    profile
        With `resume`: the profile name the run must have been trained with (None: any).
    on_progress
        Called with a :class:`Progress` every few steps (the CLI's display).
    on_start
        Called with the run id once the run folder is made (or locked, on resume).
    stop
        Checked after every training step and between folds: once set (by a signal
        handler), the run saves its checkpoint there and raises RunInterruptedError.
    executor
        With kind "ray": the folds not done yet run as Ray tasks first (one GPU each where
        the run is on a GPU), with results identical to the serial run; a failed fold is
        reported with its index once the others have finished
        (:mod:`fxstore.train.runs.fold_tasks`). None or "local": fold after fold here, or on
        `gpus`.
    gpus
        With two or more: the folds not done yet run first, one at once per GPU, each in
        a worker process that sees only its GPU (``CUDA_VISIBLE_DEVICES`` set to the entry:
        :func:`fxstore.gpus.check_gpus` makes them from ``--gpus N``), with results
        identical to the serial run; failures are reported as with Ray, and a stop makes
        the folds in flight save their checkpoint. One or none: fold after fold here. The
        device is not checked here (the workers of a CPU run train on the CPU); not with
        the Ray executor.

    Returns
    -------
    BacktestResult
        The run folder, per-fold results of the agent ("agent") and the baselines on the
        test windows, and their totals.

    Raises
    ------
    SymbolNotFoundError, InvalidInputError
        No fxcache for the symbol, too few days for one fold, a bad checkpoint, a resume
        whose inputs changed.
    RunBusyError
        `resume` names a run a live process is writing.
    RunInterruptedError
        `stop` was set; the message says how to resume.
    TrainingDivergedError
        A loss, gradient or weight stopped being finite (the message names step and tensor).

    A new run that fails or is stopped before it has anything to resume (a finished fold or
    a checkpoint) leaves no folder; any other run ends with its ``status.json`` saying how.
    """
    if gpus and executor is not None and executor.is_ray:
        raise InvalidInputError(
            "`gpus` is for the local executor: Ray gives each fold one GPU itself; "
            "leave out gpus (--gpus)."
        )
    resumed = RunFolder.resume(root, resume, profile=profile) if resume is not None else None
    try:
        return _train_run(config, root, resumed, on_progress, on_start, stop, (executor, gpus))
    finally:
        if resumed is not None:
            resumed.lock.release()


def _train_run(
    config: TrainConfig,
    root: Path,
    resumed: RunFolder | None,
    on_progress: Callable[[Progress], None] | None,
    on_start: Callable[[str], None] | None,
    stop: StopRequest | None,
    runs_on: tuple[ExecutorConfig | None, tuple[str, ...]],
) -> BacktestResult:
    """:func:`train` once the run to resume (if any) is found and locked."""
    # -- the run's inputs: its settings (a resumed run's own), the cache, sizes and folds
    plan = resumed.plan_resume(root) if resumed is not None else None
    if plan is not None:  # every input unchanged; the settings pinned to the run's cache
        config = plan.config
    cache = open_cache(root, config.symbol, config.featureset, config.device)
    if resumed is not None and plan is not None:
        check_resumed_cache(resumed.run_id, plan, cache)
    market = cache.market
    sizes = resumed.read_sizes() if resumed is not None else resolve_sizes(config, market)
    if market.xp is np:  # on a GPU the device is sized by resolve_sizes
        n_obs = market.features.shape[1] + 1
        check_host_memory(config, sizes, n_obs, len(config.env.positions))
    folds = make_folds(
        market.trading_day, config.walkforward, max_target_horizon_bars=cache.horizon
    )
    if config.max_folds is not None:
        folds = folds[: config.max_folds]
    spec = contract_spec(config.symbol, config.env, cache.contracts)  # before the run folder
    planted = load_oracle(root, config.symbol, config.signal_dir, cache)
    # -- every fold not done yet: here, fold after fold, or as Ray tasks or on GPU workers
    with recording_run(root, config, resumed, folds, sizes, (cache, spec), on_start) as (
        run,
        recorder,
    ):
        found: dict[int, dict[str, FoldResult] | None] = {
            f.index: run.read_fold(f, market.bars_per_day, config.capital, config.seed)
            for f in folds
        }
        todo = [f for f in folds if found[f.index] is None]
        executor, gpus = runs_on
        tasks = (config, root, run, todo, run_fold_task, sizes, len(folds), stop)
        if executor is not None and executor.is_ray:
            parallel = train_folds_on_ray(*tasks, executor, on_gpu=market.xp is not np)
        elif len(gpus) > 1:
            parallel = train_folds_on_gpus(*tasks, gpus, on_progress)
        else:
            parallel = iter(())
        for fold, trained in parallel:
            finish_fold(run, fold, trained, config, recorder)
            found[fold.index] = trained
        results: list[FoldResult] = []
        for fold in folds:
            done = found[fold.index]
            if done is None:
                if stop is not None and stop.signum is not None:
                    raise interrupted(run, stop.signum, f"the start of fold {fold.number}")
                done = fold_results(
                    market,
                    cache,
                    fold,
                    config,
                    spec,
                    planted,
                    sizes,
                    run,
                    on_progress,
                    len(folds),
                    stop,
                )
                finish_fold(run, fold, done, config, recorder)
            results += with_ts_close(list(done.values()), cache.ts_close)  # older folders lack it
        # -- the pooled test windows of every fold: the run's totals
        return write_run_result(run, recorder, config, market, cache, planted, folds, results)


def fold_results(
    market: Market,
    cache: CachedMarket,
    fold: Fold,
    config: TrainConfig,
    spec: ContractSpec,
    planted: PlantedSignal,
    sizes: dict[str, int],
    run: RunFolder,
    on_progress: Callable[[Progress], None] | None,
    n_folds: int,
    stop: StopRequest | None,
) -> dict[str, FoldResult]:
    """Train one fold's agents (every seed) and score them and the baselines on its test
    window, by policy (in this process, or in a Ray task: :mod:`fxstore.train.runs.fold_tasks`)."""
    model = None  # the fold's linear model, where the agents read its forecast or horizon
    values = None  # its forecast, where the agents read it or are rewarded by it
    if config.forecast != "off" or config.horizon_discount or config.reward_forecast:
        model = fit_linear(market, fold, config.env, spec, capital=config.capital)
    if config.forecast != "off" or config.reward_forecast:
        values = forecast_values(
            market,
            fold,
            config.env,
            spec,
            capital=config.capital,
            model=model,
            forecast_model=config.forecast_model,
        )
    seen = forecast_market(market, config.forecast, values)  # what the agents observe
    reward_close = None
    if config.reward_forecast and values is not None:
        path = reward_path(market, fold, values, config.reward_forecast)
        reward_close = path.close
        logger.info(
            "fold %d: training rewards book %g of the forecast's expected move (%.4g points "
            "a bar per standard deviation)",
            fold.index,
            config.reward_forecast,
            path.slope,
        )
    config = _with_horizon(config, model)
    runs = [
        _seed_steps(
            seen,
            fold,
            config,
            spec,
            sizes,
            run,
            on_progress,
            n_folds,
            k,
            stop,
            reward_close=reward_close,
        )
        for k in range(config.seeds)
    ]
    if config.concurrent_seeds and config.seeds > 1:
        kept_values = _side_by_side(runs, seen.xp)
    else:
        kept_values = [_run_to_end(steps) for steps in runs]
    trained = [
        (_score(seen, fold, config, spec, kept, agent_policies(config.seeds)[k]), kept)
        for k, kept in enumerate(kept_values)
    ]
    agents = [result for result, _ in trained]
    if config.ensemble:
        agents.append(_ensemble(seen, fold, config, spec, [kept for _, kept in trained]))
    baselines = baseline_results(
        market,
        fold,
        config.baselines,
        config.env,
        spec,
        capital=config.capital,
        seed=config.seed,
        planted=planted.values,
        linear=model,
    )
    return {r.policy: r for r in with_ts_close([*agents, *baselines], cache.ts_close)}


def run_fold_task(task: FoldTask) -> dict[str, FoldResult]:
    """Train and score one fold in this process (a Ray worker or a GPU worker), from what a
    :class:`~fxstore.train.runs.fold_tasks.FoldTask` names: :func:`fold_results`, as the serial
    loop runs it, over the fxcache opened here (a GPU worker's fold stops, its checkpoint
    saved, once the driver asks: :func:`~fxstore.train.runs.fold_tasks.task_stop`; its progress
    goes to the driver's display: :func:`~fxstore.train.runs.fold_tasks.task_reporter`)."""
    config = task.config
    cache = open_cache(task.root, config.symbol, config.featureset, config.device)
    spec = contract_spec(config.symbol, config.env, cache.contracts)
    planted = load_oracle(task.root, config.symbol, config.signal_dir, cache)
    run = RunFolder(task.run_path)  # the driver holds its lock
    return fold_results(
        cache.market,
        cache,
        task.fold,
        config,
        spec,
        planted,
        task.sizes,
        run,
        task_reporter(),
        task.n_folds,
        task_stop(),
    )


def _seed_steps(
    market: Market,
    fold: Fold,
    config: TrainConfig,
    spec: ContractSpec,
    sizes: dict[str, int],
    run: RunFolder,
    on_progress: Callable[[Progress], None] | None,
    n_folds: int,
    seed_index: int,
    stop: StopRequest | None,
    *,
    reward_close: F64 | None = None,
) -> FoldSteps:
    """The training of the fold's agent of seed `seed_index`, a step at a time
    (:func:`_fold_steps`)."""
    seeded = config
    if seed_index:
        seeded = dataclasses.replace(
            config, seed=crng.derive_key(config.seed, _STREAM_SEEDS, seed_index) % (1 << 31)
        )
    return _fold_steps(
        market,
        fold,
        seeded,
        spec,
        sizes,
        run,
        on_progress,
        n_folds,
        seed_index,
        stop,
        reward_close=reward_close,
    )


def _run_to_end(steps: FoldSteps) -> KeptValues | None:
    """Drive one seed's training to its end; what it kept."""
    try:
        while True:
            next(steps)
    except StopIteration as done:
        kept: KeptValues | None = done.value
        return kept


def _side_by_side(runs: list[FoldSteps], xp: ModuleType) -> list[KeptValues | None]:
    """Drive the seeds' trainings a step each in turn until all have ended; on CuPy each on
    its own non-blocking CUDA stream (work queued on one runs while the host serves the
    others). Each seed's arrays, draws and kernels are its own, so what each keeps is what it
    keeps alone. A stop request stops every seed at its next step's end, its checkpoint
    saved; any other error ends them all at once. Then the first seed's error is raised."""
    on_gpu = xp is not np
    if on_gpu:
        xp.cuda.Device().synchronize()  # what the fold set up on other streams is done
    places: list[Any] = [
        _seed_stream(xp, xp.cuda.Device().id, k) if on_gpu else contextlib.nullcontext()
        for k in range(len(runs))
    ]
    kept: list[KeptValues | None] = [None] * len(runs)
    errors: dict[int, BaseException] = {}
    pending = list(range(len(runs)))
    try:
        while pending:
            for k in list(pending):
                try:
                    with places[k]:
                        next(runs[k])
                    continue
                except StopIteration as done:
                    kept[k] = done.value
                except RunInterruptedError as err:  # the others stop at their next step
                    errors[k] = err
                except BaseException as err:
                    errors[k] = err
                    pending.clear()
                    break
                pending.remove(k)
    finally:
        for steps in runs:
            steps.close()
        for stream in places if on_gpu else ():
            stream.synchronize()
    if errors:
        raise errors[min(errors)]
    return kept


@functools.cache
def _seed_stream(xp: ModuleType, device: int, k: int) -> Any:
    """Seed `k`'s CUDA stream on `device` (the current one), the same for every fold. CuPy's
    memory pool keeps the memory a stream's arrays freed for that stream alone: with new
    streams for every fold, the last fold's replays' memory would stay cached for streams
    gone."""
    return xp.cuda.Stream(non_blocking=True)


def _score(
    market: Market,
    fold: Fold,
    config: TrainConfig,
    spec: ContractSpec,
    kept: KeptValues | None,
    policy: str,
) -> FoldResult:
    """The test window's result of trading `kept`'s greedy banded policy (flat if None),
    with its in-sample Sharpe on the training part."""
    if kept is None:
        positions = np.zeros(fold.test[1] - fold.test[0])
        train_positions = np.zeros(fold.train[1] - fold.train[0])
    else:
        positions = banded_positions(kept.test, market, *fold.test, config.env, kept.band)
        train_positions = banded_positions(kept.train, market, *fold.train, config.env, kept.band)
    return evaluate_fold(
        market,
        fold,
        positions,
        config.env,
        spec,
        capital=config.capital,
        seed=config.seed,
        policy=policy,
        in_sample=in_sample_sharpe(
            market, fold, train_positions, config.env, spec, capital=config.capital
        ),
    )


def _ensemble(
    market: Market,
    fold: Fold,
    config: TrainConfig,
    spec: ContractSpec,
    seeds: list[KeptValues | None],
) -> FoldResult:
    """Policy ``ensemble``: the mean of the seeds' action values (seeds that stand aside
    left out; flat if all do), its no-trade band chosen on the validation slice as each
    seed's is."""
    kept = [k for k in seeds if k is not None]
    if not kept:
        return _score(market, fold, config, spec, None, "ensemble")

    def mean(window: str) -> npt.NDArray[np.float32]:
        stacked = np.stack([getattr(k, window) for k in kept])
        return np.asarray(stacked.mean(axis=0, dtype=np.float32), dtype=np.float32)

    q_validation = mean("validation")
    band = (
        _best_band(q_validation, market, fold, config, spec)[1]
        if fold.validation[1] > fold.validation[0]
        else config.no_trade_bands[0]
    )
    average = KeptValues(q_validation, mean("test"), mean("train"), band)
    return _score(market, fold, config, spec, average, "ensemble")


def _fold_steps(
    market: Market,
    fold: Fold,
    config: TrainConfig,
    spec: ContractSpec,
    sizes: dict[str, int],
    run: RunFolder,
    on_progress: Callable[[Progress], None] | None,
    n_folds: int,
    seed_index: int = 0,
    stop: StopRequest | None = None,
    *,
    reward_close: F64 | None = None,
) -> FoldSteps:
    """Learn on one fold, a training step per ``next()`` (the first also sets up, the last
    also chooses the weights); its return value (StopIteration's): the kept weights' action
    values on its test window and on its training part (for the in-sample Sharpe), and on
    its validation slice for an ensemble; None where no weights earned on validation (the
    agent stands aside).

    When `stop` is set, the fold saves its checkpoint after the step in progress and raises
    RunInterruptedError. `reward_close`: the closes whose moves the training rewards book
    (:func:`~fxstore.train.evaluate.forecast.reward_path`); None: the market's."""
    xp = market.xp
    agent_config = _fold_agent_config(config, sizes, fold.index)
    lo, hi = fold.train
    env = VecEnv(
        market,
        config.env,
        spec,
        n_envs=sizes["n_envs"],
        window=(lo, hi),
        episode_bars=min(config.episode_bars, hi - lo),
        seed=crng.derive_key(config.seed, fold.index, _STREAM_ENV) % (1 << 31),
        reward_close=reward_close,
    )
    agent = Agent(agent_config, env.n_obs, env.n_actions, xp=xp)
    replay = PrioritizedReplay(
        agent_config.replay_size,
        env.n_obs,
        alpha=agent_config.per_alpha,
        eps=agent_config.per_eps,
        xp=xp,
        seed=agent_config.seed,
    )
    nstep = NStepAccumulator(
        sizes["n_envs"], agent_config.n_step, agent_config.gamma, env.n_obs, xp=xp
    )
    act_rng = crng.CounterRng(xp, crng.derive_key(config.seed, fold.index, _STREAM_ACT))
    learner = Learner(agent, replay, nstep, env, act_rng)
    learn = LearnerStep(agent, replay, agent_config.batch_size)
    state = FoldState()
    obs = env.reset()
    checkpoint = run.checkpoint_path(fold.index, seed_index)
    if checkpoint.is_file():
        obs = restore_fold(checkpoint, learner, state)
        logger.info("fold %d: resumed at step %d", fold.index, state.step)
    agent.set_loss_totals(state.loss_sum, state.loss_count)
    has_validation = fold.validation[1] > fold.validation[0]
    clock, samples = time.perf_counter(), 0
    while state.step < config.env_steps and not state.stopped:
        epsilon = agent_config.epsilon(state.step)
        action = agent.act(obs, epsilon, act_rng)
        step = env.step(action)
        nstep.push_into(
            replay, obs, action, step.reward, step.done, step.obs, all_done=env.episode_ended
        )
        obs = step.obs
        state.step += 1
        if len(replay) >= max(config.learn_start, agent_config.batch_size):
            for _ in range(config.updates_per_step):
                # no wait for the device here: losses and divergence are read at _sync
                learn(_beta(agent_config, state.step, config.env_steps))
                samples += agent_config.batch_size
        if state.step % config.eval_every == 0 or state.step == config.env_steps:
            _evaluate(agent, market, fold, config, spec, state, has_validation)
        if config.checkpoint_every and state.step % config.checkpoint_every == 0:
            save_fold(checkpoint, learner, state, obs)
        if state.step % _LOG_EVERY == 0 or state.step == config.env_steps or state.stopped:
            sync_losses(agent, state)
            now = time.perf_counter()
            report = Progress(
                fold.index,
                n_folds,
                state.step,
                config.env_steps,
                state.loss_sum / state.loss_count if state.loss_count else float("nan"),
                samples / max(now - clock, 1e-9),
                _or_nan(state.evals[-1]["val_sharpe"] if state.evals else None),
                last=state.step == config.env_steps or state.stopped,
                seed=seed_index,
                n_seeds=config.seeds,
            )
            logger.info(
                "fold %d step %d/%d loss %.4f samples/s %.0f val sharpe %.2f",
                *(report.fold, report.step, report.total_steps, report.loss),
                *(report.samples_per_s, report.val_sharpe),
            )
            if on_progress is not None:
                on_progress(report)
            clock, samples = now, 0
        if stop is not None and stop.signum is not None:  # a safe point: the step is whole
            save_fold(checkpoint, learner, state, obs)
            raise interrupted(run, stop.signum, f"fold {fold.number} step {state.step}")
        yield
    sync_losses(agent, state)
    if not has_validation:  # nothing to select on: the last weights trade
        chosen = "last"
    elif state.best_params is None:  # no validated edge: stand aside
        chosen = "flat"
    else:
        chosen = "best"
        agent.load_state_dict(state.best_params)
    run.write_evals(fold.index, state.evals, chosen, state.best_step, seed_index)
    logger.info("fold %d: trading the %s policy on the test window", fold.index, chosen)
    if chosen == "flat":
        return None
    band = state.best_band if chosen == "best" else config.no_trade_bands[0]
    env_config = config.env

    def values(lo: int, hi: int) -> npt.NDArray[np.float32]:
        return action_values(agent.q_values, market, lo, hi, env_config)

    return KeptValues(
        values(*fold.validation) if config.ensemble else np.zeros((0, 0, 0), np.float32),
        values(*fold.test),
        values(*fold.train),
        band,
    )


def _evaluate(
    agent: Agent,
    market: Market,
    fold: Fold,
    config: TrainConfig,
    spec: ContractSpec,
    state: FoldState,
    has_validation: bool,
) -> None:
    """Score the greedy policy on the validation slice; keep the best weights; stop early."""
    sync_losses(agent, state)
    score, band = (
        _validation_sharpe(agent, market, fold, config, spec)
        if has_validation
        else (np.nan, config.no_trade_bands[0])
    )
    entry: dict[str, float | None] = {
        "step": float(state.step),
        "updates": float(agent.step),
        "loss": state.loss_sum / state.loss_count if state.loss_count else None,
        "val_sharpe": float(score) if np.isfinite(score) else None,
    }
    if len(config.no_trade_bands) > 1:
        entry["band"] = float(band)
    state.evals.append(entry)
    state.loss_sum, state.loss_count = 0.0, 0
    agent.set_loss_totals(0.0, 0)
    if not has_validation:
        return
    if score > state.best_score:
        state.best_score, state.best_params, state.bad_evals = score, agent.state_dict(), 0
        state.best_step, state.best_band = state.step, band
    else:
        state.bad_evals += 1
        state.stopped = config.patience > 0 and state.bad_evals >= config.patience


def _validation_sharpe(
    agent: Agent, market: Market, fold: Fold, config: TrainConfig, spec: ContractSpec
) -> tuple[float, float]:
    """The best annualised per-bar Sharpe of the greedy policy on the fold's validation slice
    over the no-trade bands, and its band (the first of equal scores)."""
    q = action_values(agent.q_values, market, *fold.validation, config.env)
    return _best_band(q, market, fold, config, spec)


def _best_band(
    q: npt.NDArray[np.float32], market: Market, fold: Fold, config: TrainConfig, spec: ContractSpec
) -> tuple[float, float]:
    """The best validation Sharpe of action values `q` over the no-trade bands, and its band."""
    lo, hi = fold.validation
    best, best_band = -np.inf, config.no_trade_bands[0]
    for band in config.no_trade_bands:
        positions = banded_positions(q, market, lo, hi, config.env, band)
        window = evaluate_positions(market, positions, lo, hi, config.env, spec)
        sharpe = sharpe_per_bar(
            to_host(window.pnl), bars_per_day=market.bars_per_day, capital=config.capital
        )
        # A policy that stays flat has no variance and so no Sharpe: it scores 0 (no risk,
        # no return), which any policy that earns something beats.
        score = sharpe if np.isfinite(sharpe) else 0.0
        if score > best:
            best, best_band = score, band
    return best, best_band


def _with_horizon(config: TrainConfig, model: LinearModel | None) -> TrainConfig:
    """`config` with the agent's discount and n-step set from the horizon of the fold's
    linear `model` when `config.horizon_discount` asks for it (see that setting)."""
    if not config.horizon_discount or model is None:
        return config
    horizon = model.horizon_bars
    agent = dataclasses.replace(
        config.agent, gamma=0.5 ** (1.0 / horizon), n_step=min(horizon, MAX_HORIZON_N_STEP)
    )
    logger.debug("horizon %d bars: gamma %.4f, n_step %d", horizon, agent.gamma, agent.n_step)
    return dataclasses.replace(config, agent=agent)


def _fold_agent_config(config: TrainConfig, sizes: dict[str, int], fold: int) -> AgentConfig:
    return dataclasses.replace(
        config.agent,
        batch_size=sizes["batch_size"],
        replay_size=sizes["replay_size"],
        seed=crng.derive_key(config.seed, fold) % (1 << 31),
    )


def _beta(config: AgentConfig, step: int, total: int) -> float:
    """Importance-sampling exponent, annealed linearly from its start to its end value."""
    done = min(step / max(total, 1), 1.0)
    return config.per_beta_start + (config.per_beta_end - config.per_beta_start) * done


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value
