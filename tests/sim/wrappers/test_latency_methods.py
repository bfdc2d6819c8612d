"""Latency wrapper methods: delayed policies (naive, ARLI, edit), the edit observation,
what each method lets the policy read, determinism and bare rsl_rl VecEnvs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from edgerl.contract.edit_obs import build_edit_obs, select_chunk_rows
from edgerl.contract.spec import LatencyModel
from edgerl.sim.vec_env import ActionError, TaskSpec
from edgerl.sim.wrappers import LatencyCfg, LatencyWrapper
from tests.helpers.latency_env import DT, StampPlanner, StepEnv, expected_command, run


class TestDelayedPolicies:
    def test_naive_applies_action_d_steps_late(self):
        lat = LatencyModel(planner_delay_steps=3)
        _, env, _, cmds, _ = run("naive", lat, 10, actions=lambda t: torch.full((3, 1), t + 1.0))
        applied = torch.stack(env.applied)[:, 0, 0]
        assert applied.tolist() == [0.0, 0.0, 0.0] + [float(t + 1) for t in range(7)]

    def test_edit_and_actuator_delays_add(self):
        lat = LatencyModel(planner_delay_steps=0, edit_delay_steps=1, action_delay_steps=2)
        _, env, _, cmds, _ = run("edit", lat, 10, edit_bound=1.0,
                                 actions=lambda t: torch.full((3, 1), 0.5))
        applied = torch.stack(env.applied)[:, 0, 0]
        assert torch.equal(applied[3:], cmds[:-3, 0])
        assert applied[:3].tolist() == [0.0, 0.0, 0.0]
        # Edit = chunk row + bound * clip(residual): row 0 of the query at t is 1000(t+1).
        assert cmds[4, 0].item() == 1000.0 * 5 + 0.5

    def test_arli_obs_holds_mid_inference_obs_and_committed(self):
        lat = LatencyModel(planner_delay_steps=4)
        wrapper, env, _, cmds, obs = run("arli", lat, 10,
                                         actions=lambda t: torch.full((3, 1), t + 1.0))
        # m = 2: output applied D - m = 2 steps after the mid observation.
        applied = torch.stack(env.applied)[:, 0, 0]
        assert applied.tolist() == [0.0, 0.0] + [float(t + 1) for t in range(8)]
        assert wrapper.policy_obs_dim == 2 * 2 + 2
        p = obs[6]["policy"][0]  # decision at t = 6: inference started at 4
        assert p[0].item() == 4.0 and p[2].item() == 6.0
        assert p[4:].tolist() == [6.0, 5.0]  # queued actions of t = 5, 4, newest first

    def test_bad_actions_raise_and_leave_state(self):
        lat = LatencyModel(planner_delay_steps=1, planner_period_steps=2)
        wrapper, env, _, _, _ = run("edit", lat, 3)
        t_before = wrapper.scheduler.t.clone()
        with pytest.raises(ActionError, match="not finite"):
            wrapper.step(torch.tensor([[0.0], [float("nan")], [0.0]]))
        with pytest.raises(ActionError, match="shape"):
            wrapper.step(torch.zeros(3, 2))
        assert torch.equal(wrapper.scheduler.t, t_before) and len(env.applied) == 3

    def test_planner_method_needs_planner_and_checks_chunk_shape(self):
        with pytest.raises(ValueError, match="needs a planner"):
            LatencyWrapper(StepEnv(), LatencyCfg("edit"))
        bad = StampPlanner(3)
        with pytest.raises(ValueError, match="expected chunks of shape"):
            LatencyWrapper(StepEnv(), LatencyCfg("planner", horizon=5), bad)


def test_edit_obs_matches_numpy_builder_bitwise():
    """The wrapper's batched edit obs == numpy build_edit_obs on single samples, bytes."""
    lat = LatencyModel(planner_delay_steps=3, planner_period_steps=2, obs_delay_steps=1)
    gen = torch.Generator().manual_seed(0)
    residuals = [torch.randn(3, 1, generator=gen) for _ in range(25)]
    wrapper, _, planner, cmds, obs = run("edit", lat, 25, actions=lambda t: residuals[t],
                                         obs_noise_std=0.3, lookahead=3, n_committed=3,
                                         age_scale_s=0.1)
    cfg, h = wrapper.edit_obs_cfg, wrapper.horizon
    chunks = {}  # (env, query step) -> chunk; queries happen at t = 0, 2, 4...
    query_steps = iter(range(0, 100, 2))
    for ids, ch in planner.calls:
        k = next(query_steps)
        for j, e in enumerate(ids):
            chunks[(int(e), k)] = ch[j]
    sent = cmds.numpy()[..., None].astype(np.float32)
    for t in range(1, 26):
        for e in range(3):
            seen = obs[t]["robot"][e].numpy()
            if t >= 3:
                k = 2 * ((t - 3) // 2)
                chunk, has = chunks[(e, k)], np.float32(1.0)
                row_index = np.int64(t - k)
                age_s = np.float32(np.float64(t - (k - 1)) * DT)
            else:
                chunk, has = np.zeros((h, 1), np.float32), np.float32(0.0)
                row_index, age_s = np.int64(0), np.float32(0.0)
            committed = np.zeros((3, 1), np.float32)
            for j in range(3):
                if t - 1 - j >= 0:
                    committed[j] = sent[t - 1 - j, e]
            rows = select_chunk_rows(chunk, row_index, cfg.n_rows)
            want = build_edit_obs(seen, rows, age_s, committed, has, cfg)
            got = obs[t]["policy"][e].numpy()
            assert got.dtype == want.dtype == np.float32
            assert got.tobytes() == want.tobytes(), (t, e, got, want)


def test_same_seed_same_wrapped_trajectory_with_noise_and_jitter():
    from edgerl.sim import make_task
    from edgerl.sim.wrappers import make_latency_env

    def traj(seed):
        lat = LatencyModel(planner_delay_steps=3, planner_period_steps=2, delay_jitter_steps=1.5,
                           obs_delay_steps=1)
        env = make_latency_env(make_task("cartpole", num_envs=8, seed=seed),
                               LatencyCfg("edit", lat, obs_noise_std=0.05, seed=seed))
        gen = torch.Generator().manual_seed(0)
        return torch.stack([env.step(torch.randn(8, 1, generator=gen))[0]["policy"]
                            for _ in range(60)])

    a, b, c = traj(2), traj(2), traj(3)
    assert torch.equal(a, b) and not torch.equal(a, c)


class BareEnv:
    """Only what rsl_rl's VecEnv guarantees (no spec, no reset, no expert): e.g. Isaac Lab's."""

    def __init__(self) -> None:
        self._inner = StepEnv(2)
        self.num_envs, self.num_actions, self.device = 2, 1, "cpu"
        self.max_episode_length, self.cfg = 1000, {}
        self.episode_length_buf = self._inner.episode_length_buf

    def get_observations(self):
        return self._inner.get_observations()

    def step(self, actions):
        return self._inner._step(actions)


def test_wraps_a_bare_rsl_rl_vecenv():
    lat = LatencyModel(planner_delay_steps=3, planner_period_steps=2)
    with pytest.raises(ValueError, match="control_dt"):
        LatencyWrapper(BareEnv(), LatencyCfg("planner", lat), StampPlanner(7))
    env = BareEnv()
    wrapper = LatencyWrapper(env, LatencyCfg("planner", lat, control_dt=DT), StampPlanner(7))
    cmds = []
    for _ in range(12):
        wrapper.step(torch.zeros(2, 1))
        cmds.append(wrapper.last_command[0, 0].item())
    assert cmds == [expected_command(t, 3, 2, 7, 2) for t in range(12)]
    assert wrapper.max_episode_length == 1000 and wrapper.cfg == {}


class GoalEnv(StepEnv):
    """The clock plus a planner-only ``goal`` element and a privileged ``critic`` group."""

    def __init__(self, num_envs: int = 3) -> None:
        super().__init__(num_envs)
        self.spec = TaskSpec("clock_goal", ["t", "env", "goal"], ["step", "-", "m"], ["a"], ["-"],
                             [-1e9], [1e9], 1.0 / DT, 1000, planner_only=["goal"])

    def _obs(self) -> TensorDict:
        clock = super()._obs()["policy"]
        goal = torch.full((self.num_envs, 1), 7.0)
        policy = torch.cat([clock, goal], -1)
        return TensorDict({"policy": policy, "critic": torch.cat([policy, goal * 2], -1)},
                          batch_size=[self.num_envs])


class TestInformationSplit:
    """The edit policy reads the fast subset; the controls read what their names say."""

    def test_edit_reads_only_the_fast_subset(self):
        lat = LatencyModel(planner_delay_steps=2, planner_period_steps=2)
        planner = StampPlanner(8)
        wrapper = LatencyWrapper(GoalEnv(), LatencyCfg("edit", latency=lat, horizon=8), planner)
        assert wrapper.edit_obs_cfg.obs_indices == [0, 1]
        for _ in range(4):
            obs, *_ = wrapper.step(torch.zeros(3, 1))
        assert obs["robot"].shape == (3, 3) and float(obs["robot"][0, 2]) == 7.0
        policy = obs["policy"]
        assert policy.shape == (3, wrapper.edit_obs_cfg.dim) and wrapper.edit_obs_cfg.fast_dim == 2
        assert torch.equal(policy[:, :2], obs["robot"][:, :2])
        assert not (policy == 7.0).any()  # the goal reaches the edit policy only via the chunk
        assert planner.calls[-1][1].shape[0] == 3  # the planner saw the whole observation

    def test_full_edit_inputs_keep_every_element(self):
        lat = LatencyModel(planner_delay_steps=2, planner_period_steps=2)
        cfg = LatencyCfg("edit", latency=lat, horizon=8, edit_inputs="full")
        wrapper = LatencyWrapper(GoalEnv(), cfg, StampPlanner(8))
        obs = wrapper.get_observations()
        assert wrapper.edit_obs_cfg.full_observation
        assert torch.equal(obs["policy"][:, :3], obs["robot"])

    def test_zero_chunks_keep_the_schedule_and_drop_the_information(self):
        lat = LatencyModel(planner_delay_steps=3, planner_period_steps=2)
        res = [torch.full((3, 1), 0.1 * t) for t in range(12)]
        edit, *_, o_edit = run("edit", lat, 12, horizon=9, actions=lambda t: res[t])
        zero = LatencyWrapper(StepEnv(), LatencyCfg("edit_zero_chunks", latency=lat, horizon=9))
        assert zero.method == "edit" and zero.horizon == edit.horizon == 9
        o_zero = [zero.get_observations()]
        for t in range(12):
            o_zero.append(zero.step(res[t])[0])
        lay = {name: (a, b) for name, a, b in zero.edit_obs_cfg.layout()}
        c0, c1 = lay["chunk_now"][0], lay["chunk_next"][1]
        for a, b in zip(o_edit, o_zero):
            pa, pb = a["policy"], b["policy"]
            assert not pb[:, c0:c1].any()  # every chunk row is zero ...
            # ... while chunk age, has_chunk and the observation follow the same schedule
            for name in ("obs", "chunk_age", "has_chunk"):
                s0, s1 = lay[name]
                assert torch.equal(pa[:, s0:s1], pb[:, s0:s1]), name
        assert o_edit[-1]["policy"][:, c0:c1].abs().sum() > 0
        # commands: the residual on a zero row, bounded by edit_bound
        assert torch.allclose(zero.last_command, 0.5 * res[11].clamp(-1, 1))

    def test_privileged_nodelay_reads_the_critic_group(self):
        wrapper = LatencyWrapper(GoalEnv(), LatencyCfg("nodelay", privileged=True))
        obs = wrapper.get_observations()
        assert wrapper.policy_obs_dim == 4 and obs["policy"].shape == (3, 4)
        assert float(obs["policy"][0, 3]) == 14.0
        plain = LatencyWrapper(StepEnv(), LatencyCfg("nodelay", privileged=True))
        assert plain.policy_obs_dim == 2  # no privileged group: the whole robot observation
        with pytest.raises(ValueError, match="privileged"):
            LatencyCfg("edit", privileged=True)
        with pytest.raises(ValueError, match="edit_inputs"):
            LatencyCfg("edit", edit_inputs="camera")
