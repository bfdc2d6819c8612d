"""Latency wrapper timing on a hand-built chunk schedule, and edit-obs parity with numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from edgerl.edit_obs import build_edit_obs, select_chunk_rows
from edgerl.sim.vec_env import ActionError, EdgeVecEnv, TaskSpec
from edgerl.sim.wrappers import LatencyCfg, LatencyWrapper, required_horizon
from edgerl.spec import LatencyModel

DT = 0.02


class StepEnv(EdgeVecEnv):
    """A clock: obs = [step within episode, env index]; episodes last ``length`` steps.

    Records every action it receives, so tests see exactly what was applied when.
    """

    def __init__(self, num_envs: int = 3, length: int = 1000) -> None:
        self.num_envs, self.num_actions, self.device = num_envs, 1, torch.device("cpu")
        self.max_episode_length, self.cfg = length, None
        self.spec = TaskSpec("clock", ["t", "env"], ["step", "-"], ["a"], ["-"], [-1e9], [1e9],
                             1.0 / DT, length)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.applied: list[torch.Tensor] = []

    def _obs(self) -> TensorDict:
        obs = torch.stack([self.episode_length_buf.float(),
                           torch.arange(self.num_envs, dtype=torch.float32)], dim=-1)
        return TensorDict({"policy": obs}, batch_size=[self.num_envs])

    def get_observations(self) -> TensorDict:
        return self._obs()

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        self.episode_length_buf[slice(None) if env_ids is None else env_ids] = 0
        return self._obs()

    def _step(self, actions):
        self.applied.append(actions.clone())
        self.episode_length_buf += 1
        dones = self.episode_length_buf >= self.max_episode_length
        self.episode_length_buf[dones] = 0
        return self._obs(), torch.zeros(self.num_envs), dones, {"time_outs": dones}

    def expert_action(self) -> torch.Tensor:
        return torch.zeros(self.num_envs, 1)


class StampPlanner:
    """Writes the step it saw into its chunk: row i = 1000 * (seen step + 1) + i."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        self.calls: list[tuple[np.ndarray, np.ndarray]] = []  # (env_ids, chunks)

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(self.horizon, dtype=torch.float32)
        chunks = (1000.0 * (obs[:, 0:1] + 1.0) + rows[None, :])[..., None]
        self.calls.append((env_ids.numpy().copy(), chunks.numpy().copy()))
        return chunks


def run(method: str, latency: LatencyModel, steps: int, horizon: int = 0, length: int = 1000,
        num_envs: int = 3, actions=None, **cfg_kwargs):
    env = StepEnv(num_envs, length)
    h = horizon or required_horizon(latency, cfg_kwargs.get("lookahead", 2))
    planner = StampPlanner(h)
    cfg = LatencyCfg(method=method, latency=latency, horizon=h, **cfg_kwargs)
    wrapper = LatencyWrapper(env, cfg, planner)
    commands, observations = [], [wrapper.get_observations()]
    for t in range(steps):
        act = torch.zeros(num_envs, 1) if actions is None else actions(t)
        obs, _, _, _ = wrapper.step(act)
        commands.append(wrapper.last_command[:, 0].clone())
        observations.append(obs)
    return wrapper, env, planner, torch.stack(commands), observations


def expected_command(t: int, d: int, p: int, h: int, stale: int) -> float:
    """The reference schedule: newest query k (multiple of P) with k + D <= t."""
    if t < d:
        return 0.0
    k = p * ((t - d) // p)
    if t - k >= h + stale:
        return 0.0
    return 1000.0 * (k + 1) + min(t - k, h - 1)


class TestChunkSchedule:
    @pytest.mark.parametrize("d", [0, 1, 3, 7])
    @pytest.mark.parametrize("p", [2, 5])  # P < D and P > D (and both for D = 3)
    def test_executed_row_each_step(self, d, p):
        lat = LatencyModel(planner_delay_steps=d, planner_period_steps=p)
        wrapper, env, _, cmds, _ = run("planner", lat, 30)
        h = wrapper.horizon
        assert h == p + d + 2
        expected = torch.tensor([expected_command(t, d, p, h, p) for t in range(30)])
        for e in range(3):
            assert torch.equal(cmds[:, e], expected), (d, p)
        # No actuator delay: the env receives the command of the same step.
        assert torch.equal(torch.stack(env.applied)[:, :, 0], cmds)

    def test_short_horizon_holds_last_row_then_goes_stale(self):
        lat = LatencyModel(planner_delay_steps=3, planner_period_steps=8)
        wrapper, _, _, cmds, obs = run("planner", lat, 16, horizon=2, stale_steps=2)
        expected = torch.tensor([expected_command(t, 3, 8, 2, 2) for t in range(16)])
        assert torch.equal(cmds[:, 0], expected)
        assert cmds[3, 0] == 1001.0  # row index 3 > H-1: the last row holds
        assert cmds[4, 0] == 0.0  # t - step0 = 4 >= H + stale: no chunk, zero command
        assert wrapper.scheduler.has_chunk()[0].item() is False

    def test_obs_delay_planner_sees_old_step_and_age_counts_it(self):
        lat = LatencyModel(planner_delay_steps=1, planner_period_steps=4, obs_delay_steps=2)
        wrapper, _, planner, cmds, obs = run("edit", lat, 12)
        # Query at k = 4 sees step 2; its row for t = 6 is row 2.
        assert cmds[6, 0] == 1000.0 * (2 + 1) + 2
        # Query at 0 sees step 0 (history is filled with the first observation).
        assert cmds[1, 0] == 1000.0 * 1 + 1
        age = obs[6]["policy"][0, wrapper.edit_obs_cfg.layout()[3][1]].item()
        assert age == pytest.approx((6 - (4 - 2)) * DT, rel=1e-6)

    def test_jittered_delays_newest_arrived_chunk_wins(self):
        lat = LatencyModel(planner_period_steps=1, delay_distribution=[0.4, 0.0, 0.2, 0.0, 0.4])
        env = StepEnv(4)
        planner = StampPlanner(required_horizon(lat, 2))
        wrapper = LatencyWrapper(env, LatencyCfg("planner", lat, seed=3), planner)
        delays = [wrapper.scheduler.last_delay.clone()]
        cmds = []
        for _ in range(40):
            wrapper.step(torch.zeros(4, 1))
            cmds.append(wrapper.last_command[:, 0].clone())
            delays.append(wrapper.scheduler.last_delay.clone())
        delays = torch.stack(delays)  # delays[k] = delay of the query made at step k
        assert set(delays.unique().tolist()) == {0, 2, 4}
        for e in range(4):
            for t in range(1, 40):
                arrived = [k for k in range(t + 1) if k + delays[k, e] <= t]
                want = 0.0 if not arrived else 1000.0 * (max(arrived) + 1) + t - max(arrived)
                assert cmds[t][e].item() == want, (e, t)

    def test_episode_reset_restarts_schedule(self):
        lat = LatencyModel(planner_delay_steps=2, planner_period_steps=3)
        _, _, _, cmds, _ = run("planner", lat, 20, length=7)
        # Episode 2 starts at wrapper step 7: no chunk for 2 steps, then the query of its t=0.
        assert cmds[7, 0] == 0.0 and cmds[8, 0] == 0.0
        assert cmds[9, 0] == 1000.0 * 1 + 2

    def test_blend_mixes_old_and_new_over_overlap(self):
        lat = LatencyModel(planner_delay_steps=1, planner_period_steps=4)
        # H covers the blend window (P + D + 3 rows), as the wrapper sizes it for blend
        _, _, _, cmds, _ = run("blend", lat, 12, horizon=required_horizon(lat, 3),
                               rtc_blend_steps=3)
        # Chunk of k=4 arrives at t=5; old chunk (k=0) rows 5,6,7 vs new rows 1,2,3.
        for j, t in enumerate((5, 6, 7)):
            w = (j + 1) / 4.0
            old, new = 1000.0 + t, 5000.0 + (t - 4)
            assert cmds[t, 0].item() == pytest.approx((1 - w) * old + w * new, rel=1e-6)
        assert cmds[8, 0] == 5000.0 + 4  # blend over: the new chunk alone

    def test_blend_never_mixes_with_rows_past_the_old_chunks_end(self):
        lat = LatencyModel(planner_delay_steps=1, planner_period_steps=4)
        h = required_horizon(lat, 2)  # 7 rows: the old chunk (k=0) ends before t=7
        _, _, _, cmds, _ = run("blend", lat, 12, horizon=h, rtc_blend_steps=3)
        for j, t in enumerate((5, 6)):
            w = (j + 1) / 4.0
            old, new = 1000.0 + t, 5000.0 + (t - 4)
            assert cmds[t, 0].item() == pytest.approx((1 - w) * old + w * new, rel=1e-6)
        assert cmds[7, 0] == 5000.0 + 3  # no old row 7: the new chunk alone, not a held row

    def test_random_phase_staggers_queries_per_env(self):
        lat = LatencyModel(planner_delay_steps=0, planner_period_steps=5)
        wrapper, _, _, cmds, _ = run("planner", lat, 12, num_envs=6, random_phase=True, seed=1)
        phase = wrapper.scheduler.phase
        assert len(phase.unique()) > 1 and bool(((phase >= 0) & (phase < 5)).all())
        for e in range(6):
            ph = int(phase[e])
            for t in range(12):
                want = 0.0 if t < ph else 1000.0 * (ph + 5 * ((t - ph) // 5) + 1) + (t - ph) % 5
                assert cmds[t, e].item() == want, (e, t)


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


class PrefixPlanner(StampPlanner):
    """A stamp planner that also records the committed prefix it is asked with."""

    def __init__(self, horizon: int) -> None:
        super().__init__(horizon)
        self.prefixes: list[np.ndarray] = []

    def __call__(self, obs, env_ids, prefix):
        self.prefixes.append(prefix.numpy().copy())
        return super().__call__(obs, env_ids)


class TestRealTimeChunking:
    """``rtc``: the planner is asked with the rows the robot executes while it thinks."""

    def test_prefix_is_the_chunk_executed_during_the_delay(self):
        lat = LatencyModel(planner_delay_steps=3, planner_period_steps=3)
        planner = PrefixPlanner(9)
        wrapper = LatencyWrapper(StepEnv(num_envs=2), LatencyCfg("rtc", latency=lat, horizon=9),
                                 planner)
        cmds = []
        for _ in range(12):
            wrapper.step(torch.zeros(2, 1))
            cmds.append(wrapper.last_command[:, 0].clone())
        cmds = torch.stack(cmds).numpy()
        # query 0 (t = 0): nothing runs yet -> zero prefix
        assert planner.prefixes[0].shape == (2, 3, 1) and not planner.prefixes[0].any()
        # query k = 3, 6, 9: the chunk arriving at k (queried at k - 3) runs during k..k+2,
        # so the prefix is its rows 3..5 -- exactly the commands executed at k..k+2
        for q, k in enumerate((3, 6, 9), start=1):
            want = 1000.0 * (k - 3 + 1) + np.arange(3, 6)
            np.testing.assert_array_equal(planner.prefixes[q][0, :, 0], want)
            if k + 2 < 12:
                np.testing.assert_array_equal(cmds[k:k + 3, 0], want)

    def test_rtc_needs_a_prefix_conditioned_planner(self):
        from edgerl.policies.config import TrainConfig
        from edgerl.policies.methods import planner_callable

        with pytest.raises(ValueError, match="committed prefix"):
            planner_callable(None, TrainConfig(task="cartpole", method="rtc", delay_steps=2),
                             None)


class AsyncStampPlanner(StampPlanner):
    """:class:`StampPlanner` behind ``submit``: each answer is a future that records the
    wrapper step at which the scheduler collects it."""

    def __init__(self, horizon: int) -> None:
        super().__init__(horizon)
        self.step = 0
        self.collected: list[tuple[int, int]] = []  # (query step, collection step)

    def submit(self, obs: torch.Tensor, env_ids: torch.Tensor):
        planner, asked = self, self.step

        class Answer:
            def done(self) -> bool:
                return True

            def result(self) -> torch.Tensor:
                planner.collected.append((asked, planner.step))
                return StampPlanner.__call__(planner, obs, env_ids)

        return Answer()


class TestAsynchronousPlanner:
    """A planner with ``submit`` (a planner service) is collected when its chunk is due: the
    simulation steps on meanwhile, and every command equals the synchronous run's."""

    @pytest.mark.parametrize("lat", [
        LatencyModel(planner_delay_steps=3, planner_period_steps=2),
        LatencyModel(planner_delay_steps=4, planner_period_steps=1, delay_jitter_steps=1.5),
        LatencyModel(planner_delay_steps=0, planner_period_steps=3)])
    def test_same_commands_collected_at_arrival(self, lat):
        h = required_horizon(lat, 2)
        cfg = LatencyCfg(method="edit", latency=lat, horizon=h, seed=5)
        sync_env = LatencyWrapper(StepEnv(4, length=11), cfg, StampPlanner(h))
        planner = AsyncStampPlanner(h)
        async_env = LatencyWrapper(StepEnv(4, length=11), cfg, planner)
        for t in range(40):
            planner.step = t + 1  # the step the wrapper's next step() runs
            act = torch.full((4, 1), 0.1 * t)
            a, _, da, _ = sync_env.step(act)
            b, _, db, _ = async_env.step(act)
            assert torch.equal(sync_env.last_command, async_env.last_command), t
            assert torch.equal(a["policy"], b["policy"]) and torch.equal(da, db)
        lags = [c - q for q, c in planner.collected]
        # nothing is collected before its delay has passed (D = 0: at once)
        assert min(lags) >= lat.planner_delay_steps - int(np.ceil(lat.delay_jitter_steps))
        if lat.planner_delay_steps >= 3:
            assert np.mean(lags) >= 2.0
        async_env.close()
        assert async_env.scheduler._pending == []
