"""Message <-> contract conversions and their checks (no ROS graph needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from edgerl_ros.messages import (
    BadMessage,
    TimeBase,
    chunk_to_trajectory,
    joint_state_values,
    make_joint_state,
    ns_to_stamp,
    stamp_to_ns,
    trajectory_to_chunk,
)
from edgerl_ros.stats import DropCounter, IntervalMeter, Samples

from edgerl.contract.chunk import ActionChunk

NAMES = ["x", "v", "th", "w"]


class TestJointState:
    def test_values_in_manifest_order_even_when_reordered(self):
        msg = make_joint_state(["th", "x", "w", "v"], np.array([3.0, 1.0, 4.0, 2.0]), 5)
        np.testing.assert_array_equal(joint_state_values(msg, NAMES), [1.0, 2.0, 3.0, 4.0])

    def test_wrong_length_nan_unknown_missing(self):
        msg = make_joint_state(NAMES, np.zeros(4), 1)
        msg.position = [0.0] * 5
        with pytest.raises(BadMessage, match="^wrong_length"):
            joint_state_values(msg, NAMES)
        with pytest.raises(BadMessage, match=r"^non_finite: position\[2\]"):
            joint_state_values(make_joint_state(NAMES, np.array([0, 0, np.nan, 0.0]), 1), NAMES)
        with pytest.raises(BadMessage, match="^unknown_joint"):
            joint_state_values(make_joint_state(["x", "v", "th", "bogus"], np.zeros(4), 1),
                               NAMES)
        with pytest.raises(BadMessage, match="^wrong_length.*missing"):
            joint_state_values(make_joint_state(["x", "v"], np.zeros(2), 1), NAMES)
        with pytest.raises(BadMessage, match="^wrong_length"):
            joint_state_values(make_joint_state(["x", "x", "v", "th"], np.zeros(4), 1), NAMES)

    @pytest.mark.parametrize("huge", [1e39, -1e39, 1e308])
    def test_values_that_overflow_float32_are_refused(self, huge):
        """A regression: 1e39 and 1e308 are finite as float64 and came
        back as inf float32; a 1e308 command crashed the sim robot in the soak."""
        msg = make_joint_state(NAMES, np.array([0.0, huge, 0.0, 0.0]), 1)
        with pytest.raises(BadMessage, match=r"^overflow: position\[1\]"):
            joint_state_values(msg, NAMES)
        top = float(np.finfo(np.float32).max)
        ok = joint_state_values(make_joint_state(NAMES, np.array([top, -top, 0, 0]), 1), NAMES)
        assert np.all(np.isfinite(ok))

    def test_command_field(self):
        msg = make_joint_state(["a"], np.array([0.5]), 7, field="effort")
        assert list(msg.position) == [] and list(msg.effort) == [0.5]
        assert joint_state_values(msg, ["a"], "effort")[0] == pytest.approx(0.5)


class TestTime:
    def test_stamp_round_trip(self):
        ns = 1_796_000_000_123_456_789
        assert stamp_to_ns(ns_to_stamp(ns)) == ns

    def test_timebase_round_trip_within_a_microsecond(self):
        tb = TimeBase()
        t = 12345.678901
        assert abs(tb.to_mono(tb.to_wall_ns(t)) - t) < 1e-6


class TestTrajectory:
    def test_chunk_round_trip(self):
        tb = TimeBase()
        rows = np.arange(12, dtype=np.float32).reshape(6, 2)
        chunk = ActionChunk(rows, t0=100.0, dt=0.02, obs_time=100.0)
        msg = chunk_to_trajectory(chunk, ["a", "b"], tb)
        assert [p.time_from_start.nanosec for p in msg.points[:3]] == [0, 20_000_000, 40_000_000]
        back = trajectory_to_chunk(msg, ["a", "b"], tb)
        np.testing.assert_array_equal(back.actions, rows)
        assert back.dt == pytest.approx(0.02)
        assert back.t0 == pytest.approx(100.0, abs=1e-6)
        assert back.obs_time == pytest.approx(100.0, abs=1e-6)

    def test_columns_reordered_by_joint_name(self):
        tb = TimeBase()
        chunk = ActionChunk(np.array([[1.0, 2.0], [3.0, 4.0]]), t0=5.0, dt=0.1, obs_time=5.0)
        msg = chunk_to_trajectory(chunk, ["b", "a"], tb)
        back = trajectory_to_chunk(msg, ["a", "b"], tb)
        np.testing.assert_array_equal(back.actions, [[2.0, 1.0], [4.0, 3.0]])

    def test_intent_travels_as_named_columns(self):
        tb = TimeBase()
        rows = np.arange(6, dtype=np.float32).reshape(3, 2)
        intent = np.array([0.25, -0.5, 1.0], np.float32)
        chunk = ActionChunk(rows, t0=100.0, dt=0.02, obs_time=100.0, intent=intent)
        msg = chunk_to_trajectory(chunk, ["a", "b"], tb)
        assert list(msg.joint_names) == ["a", "b", "intent/0", "intent/1", "intent/2"]
        assert all(list(p.positions[2:]) == [0.25, -0.5, 1.0] for p in msg.points)
        back = trajectory_to_chunk(msg, ["a", "b"], tb)
        np.testing.assert_array_equal(back.actions, rows)
        assert back.intent.dtype == np.float32
        np.testing.assert_array_equal(back.intent, intent)
        # the edit node splits the columns by name, in any order
        order = [4, 1, 2, 0, 3]
        msg.joint_names = [msg.joint_names[i] for i in order]
        for p in msg.points:
            p.positions = [p.positions[i] for i in order]
        back = trajectory_to_chunk(msg, ["a", "b"], tb)
        np.testing.assert_array_equal(back.actions, rows)
        np.testing.assert_array_equal(back.intent, intent)
        # without intent columns: no intent
        plain = chunk_to_trajectory(ActionChunk(rows, t0=1.0, dt=0.02, obs_time=1.0),
                                    ["a", "b"], tb)
        assert list(plain.joint_names) == ["a", "b"]
        assert trajectory_to_chunk(plain, ["a", "b"], tb).intent is None

    def test_bad_intent_columns(self):
        tb = TimeBase()
        chunk = ActionChunk(np.zeros((3, 1)), t0=1.0, dt=0.1, obs_time=1.0, intent=[0.5, 0.1])
        gap = chunk_to_trajectory(chunk, ["a"], tb)
        gap.joint_names = ["a", "intent/0", "intent/2"]
        with pytest.raises(BadMessage, match=r"^bad_chunk: intent columns"):
            trajectory_to_chunk(gap, ["a"], tb)
        differ = chunk_to_trajectory(chunk, ["a"], tb)
        differ.points[2].positions = [0.0, 0.5, 0.2]
        with pytest.raises(BadMessage, match="^bad_chunk: the intent columns differ"):
            trajectory_to_chunk(differ, ["a"], tb)
        nine = ActionChunk(np.zeros((2, 1)), t0=1.0, dt=0.1, obs_time=1.0, intent=np.zeros(8))
        msg = chunk_to_trajectory(nine, ["a"], tb)
        msg.joint_names = [*msg.joint_names, "intent/8"]
        for p in msg.points:
            p.positions = [*p.positions, 0.0]
        with pytest.raises(BadMessage, match="^bad_chunk: intent must have shape"):
            trajectory_to_chunk(msg, ["a"], tb)

    def test_bad_chunks(self):
        tb = TimeBase()
        good = chunk_to_trajectory(ActionChunk(np.zeros((3, 1)), t0=1.0, dt=0.1, obs_time=1.0),
                                   ["a"], tb)
        dec = chunk_to_trajectory(ActionChunk(np.zeros((3, 1)), t0=1.0, dt=0.1, obs_time=1.0),
                                  ["a"], tb)
        dec.points[2].time_from_start = dec.points[0].time_from_start
        with pytest.raises(BadMessage, match=r"^decreasing_times: time_from_start\[2\]"):
            trajectory_to_chunk(dec, ["a"], tb)
        with pytest.raises(BadMessage, match="^unknown_joint"):
            trajectory_to_chunk(good, ["z"], tb)
        good.points[1].positions = [1e39]  # finite float64, inf float32
        with pytest.raises(BadMessage, match="^overflow"):
            trajectory_to_chunk(good, ["a"], tb)
        good.points[1].positions = [math.nan]
        with pytest.raises(BadMessage, match="^non_finite"):
            trajectory_to_chunk(good, ["a"], tb)
        good.points = []
        with pytest.raises(BadMessage, match="^bad_chunk: no points"):
            trajectory_to_chunk(good, ["a"], tb)


class TestStats:
    def test_samples_percentiles_and_ring(self):
        s = Samples(capacity=100)
        for v in range(200):
            s.add(float(v))
        assert s.count == 200 and s.values().size == 100
        assert s.percentile(50) == pytest.approx(149.5)
        assert math.isnan(Samples().percentile(50))

    def test_interval_meter_rate_and_jitter(self):
        m = IntervalMeter(nominal_period_s=0.01)
        for i in range(101):
            m.mark(i * 0.01 + (0.001 if i == 50 else 0.0))
        assert m.rate_hz() == pytest.approx(100.0)
        assert m.jitter_p99_s() == pytest.approx(0.001, rel=0.05)

    def test_drop_counter_groups_by_kind(self):
        d = DropCounter()
        d.drop("s", "non_finite: position[0] = nan")
        d.drop("s", "non_finite: position[1] = nan")
        d.drop("c", "decreasing_times: x")
        assert d.total == 3
        assert d.by_key() == {"s non_finite": 2, "c decreasing_times": 1}


class TestRealtimeThreads:
    def _policy_of_thread_started_in(self, priority):
        import os
        import threading

        from edgerl_ros.common import RealtimeThreads

        seen = []
        with RealtimeThreads(priority) as rt:
            t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
            t.start()
        t.join()
        return rt, seen[0], os.sched_getscheduler(0)

    def test_thread_inherits_fifo_and_caller_is_restored(self):
        import os

        rt, child, caller = self._policy_of_thread_started_in(10)
        assert caller == os.SCHED_OTHER
        if rt.error is None:
            assert rt.applied and child == os.SCHED_FIFO
        else:  # no CAP_SYS_NICE: reported, nothing changed
            assert "not permitted" in rt.error and child == os.SCHED_OTHER

    def test_zero_leaves_scheduling_alone(self):
        import os

        rt, child, caller = self._policy_of_thread_started_in(0)
        assert not rt.applied and rt.error is None
        assert child == caller == os.SCHED_OTHER


class TestProcessRealtime:
    """``EDGERL_RT_PRIORITY`` (set by ``edgerl deploy --rt-priority`` for the state ->
    command nodes) makes the node process SCHED_FIFO before rclpy starts its threads."""

    def _in_thread(self, env):
        import os
        import threading

        from edgerl_ros.common import process_realtime

        seen = {}

        def run():  # a fresh thread, so the test process keeps its own policy
            seen["out"] = process_realtime(env)
            child = threading.Thread(target=lambda: seen.update(
                child=os.sched_getscheduler(0)))
            child.start()
            child.join()

        t = threading.Thread(target=run)
        t.start()
        t.join()
        return seen

    def test_priority_applies_to_threads_started_later(self):
        import os

        seen = self._in_thread({"EDGERL_RT_PRIORITY": "5"})
        out = seen["out"]
        assert out["priority"] == 5
        if out["error"] is None:
            assert out["applied"] and seen["child"] == os.SCHED_FIFO
        else:
            assert "not permitted" in out["error"] and seen["child"] == os.SCHED_OTHER
        assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the test thread untouched

    def test_unset_zero_and_bad_values(self):
        import os

        assert self._in_thread({})["out"] == {"priority": 0, "applied": False, "error": None}
        zero = self._in_thread({"EDGERL_RT_PRIORITY": "0"})
        assert not zero["out"]["applied"] and zero["child"] == os.SCHED_OTHER
        for bad in ("120", "high"):
            out = self._in_thread({"EDGERL_RT_PRIORITY": bad})["out"]
            assert not out["applied"] and "EDGERL_RT_PRIORITY" in out["error"]

    def test_deploy_gives_it_only_to_the_state_to_command_nodes(self):
        from edgerl_ros.graph import DeployConfig, DeployError, rt_env

        assert rt_env("edit_policy_node", 80) == {"EDGERL_RT_PRIORITY": "80"}
        assert rt_env("sim_robot_node", 80) == {"EDGERL_RT_PRIORITY": "80"}
        assert rt_env("planner_node", 80) == {}  # slow by design: must not starve the loop
        assert rt_env("edit_policy_node", 0) == {}
        with pytest.raises(DeployError, match="rt_priority must be 0..99"):
            DeployConfig(bundle=".", rt_priority=100)
