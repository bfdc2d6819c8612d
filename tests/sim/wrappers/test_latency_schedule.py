"""Latency wrapper chunk timing: which row runs when, blending, real-time chunking and
asynchronous (served) planners."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.contract.spec import LatencyModel
from edgerl.sim.wrappers import LatencyCfg, LatencyWrapper, required_horizon
from tests.helpers.latency_env import DT, StampPlanner, StepEnv, expected_command, run


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


class CoalescingStampPlanner(AsyncStampPlanner):
    """:class:`AsyncStampPlanner` that asks the scheduler to coalesce its queries; records
    the rows of every submit."""

    coalesce = True

    def __init__(self, horizon: int) -> None:
        super().__init__(horizon)
        self.submitted: list[int] = []

    def submit(self, obs: torch.Tensor, env_ids: torch.Tensor):
        self.submitted.append(int(env_ids.numel()))
        return super().submit(obs, env_ids)


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

    @pytest.mark.parametrize("lat", [
        LatencyModel(planner_delay_steps=6, planner_period_steps=2),
        LatencyModel(planner_delay_steps=5, planner_period_steps=1, delay_jitter_steps=1.5),
        LatencyModel(planner_delay_steps=0, planner_period_steps=2)])
    def test_coalesced_queries_give_the_same_commands_in_fewer_submits(self, lat):
        """A ``coalesce`` planner gets the queries of several steps in one submit (sent by
        half their delay), and every command still equals the synchronous run's."""
        h = required_horizon(lat, 2)
        cfg = LatencyCfg(method="edit", latency=lat, horizon=h, seed=7, random_phase=True)
        sync_env = LatencyWrapper(StepEnv(5, length=9), cfg, StampPlanner(h))
        planner = CoalescingStampPlanner(h)
        async_env = LatencyWrapper(StepEnv(5, length=9), cfg, planner)
        for t in range(40):
            planner.step = t + 1
            act = torch.full((5, 1), 0.1 * t)
            a, _, da, _ = sync_env.step(act)
            b, _, db, _ = async_env.step(act)
            assert torch.equal(sync_env.last_command, async_env.last_command), t
            assert torch.equal(a["policy"], b["policy"]) and torch.equal(da, db)
        async_env.close()
        queries = len(sync_env.planner.calls)
        assert sum(planner.submitted) == sum(len(ids) for ids, _ in sync_env.planner.calls)
        if lat.planner_delay_steps >= 4:  # held for >= 1 step: fewer, larger submits
            assert len(planner.submitted) < 0.7 * queries
        else:  # D = 0: nothing can wait
            assert len(planner.submitted) == queries
        assert async_env.scheduler._pending == [] and async_env.scheduler._held == []
