"""EditLoop stepped with a virtual clock: exact rows, fallbacks, the policy path, no
allocation growth (its thread and triggers: test_rt_loop_scheduler.py)."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import onnxruntime as ort
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import VirtualClock
from edgerl.contract.edit_obs import build_edit_obs, select_chunk_rows
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.edit_loop import EditLoop, LoopConfig, TransportDown
from edgerl.runtime.safety import SafetyConfig
from tests.helpers.specs import make_spec

DT = 0.01


def ramp_chunk(t0, n=10, a=2, dt=DT, start=0.0):
    """Row i = (start + i) / 100 in every column (within the +-1 limits)."""
    rows = (start + np.arange(n, dtype=np.float32))[:, None] / 100.0 * np.ones((1, a), np.float32)
    return ActionChunk(actions=rows, t0=t0, dt=dt, obs_time=t0)


def planner_loop(cfg=None, sink=None, **spec_kw):
    spec = make_spec(method="planner", **spec_kw)
    clock = VirtualClock(0.0)
    loop = EditLoop(spec, None, ChunkBuffer(), sink=sink, clock=clock, cfg=cfg)
    loop.obs.write(np.zeros(spec.observation.dim, np.float32), 0.0)
    return loop


class TestRowSelection:
    def test_exact_row_at_boundaries(self):
        loop = planner_loop()
        loop.buffer.push(ramp_chunk(t0=1.0))
        # before t0 row 0 holds; t0 + i*dt selects row i exactly (float rounding included)
        assert loop.tick(0.95)[0] == pytest.approx(0.0)
        for i in range(10):
            assert loop.tick(1.0 + i * DT)[0] == pytest.approx(i / 100.0), i
            assert loop.state == "ok"
        assert loop.tick(1.0 + 3 * DT + 0.6 * DT)[0] == pytest.approx(0.03)  # inside row 3

    def test_rows_equal_contract_select_chunk_rows(self):
        loop = planner_loop(lookahead=3)
        chunk = ActionChunk(actions=np.arange(10, dtype=np.float32).reshape(5, 2), t0=0.0,
                            dt=DT)
        for row in range(5):
            loop.chunk_rows.fill(row * DT, chunk, row)
            np.testing.assert_array_equal(loop._rows, select_chunk_rows(chunk.actions, row, 4))

    def test_interpolate_between_rows(self):
        loop = planner_loop(LoopConfig(row_mode="interpolate"))
        loop.buffer.push(ramp_chunk(t0=0.0))
        assert loop.tick(0.0325)[0] == pytest.approx(0.0325, abs=1e-6)
        assert loop.tick(0.09)[0] == pytest.approx(0.09, abs=1e-6)  # last row holds

    def test_stale_after_horizon_holds_then_recovers(self):
        loop = planner_loop()  # H = 10 rows of 10 ms, P = 5 steps: stale after 15 steps
        loop.buffer.push(ramp_chunk(t0=0.0))
        last = loop.tick(0.09)[0]
        for t in (0.10, 0.12, 0.14):  # past the last row: it holds (the timing's stale rule)
            assert loop.tick(t)[0] == pytest.approx(last) and loop.state == "ok"
        cmd = loop.tick(0.15)
        assert loop.state == "stale_chunk" and cmd[0] == pytest.approx(last)
        assert loop.safety.interventions()["stale_chunk"] == 1
        loop.buffer.push(ramp_chunk(t0=0.15, start=50))
        assert loop.tick(0.16)[0] == pytest.approx(0.51) and loop.state == "ok"

    def test_stale_decelerate_and_zero_policies(self):
        loop = planner_loop(LoopConfig(safety=SafetyConfig(stale_policy="decelerate",
                                                           decel_tau_s=0.02)))
        loop.buffer.push(ramp_chunk(t0=0.0, start=80))
        for k in range(9, 15):
            loop.tick(k * 0.01)  # command 0.89 (the last row, held until H + P steps)
        assert loop.tick(0.15)[0] == pytest.approx(0.89 / 2, rel=1e-5)  # dt/tau = 0.5
        zero = planner_loop(LoopConfig(safety=SafetyConfig(stale_policy="zero")))
        zero.buffer.push(ramp_chunk(t0=0.0, start=80))
        zero.tick(0.09)
        assert zero.tick(0.2)[0] == 0.0


class TestFallbacks:
    def test_stale_policy_planner_commands_zero_row(self):
        loop = planner_loop(LoopConfig(safety=SafetyConfig(stale_policy="policy")))
        loop.buffer.push(ramp_chunk(t0=0.0, start=50))
        assert loop.tick(0.05)[0] == pytest.approx(0.55)
        assert loop.tick(0.2)[0] == 0.0 and loop.state == "stale_chunk"

    def test_no_chunk_yet(self):
        loop = planner_loop()
        np.testing.assert_array_equal(loop.tick(0.0), [0.0, 0.0])
        assert loop.state == "no_chunk"
        assert loop.metrics.state_counts[1] == 1
        assert loop.safety.interventions()["no_chunk"] == 1

    def test_nonfinite_observation(self):
        loop = planner_loop()
        loop.buffer.push(ramp_chunk(t0=0.0))
        loop.tick(0.02)
        loop.obs.write(np.array([0, np.nan, 0, 0], np.float32), 0.03)
        assert loop.tick(0.03)[0] == pytest.approx(0.02)  # held
        assert loop.state == "nonfinite_obs"
        assert loop.safety.interventions()["nonfinite_obs"] == 1

    def test_transport_down_counted_and_recovered(self):
        calls = []

        def sink(cmd, t):
            calls.append((t, cmd.copy()))
            if 0.015 < t < 0.035:
                raise TransportDown("serial port gone")
            return t < 0.045 or t > 0.055  # False = down, too

        loop = planner_loop(sink=sink)
        loop.buffer.push(ramp_chunk(t0=0.0))
        for i in range(8):
            loop.tick(i * DT)
        assert loop.safety.interventions()["transport_down"] == 3  # t = .02, .03, .05
        assert loop.transport_ok and len(calls) == 8
        assert calls[4][1][0] == pytest.approx(0.04)

    def test_estop_sends_safe_action_until_reset(self):
        loop = planner_loop()
        loop.buffer.push(ramp_chunk(t0=0.0, start=50))
        loop.tick(0.0)
        loop.estop("button")
        assert loop.tick(0.01)[0] == 0.0 and loop.state == "estop"
        loop.reset_estop()
        assert loop.tick(0.02)[0] == pytest.approx(0.52)

    def test_overrun_policy(self):
        loop = planner_loop(LoopConfig(safety=SafetyConfig(overrun_policy="hold")))
        loop.buffer.push(ramp_chunk(t0=0.0))
        loop.tick(0.01)
        assert loop.tick(0.05, overrun=True)[0] == pytest.approx(0.01)
        assert loop.state == "overrun"
        assert loop.safety.interventions()["deadline_overrun"] == 1


class TestPolicyPath:
    def test_edit_action_matches_independent_computation(self, mlp_bundle):
        spec, net = load_bundle(mlp_bundle, warmup=1)
        loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0))
        sess = ort.InferenceSession(str(mlp_bundle / "policy.onnx"),
                                    providers=["CPUExecutionProvider"])
        chunk = ramp_chunk(t0=0.0, n=10, a=2, start=-5)
        loop.buffer.push(chunk)
        cfg = spec.edit_obs
        committed = np.zeros((cfg.n_committed, 2), np.float32)
        rng = np.random.default_rng(0)
        for i in range(6):
            t = i * DT + 0.004
            obs = rng.standard_normal(4).astype(np.float32)
            loop.obs.write(obs, t)
            cmd = loop.tick(t).copy()
            rows = select_chunk_rows(chunk.actions, i, cfg.n_rows)
            x = build_edit_obs(obs, rows, t - chunk.obs_time, committed, 1.0, cfg)
            residual = sess.run(None, {"obs": x[None]})[0][0]
            expected = np.clip(rows[0] + spec.residual_bound * np.clip(residual, -1, 1), -1, 1)
            np.testing.assert_allclose(cmd, expected, atol=1e-6)
            committed[1:] = committed[:-1]
            committed[0] = cmd
        assert loop.state == "ok"

    def test_edit_input_is_built_from_the_manifest_fast_subset(self, make_bundle):
        """A bundle whose manifest hides observation elements 1 and 3 (planner only): the
        loop feeds the network elements 0 and 2 only, exactly as the training wrapper."""
        bundle = make_bundle("split", obs_indices=[0, 2])
        spec, net = load_bundle(bundle, warmup=1)
        assert spec.edit_obs.obs_indices == [0, 2] and net.input[0].shape[-1] == spec.edit_obs.dim
        sess = ort.InferenceSession(str(bundle / "policy.onnx"),
                                    providers=["CPUExecutionProvider"])
        chunk = ramp_chunk(t0=0.0, n=10, a=2, start=-5)
        cmds = []
        for hidden in (0.0, 1e3):  # the planner-only elements change; the command must not
            loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0))
            loop.buffer.push(chunk)
            obs = np.array([0.3, hidden, -0.2, -hidden], np.float32)
            loop.obs.write(obs, 0.004)
            cmds.append(loop.tick(0.004).copy())
        np.testing.assert_array_equal(cmds[0], cmds[1])
        cfg = spec.edit_obs
        rows = select_chunk_rows(chunk.actions, 0, cfg.n_rows)
        x = build_edit_obs(np.array([0.3, 7.0, -0.2, 7.0], np.float32), rows, 0.004,
                           np.zeros((cfg.n_committed, 2), np.float32), 1.0, cfg)
        assert x[:2].tolist() == pytest.approx([0.3, -0.2])
        residual = sess.run(None, {"obs": x[None]})[0][0]
        expected = np.clip(rows[0] + spec.residual_bound * np.clip(residual, -1, 1), -1, 1)
        np.testing.assert_allclose(cmds[0], expected, atol=1e-6)

    def test_stale_policy_runs_network_like_training(self, mlp_bundle):
        spec, net = load_bundle(mlp_bundle, warmup=1)
        loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0),
                        cfg=LoopConfig(safety=SafetyConfig(stale_policy="policy")))
        sess = ort.InferenceSession(str(mlp_bundle / "policy.onnx"),
                                    providers=["CPUExecutionProvider"])
        obs = np.array([0.5, -0.5, 0.25, 1.0], np.float32)
        loop.obs.write(obs, 0.0)
        cmd = loop.tick(0.0).copy()  # no chunk: zero rows, has_chunk 0, zero history
        cfg = spec.edit_obs
        x = build_edit_obs(obs, np.zeros((cfg.n_rows, 2), np.float32), 0.0,
                           np.zeros((cfg.n_committed, 2), np.float32), 0.0, cfg)
        residual = sess.run(None, {"obs": x[None]})[0][0]
        np.testing.assert_allclose(cmd, spec.residual_bound * np.clip(residual, -1, 1),
                                   atol=1e-6)
        assert loop.state == "no_chunk"
        assert loop.safety.interventions()["no_chunk"] == 1

    def test_raw_observation_policy_needs_no_chunk(self, make_bundle):
        spec, net = load_bundle(make_bundle("nd", method="nodelay", raw_obs_input=True),
                                warmup=1)
        loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0))
        obs = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
        loop.obs.write(obs, 0.0)
        cmd = loop.tick(0.0)
        assert loop.state == "ok"
        net.input[0] = obs
        np.testing.assert_allclose(cmd, np.clip(net.infer()[0], -1, 1), atol=1e-7)

    def test_observation_normalised_when_not_in_graph(self, make_bundle):
        bundle = make_bundle("nn", method="nodelay", raw_obs_input=True)
        spec, net = load_bundle(bundle, warmup=1)
        spec.observation.normalized_in_graph = False
        spec.observation.mean = [1.0, 1.0, 1.0, 1.0]
        spec.observation.std = [2.0, 2.0, 2.0, 2.0]
        loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0))
        loop.obs.write(np.full(4, 3.0, np.float32), 0.0)
        cmd = loop.tick(0.0).copy()
        net.input[0] = 1.0  # (3 - 1) / 2
        np.testing.assert_allclose(cmd, np.clip(net.infer()[0], -1, 1), atol=1e-7)

    def test_prewarm_does_not_change_commands(self, mlp_bundle):
        spec, net = load_bundle(mlp_bundle, warmup=1)

        def run(prewarm_s):
            cmds = []
            loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0),
                            sink=lambda c, t: cmds.append((t, c.copy())),
                            cfg=LoopConfig(prewarm_s=prewarm_s))
            loop.buffer.push(ramp_chunk(t0=0.0, n=10, start=-5))
            rng = np.random.default_rng(1)
            for _ in range(12):
                loop.obs.write(rng.standard_normal(4).astype(np.float32), loop.clock.now())
                loop.run_for(ticks=1)
            return cmds, loop._can_prewarm

        warm, used = run(150e-6)
        cold, _ = run(0.0)
        assert used and len(warm) == len(cold) == 12
        for (tw, cw), (tc, cc) in zip(warm, cold):
            assert tw == pytest.approx(tc) and np.array_equal(cw, cc)

    def test_no_allocation_growth_per_tick(self, mlp_bundle):
        """Steady-state ticks allocate nothing that stays. The first traced windows may grow
        by one-time allocations (Python 3.10 keeps one cached frame per code object, numpy
        1.21 caches small arrays); a per-tick leak (>= 1 B/tick) grows every window instead,
        so the last three 1000-tick windows must each grow < 1000 B."""
        spec, net = load_bundle(mlp_bundle, warmup=1)
        loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0))
        loop.obs.write(np.ones(4, np.float32), 0.0)
        loop.buffer.push(ramp_chunk(t0=0.0, n=10))
        for _ in range(500):
            loop.tick(0.05)
        gc.collect()
        tracemalloc.start()
        grown = []
        try:
            for _ in range(5):
                before = tracemalloc.get_traced_memory()[0]
                for _ in range(1000):
                    loop.tick(0.05)
                grown.append(tracemalloc.get_traced_memory()[0] - before)
        finally:
            tracemalloc.stop()
        assert loop.state == "ok"
        assert max(grown[-3:]) < 1000, f"bytes grown per 1000-tick window: {grown}"


def test_request_reset_clears_history_at_the_next_tick():
    loop = planner_loop()
    loop.buffer.push(ramp_chunk(t0=0.0, start=50.0))
    for i in range(3):
        loop.tick(i * DT)
    assert np.abs(loop._committed).max() > 0.0
    loop.request_reset()  # e.g. from a ROS callback thread: applied by the loop itself
    assert np.abs(loop._committed).max() > 0.0
    loop.buffer.clear()
    loop.tick(3 * DT)
    assert loop.state == "no_chunk"
    # the reset ran before this tick: the history holds only its (hold -> safe) command
    np.testing.assert_array_equal(loop._committed[1:], 0.0)
