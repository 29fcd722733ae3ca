"""train.agent.dqn (numpy path): C51 projection, gradients, learning, checkpoints, errors."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import numpy.typing as npt
import pytest

from fxstore.config import AgentConfig
from fxstore.errors import InvalidInputError, TrainingDivergedError
from fxstore.train.agent.dqn import Agent, make_rng, project_distribution
from fxstore.train.agent.ops import dueling_log_probs
from fxstore.train.agent.replay import Batch, NStepAccumulator, PrioritizedReplay

pytestmark = pytest.mark.quick

SMALL = AgentConfig(hidden=8, layers=2, n_atoms=5, v_min=-2.0, v_max=2.0, lr=1e-3, seed=3)
SUPPORT = np.linspace(-2.0, 2.0, 5)


def make_batch(
    size: int, n_obs: int, n_actions: int, *, seed: int = 0, dtype: type = np.float32
) -> Batch:
    rng = np.random.default_rng(seed)
    return Batch(
        obs=rng.normal(size=(size, n_obs)).astype(dtype),
        action=rng.integers(0, n_actions, size),
        reward=rng.normal(size=size).astype(dtype),
        discount=np.where(rng.random(size) < 0.3, 0.0, 0.9).astype(dtype),
        next_obs=rng.normal(size=(size, n_obs)).astype(dtype),
        weight=rng.uniform(0.2, 1.0, size).astype(dtype),
        index=np.arange(size),
    )


# --- the C51 projection --------------------------------------------------------------------

PROJECTION_CASES = [
    # probs on atoms z = [-2, -1, 0, 1, 2], reward, discount -> projected
    ([0, 0, 1, 0, 0], 0.5, 1.0, [0, 0, 0.5, 0.5, 0]),  # between two atoms
    ([0.2] * 5, 1.0, 1.0, [0, 0.2, 0.2, 0.2, 0.4]),  # integer b (l == u), top atom clipped
    ([0.1, 0.2, 0.3, 0.4, 0], 0.5, 0.5, [0, 0.05, 0.4, 0.55, 0]),  # mixed
    ([0.5, 0, 0, 0, 0.5], -5.0, 0.5, [1, 0, 0, 0, 0]),  # everything clipped to v_min
    ([0.3, 0.3, 0.4, 0, 0], 0.25, 0.0, [0, 0, 0.75, 0.25, 0]),  # terminal: the reward only
]


@pytest.mark.parametrize(("probs", "reward", "discount", "expected"), PROJECTION_CASES)
def test_project_distribution_hand_cases_match(
    probs: list[float], reward: float, discount: float, expected: list[float]
) -> None:
    got = project_distribution(np.array([probs]), np.array([reward]), np.array([discount]), SUPPORT)
    np.testing.assert_allclose(got[0], expected, atol=1e-12)


def test_project_distribution_random_rows_keep_unit_mass() -> None:
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(51), size=200).astype(np.float32)
    reward = rng.normal(scale=8.0, size=200).astype(np.float32)
    discount = rng.choice([0.0, 0.97], size=200).astype(np.float32)
    support = np.linspace(-10, 10, 51, dtype=np.float32)
    got = project_distribution(probs, reward, discount, support)
    assert got.dtype == np.float32 and (got >= 0).all()
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-5)


# --- gradients -----------------------------------------------------------------------------

TENSORS = [f"torso.{i}.{k}" for i in (0, 1) for k in ("weight", "bias")] + [
    f"{head}.{k}" for head in ("value", "adv") for k in ("weight", "bias")
]


def perturb(agent: Agent, rng: np.random.Generator, names: tuple[str, ...], scale: float) -> None:
    """Add noise to the online (and other noise to the target) weights named, padding left 0."""
    online, target = agent.parameters, agent._layout.views(agent._target)
    for name in names:
        online[name][...] += rng.normal(scale=scale, size=online[name].shape)
        target[name][...] = online[name] + rng.normal(scale=0.1, size=online[name].shape)


# (n_obs, n_actions): stored without padding, and with padded first-layer rows (3 -> 4) and
# head columns (5 atoms x 3 = 15 -> 16)
SHAPES = [(4, 3), (3, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", TENSORS)
def test_loss_and_grad_gradient_matches_central_differences(
    name: str, shape: tuple[int, int]
) -> None:
    n_obs, n_actions = shape
    agent = Agent(dataclasses.replace(SMALL, hidden=6), n_obs, n_actions)
    agent._cast(np.float64)
    rng = np.random.default_rng(5)
    perturb(agent, rng, tuple(n for n in TENSORS if n.startswith("torso")), 0.0)
    perturb(agent, rng, ("head.weight",), 0.0)
    perturb(agent, rng, ("head.bias",), 0.3)  # non-zero head biases
    batch = agent._check_batch(make_batch(7, n_obs, n_actions, dtype=np.float64))

    def loss() -> float:
        return agent._loss_and_grad(batch)[0] / 7

    loss()
    analytic = agent._layout.views(agent._grad.copy())[name]
    view = agent.parameters[name]
    numeric = np.zeros_like(analytic)
    step = 1e-6
    for index in np.ndindex(view.shape):
        original = view[index]
        view[index] = original + step
        up = loss()
        view[index] = original - step
        down = loss()
        view[index] = original
        numeric[index] = (up - down) / (2 * step)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-9)


def test_update_fixed_batch_200_steps_loss_falls() -> None:
    agent = Agent(dataclasses.replace(SMALL, hidden=32, lr=3e-3), 4, 3)
    batch = make_batch(64, 4, 3, seed=2)
    losses = [agent.update(batch)[0].loss for _ in range(200)]
    assert losses[-1] < 0.6 * losses[0]
    assert agent.step == 200


def test_update_priorities_are_unweighted_cross_entropies() -> None:
    agent = Agent(SMALL, 4, 3)
    batch = make_batch(16, 4, 3)
    stats, priority = agent.update(batch)
    assert priority.shape == (16,) and priority.dtype == np.float32
    assert stats.loss == pytest.approx(float((batch.weight * priority).mean()), rel=1e-5)


def test_update_double_dqn_uses_online_argmax_with_target_distribution() -> None:
    agent = Agent(SMALL, 2, 2)
    online, target = agent.parameters, agent._layout.views(agent._target)
    for net in (online, target):
        net["head.weight"][...] = 0.0  # Q and distributions come from the head biases alone
    online["adv.bias"][...] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 4]  # online prefers action 1
    target["adv.bias"][...] = [0, 0, 0, 0, 4, 4, 0, 0, 0, 0]  # target: action 0 high, 1 low
    online_bias = online["head.bias"].astype(np.float64)
    target_bias = target["head.bias"].astype(np.float64)  # before the update moves the target
    batch = make_batch(6, 2, 2)._replace(discount=np.full(6, 0.9, np.float32))
    _, priority = agent.update(batch)

    def expected_ce(next_action: int) -> npt.NDArray[np.float64]:
        log_p_target = dueling_log_probs(target_bias[None], 2)[0]
        moved = project_distribution(
            np.repeat(np.exp(log_p_target[next_action])[None], 6, axis=0),
            batch.reward.astype(np.float64),
            batch.discount.astype(np.float64),
            SUPPORT,
        )
        log_p = dueling_log_probs(online_bias[None], 2)[0][batch.action]
        ce: npt.NDArray[np.float64] = -(moved * log_p).sum(axis=1)
        return ce

    np.testing.assert_allclose(priority, expected_ce(1), rtol=1e-5)
    assert not np.allclose(priority, expected_ce(0), rtol=1e-2)


# --- acting and learning a known MDP ---------------------------------------------------------


def test_act_epsilon_zero_is_greedy_and_one_is_uniform() -> None:
    agent = Agent(SMALL, 4, 3)
    obs = np.random.default_rng(0).normal(size=(3000, 4)).astype(np.float32)
    greedy = agent.act(obs, 0.0, make_rng(np, 1))
    np.testing.assert_array_equal(greedy, agent.q_values(obs).argmax(axis=1))
    counts = np.bincount(agent.act(obs, 1.0, make_rng(np, 1)), minlength=3)
    assert greedy.dtype == np.int64 and (abs(counts - 1000) < 120).all()


def test_agent_learns_chain_through_replay_and_nstep() -> None:
    # states 0..3, start at 0; action 1 moves right, 0 left (0 stays); reaching 3 pays 1, ends.
    gamma, n_envs, steps = 0.9, 16, 400
    config = AgentConfig(
        hidden=32, n_atoms=11, v_min=0.0, v_max=1.5, gamma=gamma, n_step=2, lr=3e-3,
        batch_size=64, target_tau=0.05, seed=1,
    )  # fmt: skip
    agent = Agent(config, 4, 2)
    replay = PrioritizedReplay(4096, 4, alpha=0.6, eps=1e-6, seed=1)
    accumulator = NStepAccumulator(n_envs, config.n_step, gamma, 4)
    rng, eye = make_rng(np, 2), np.eye(4, dtype=np.float32)
    state = np.zeros(n_envs, dtype=np.int64)
    for t in range(steps):
        action = agent.act(eye[state], 0.5, rng)  # off-policy: exploring half the time
        moved = np.clip(state + np.where(action == 1, 1, -1), 0, 3)
        done = moved == 3
        accumulator_out = accumulator.push(
            eye[state], action, done.astype(np.float32), done, eye[moved]
        )
        replay.add(*accumulator_out)
        state = np.where(done, 0, moved)
        if len(replay) >= 64:
            beta = 0.4 + 0.6 * t / steps
            batch = replay.sample(64, beta)
            replay.update_priorities(batch.index, agent.update(batch)[1])
    q = agent.q_values(eye[:3])
    np.testing.assert_array_equal(q.argmax(axis=1), [1, 1, 1])
    np.testing.assert_allclose(q[:, 1], [gamma**2, gamma, 1.0], atol=0.1)


# --- determinism and checkpoints ------------------------------------------------------------


def run_losses(agent: Agent, batches: list[Batch]) -> list[float]:
    return [agent.update(batch)[0].loss for batch in batches]


def test_update_same_seed_gives_identical_losses() -> None:
    batches = [make_batch(32, 4, 3, seed=s) for s in range(10)]
    first = run_losses(Agent(SMALL, 4, 3), batches)
    second = run_losses(Agent(SMALL, 4, 3), batches)
    assert first == second
    assert first != run_losses(Agent(dataclasses.replace(SMALL, seed=4), 4, 3), batches)


def test_load_state_dict_resumes_with_an_identical_next_update() -> None:
    config = dataclasses.replace(SMALL, target_period=2, target_tau=1.0)
    agent = Agent(config, 4, 3)
    run_losses(agent, [make_batch(32, 4, 3, seed=s) for s in range(5)])
    restored = Agent(dataclasses.replace(config, seed=11), 4, 3)
    restored.load_state_dict(agent.state_dict())
    batch = make_batch(32, 4, 3, seed=9)
    (stats_a, priority_a), (stats_b, priority_b) = agent.update(batch), restored.update(batch)
    assert stats_a == stats_b and stats_b.step == 6
    np.testing.assert_array_equal(priority_a, priority_b)
    for key, value in agent.state_dict().items():
        np.testing.assert_array_equal(restored.state_dict()[key], value)


def test_load_state_dict_wrong_shape_raises_one_line_error() -> None:
    agent = Agent(SMALL, 4, 3)
    state = agent.state_dict()
    size = state["params"].shape[0]
    state["adam_m"] = state["adam_m"][:-1]
    message = f"agent state 'adam_m' must have shape ({size},), was ({size - 1},)."
    with pytest.raises(InvalidInputError, match=f"^{re.escape(message)}$"):
        agent.load_state_dict(state)


def test_load_state_dict_other_network_shape_raises() -> None:
    state = Agent(SMALL, 4, 3).state_dict()
    other = Agent(dataclasses.replace(SMALL, hidden=9), 3, 3)
    state["params"] = state["target_params"] = np.zeros(other._layout.size, np.float32)
    state["adam_m"] = state["adam_v"] = state["params"]
    with pytest.raises(InvalidInputError, match=re.escape("'shape' (n_obs, n_actions, hidden")):
        other.load_state_dict(state)


def unpadded(agent: Agent) -> Agent:
    """`agent` re-laid out without padding (the stored layout of checkpoints before it),
    with the same initial weights."""
    from fxstore.train.agent.dqn import _init_params

    agent._layout = dataclasses.replace(agent._layout, align=1)
    agent._set_buffers(_init_params(agent._layout, agent.config.seed), SUPPORT)
    return agent


def test_layout_pads_first_layer_rows_and_head_columns_to_four_floats() -> None:
    agent = Agent(SMALL, 3, 2)  # n_obs 3 -> 4 rows; head 5 x 3 = 15 -> 16 columns
    stored = dict(agent._layout.tensors)
    assert stored["torso.0.weight"] == (4, 8) and stored["head.weight"] == (8, 16)
    assert stored["head.bias"] == (16,)
    shapes = {k: v.shape for k, v in agent.parameters.items()}
    assert shapes["torso.0.weight"] == (3, 8) and shapes["head.weight"] == (8, 15)
    assert shapes["value.weight"] == (8, 5) and shapes["adv.bias"] == (10,)


def test_padded_agent_learns_as_the_unpadded_one_and_its_padding_stays_zero() -> None:
    config = dataclasses.replace(SMALL, weight_decay=0.1)
    padded, plain = Agent(config, 3, 2), unpadded(Agent(config, 3, 2))
    for name, view in padded.parameters.items():  # the same initial weights
        np.testing.assert_array_equal(view, plain.parameters[name], err_msg=name)
    for seed in range(5):
        batch = make_batch(16, 3, 2, seed=seed)
        got, want = padded.update(batch), plain.update(batch)
        assert got[0].loss == pytest.approx(want[0].loss, rel=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    for name, view in padded.parameters.items():
        np.testing.assert_allclose(view, plain.parameters[name], rtol=1e-5, atol=1e-7)
    q = padded.q_values(make_batch(4, 3, 2).obs)
    np.testing.assert_allclose(q, plain.q_values(make_batch(4, 3, 2).obs), rtol=1e-5)
    stored, views = padded._layout.stored, padded._layout.views
    for flat in (padded._params, padded._target, padded._m, padded._v):
        assert np.abs(stored(flat)["torso.0.weight"][3:]).max() == 0.0
        assert np.abs(stored(flat)["head.weight"][:, 15:]).max() == 0.0
        assert np.abs(stored(flat)["head.bias"][15:]).max() == 0.0
        assert views(flat)["head.weight"].shape == (8, 15)


def test_load_state_dict_takes_a_checkpoint_of_the_unpadded_layout() -> None:
    old = unpadded(Agent(SMALL, 3, 2))
    old.update(make_batch(16, 3, 2))
    state = old.state_dict()
    assert state["params"].shape == (old._layout.size,)
    agent = Agent(SMALL, 3, 2)
    assert agent._layout.size > old._layout.size
    agent.load_state_dict(state)
    assert agent.step == 1
    for name, view in agent.parameters.items():
        np.testing.assert_array_equal(view, old.parameters[name], err_msg=name)
    np.testing.assert_array_equal(
        agent._layout.views(agent._m)["adv.weight"], old._layout.views(old._m)["adv.weight"]
    )
    batch = make_batch(16, 3, 2, seed=1)
    assert agent.update(batch)[0].loss == pytest.approx(old.update(batch)[0].loss, rel=1e-6)


@pytest.mark.parametrize(
    ("period", "synced"), [(0, [False, False, False]), (3, [False, False, True])]
)
def test_update_target_network_follows_polyak_or_periodic_copy(
    period: int, synced: list[bool]
) -> None:
    config = dataclasses.replace(SMALL, target_period=period, target_tau=1.0 if period else 0.1)
    agent = Agent(config, 4, 3)
    got = []
    for seed in range(3):
        before = agent._target.copy()
        agent.update(make_batch(16, 4, 3, seed=seed))
        got.append(bool(np.array_equal(agent._target, agent._params)))
        if period == 0:
            np.testing.assert_allclose(
                agent._target, before + 0.1 * (agent._params - before), rtol=1e-5, atol=1e-7
            )
    assert got == synced


# --- errors ---------------------------------------------------------------------------------


def test_update_nan_weight_raises_training_diverged_naming_the_tensor() -> None:
    agent = Agent(SMALL, 4, 3)
    agent.update(make_batch(16, 4, 3))
    agent.parameters["adv.weight"][2, 3] = np.nan
    before = agent.state_dict()
    message = "step 2: weight adv.weight is not finite (nan); lower `lr` or `grad_clip`."
    with pytest.raises(TrainingDivergedError, match=f"^{re.escape(message)}$"):
        agent.update(make_batch(16, 4, 3))
    assert agent.step == 1
    np.testing.assert_array_equal(agent.state_dict()["adam_m"], before["adam_m"])


def test_update_nan_reward_raises_naming_the_batch_field() -> None:
    agent = Agent(SMALL, 4, 3)
    batch = make_batch(16, 4, 3)
    batch.reward[4] = np.nan
    with pytest.raises(TrainingDivergedError, match=re.escape("step 1: batch `reward` is not")):
        agent.update(batch)


def test_update_wrong_obs_width_raises() -> None:
    agent = Agent(SMALL, 4, 3)
    message = "batch `obs` must have shape (16, 4) with B >= 1, was (16, 5)."
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        agent.update(make_batch(16, 5, 3))


def test_update_weight_decay_shrinks_the_weights_then_takes_the_same_adam_step() -> None:
    decayed = dataclasses.replace(SMALL, weight_decay=50.0)  # lr 1e-3: keep 0.95
    plain, shrunk = Agent(SMALL, 4, 3), Agent(decayed, 4, 3)
    before = plain.state_dict()["params"]
    batch = make_batch(32, 4, 3, seed=5)
    (stats_a, _), (stats_b, _) = plain.update(batch), shrunk.update(batch)

    assert stats_a.loss == stats_b.loss  # the gradient is taken before the weights move
    step = plain.state_dict()["params"] - before
    np.testing.assert_allclose(
        shrunk.state_dict()["params"], np.float32(0.95) * before + step, rtol=0, atol=1e-6
    )
    assert np.abs(shrunk.state_dict()["params"]).sum() < np.abs(plain.state_dict()["params"]).sum()


# --- config ---------------------------------------------------------------------------------

INVALID_CONFIGS = [
    ({"n_atoms": 1}, "`n_atoms` must be > 1, was 1."),
    ({"v_max": -10.0}, "`v_max` must be > `v_min` (-10.0), was -10.0."),
    ({"gamma": 1.5}, "`gamma` must be in (0, 1], was 1.5."),
    ({"adam_beta2": 1.0}, "`adam_beta2` must be in [0, 1), was 1.0."),
    ({"per_alpha": -0.1}, "`per_alpha` must be in [0, 1], was -0.1."),
    ({"hidden": 2.5}, "`hidden` must be a whole number, was 2.5."),
    ({"target_period": -1}, "`target_period` must be >= 0, was -1."),
    ({"lr": 0.0}, "`lr` must be > 0, was 0.0."),
    ({"weight_decay": -0.1}, "`weight_decay` must be >= 0, was -0.1."),
    (
        {"weight_decay": 20000.0},
        "`weight_decay` times `lr` must be < 1 (the weights shrink by that factor each "
        "update), was 20000.0 x 0.0001; lower one of them.",
    ),
]


@pytest.mark.parametrize(("kwargs", "message"), INVALID_CONFIGS)
def test_agent_config_invalid_field_raises(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=f"^{re.escape(message)}$"):
        AgentConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("step", "expected"), [(0, 1.0), (5_000, 0.525), (10_000, 0.05)])
def test_agent_config_epsilon_decays_linearly(step: int, expected: float) -> None:
    assert AgentConfig().epsilon(step) == pytest.approx(expected)
    assert AgentConfig().to_json()["n_atoms"] == 51


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", [t for t in TENSORS if not t.startswith("torso")])
def test_loss_and_grad_without_hidden_layers_matches_central_differences(
    name: str, shape: tuple[int, int]
) -> None:
    """layers = 0: the head reads the observation (a linear distributional Q)."""
    n_obs, n_actions = shape
    agent = Agent(dataclasses.replace(SMALL, layers=0), n_obs, n_actions)
    assert [n for n, _ in agent._layout.tensors] == ["head.weight", "head.bias"]
    agent._cast(np.float64)
    rng = np.random.default_rng(6)
    perturb(agent, rng, ("head.weight", "head.bias"), 0.3)
    batch = agent._check_batch(make_batch(7, n_obs, n_actions, dtype=np.float64))

    def loss() -> float:
        return agent._loss_and_grad(batch)[0] / 7

    loss()
    analytic = agent._layout.views(agent._grad.copy())[name]
    view = agent.parameters[name]
    numeric = np.zeros_like(analytic)
    for index in np.ndindex(view.shape):
        original = view[index]
        view[index] = original + 1e-6
        up = loss()
        view[index] = original - 1e-6
        down = loss()
        view[index] = original
        numeric[index] = (up - down) / 2e-6
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-9)


def test_layers_below_zero_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="`layers` must be >= 0"):
        dataclasses.replace(SMALL, layers=-1)


def test_step_scalars_reference_marks_the_first_non_finite_update_and_skips_the_rest() -> None:
    from fxstore.train.agent.ops import NumpyOps

    ops, out = NumpyOps(), np.zeros(5, dtype=np.float32)
    progress = np.array([4, 0, 2.0, 4, 0.5, 1.0])  # 4 updates done, losses summing to 2
    for sums in ([np.nan, 1.0], [3.0, 1.0]):  # update 5 diverges; update 6 is skipped too
        ops.step_scalars(np.array(sums), progress, out, batch=2, config=SMALL)
        assert out[4] == 0.0
    assert progress.tolist()[:4] == [4, 5, 2.0, 4] and np.isnan(progress[4])
    progress = np.array([4, 0, 2.0, 4, 0.5, 1.0])
    ops.step_scalars(np.array([3.0, 16.0]), progress, out, batch=2, config=SMALL)
    assert progress.tolist() == [5, 0, 3.5, 5, 1.5, 4.0] and out[4] == 1.0
