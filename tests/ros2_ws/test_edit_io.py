"""edit_policy_node's inputs over real rclpy (``edgerl_ros.edit_io``): episode resets
(stamped ahead: refused; chunks planned before a reset: not executed after it) and the
operator's e-stop re-arm (fresh: released; replayed: refused)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.helpers.edit_node_graph import drive, wait_for

pytestmark = pytest.mark.ros


class TestEpisodeReset:
    def test_a_reset_stamped_an_hour_ahead_is_refused(self, graph):
        """A regression found by the soak: a robot/episode header stamped
        1 h ahead was taken as the newest reset, so every chunk was "planned before the
        reset" and dropped for an hour, and real resets were ignored as out of order."""
        from edgerl_ros.common import EPISODE_QOS, TOPICS
        from edgerl_ros.messages import ns_to_stamp
        from rclpy.lifecycle import TransitionCallbackReturn as R
        from std_msgs.msg import Header

        node, probe = graph
        assert node.call(node.trigger_configure) == R.SUCCESS
        assert node.call(node.trigger_activate) == R.SUCCESS
        episode_pub = probe.node.create_publisher(Header, TOPICS["episode"], EPISODE_QOS)
        drive(probe, 0.3)
        ahead = Header(frame_id="x", stamp=ns_to_stamp(time.time_ns() + 3600 * 10**9))
        for _ in range(20):  # until discovery has happened and it was seen
            episode_pub.publish(ahead)
            if wait_for(lambda: node.drops.by_key().get("robot/episode future"), 0.2):
                break
        assert node.drops.by_key().get("robot/episode future", 0) >= 1
        assert node.episode_resets == 0 and node.reset_stamp_ns == 0
        real = Header(frame_id="1", stamp=ns_to_stamp(time.time_ns()))
        episode_pub.publish(real)
        assert wait_for(lambda: node.episode_resets == 1), "the real reset was ignored"
        drive(probe, 0.5)  # chunks planned after the real reset are executed again
        assert node.loop.state == "ok" and node.chunks_dropped_pre_reset == 0

    def test_chunks_planned_before_a_reset_are_not_executed_after_it(self, graph):
        from edgerl_ros.common import EPISODE_QOS, TOPICS
        from edgerl_ros.messages import chunk_to_trajectory, ns_to_stamp
        from rclpy.lifecycle import TransitionCallbackReturn as R
        from std_msgs.msg import Header

        from edgerl.contract.chunk import ActionChunk

        node, probe = graph
        assert node.call(node.trigger_configure) == R.SUCCESS
        assert node.call(node.trigger_activate) == R.SUCCESS
        episode_pub = probe.node.create_publisher(Header, TOPICS["episode"], EPISODE_QOS)
        states = list(node.loop.metrics.summary()["states"])
        ok = states.index("ok")

        horizon = node.spec.timing.horizon  # longer chunks are refused (too_long)

        def old_chunk(value):  # planned from a state of the episode about to end
            t_obs = time.perf_counter()
            chunk = ActionChunk(np.full((horizon, 1), value), t0=t_obs, dt=0.02,
                                obs_time=t_obs)
            return chunk_to_trajectory(chunk, ["cart_force"], probe.tb)

        drive(probe, 0.6)  # the old episode: states and fresh chunks, loop ok
        assert node.loop.state == "ok"
        # an in-flight chunk of the old episode, usable for (H + stale) steps: only the reset
        # makes it unusable (without the reset the loop would execute it)
        stale = old_chunk(0.7)
        time.sleep(0.005)
        reset = Header(frame_id="1")
        reset.stamp = ns_to_stamp(time.time_ns())
        episode_pub.publish(reset)
        assert wait_for(lambda: node.episode_resets == 1), "reset not received"
        assert node.loop.buffer.latest() is None  # the old episode's chunk is gone
        probe.chunk_pub.publish(stale)  # arrives after the reset
        assert wait_for(lambda: node.chunks_dropped_pre_reset == 1), "stale chunk not dropped"
        probe.publish_state()
        time.sleep(0.1)  # a few ticks: the loop has applied the reset
        ok0, t_cut = node.loop.metrics.state_counts[ok], time.perf_counter()
        for _ in range(25):  # the new episode's states, no new chunk yet
            probe.publish_state()
            time.sleep(0.02)
        assert node.loop.buffer.latest() is None
        assert node.loop.state == "no_chunk"
        assert node.loop.metrics.state_counts[ok] == ok0  # never ran on the stale chunk
        after = [m.effort[0] for t, m in probe.commands if t > t_cut]
        assert len(after) >= 15
        assert all(abs(v - 0.7) > 0.3 for v in after), after
        assert node.values()["chunks_dropped_pre_reset"] == 1

        # a chunk planned from a post-reset state is taken and executed
        fresh = old_chunk(0.7)
        probe.chunk_pub.publish(fresh)
        assert wait_for(lambda: node.loop.state == "ok"), node.loop.state
        t_new = time.perf_counter()
        for _ in range(10):
            probe.publish_state()
            time.sleep(0.02)
        followed = [m.effort[0] for t, m in probe.commands if t > t_new + 0.05]
        assert followed and all(abs(v - 0.7) < 0.3 for v in followed), followed
        assert node.chunks_dropped_pre_reset == 1


class TestOperatorRearm:
    def test_only_a_fresh_signed_reset_releases_the_latch(self, graph):
        """``robot/estop_reset``: a fresh reset signed with the operator key re-arms (the
        ladder restarts at ok). Refused and counted by reason, the latch holding: an unsigned
        reset from another node, one signed with another key, a forged tag, the signed reset
        replayed, and a signed reset stamped 10 s ago."""
        from edgerl_ros.common import CHUNK_QOS, TOPICS
        from edgerl_ros.messages import ns_to_stamp
        from edgerl_ros.operator import OperatorPublisher
        from rclpy.lifecycle import TransitionCallbackReturn as R
        from std_msgs.msg import Header

        from edgerl.contract.operator_auth import OperatorKey

        node, probe = graph
        assert node.call(node.trigger_configure) == R.SUCCESS
        assert node.call(node.trigger_activate) == R.SUCCESS
        pub = probe.node.create_publisher(Header, TOPICS["estop_reset"], CHUNK_QOS)
        stranger = OperatorPublisher(probe.node, OperatorKey.generate("test-operator"))
        topic = TOPICS["estop_reset"]

        def dropped(reason):
            return node.drops.by_key().get(f"{topic} {reason}", 0)

        def refused(send, reason):
            before = dropped(reason)
            send()
            t_end = time.monotonic() + 5.0
            while dropped(reason) == before and time.monotonic() < t_end:
                time.sleep(0.02)
            assert dropped(reason) == before + 1, node.drops.by_key()
            assert node.loop.safety.estopped and node.estop_resets == 1

        t_end = time.monotonic() + 10.0  # discovery: until a reset gets through
        node.loop.estop("test")
        while node.estop_resets == 0 and time.monotonic() < t_end:
            signed = probe.operator.rearm()
            time.sleep(0.1)
        assert node.estop_resets == 1 and not node.loop.safety.estopped
        node.loop.estop("test again")

        def unsigned():
            msg = Header()
            msg.stamp = ns_to_stamp(time.time_ns())
            pub.publish(msg)

        def forged():
            stamp = time.time_ns()
            tag = probe.operator.signer.tag(topic, stamp)
            head = Header(frame_id=tag[:-4] + ("0000" if not tag.endswith("0000") else "1111"))
            head.stamp = ns_to_stamp(stamp)
            pub.publish(head)

        refused(unsigned, "unsigned")
        refused(stranger.rearm, "bad_signature")
        refused(forged, "bad_signature")
        refused(lambda: pub.publish(signed), "replayed")
        refused(lambda: probe.operator.rearm(time.time_ns() - 10 * 10**9), "stale")
        probe.operator.rearm()
        assert wait_for(lambda: node.estop_resets == 2) and not node.loop.safety.estopped
        vals = node.values()
        assert vals["operator_key"] == "test-operator" and vals["operator_accepted"] >= 2
        assert vals["operator_refused unsigned"] == 1 and vals["operator_refused replayed"] == 1
        assert node.call(node.trigger_deactivate) == R.SUCCESS


def test_commands_handed_to_a_composed_robot_are_marked_in_process(graph):
    """A command the edit node hands to a composed robot (``command_link``) is published
    marked ``IN_PROCESS_FRAME`` also when a loop thread ticks (clock trigger, this bundle):
    robot nodes' content filter then keeps it from waking their executor. Before the link is
    set, commands go out unmarked (a robot in another process must execute them)."""
    from edgerl_ros.composition import IN_PROCESS_FRAME
    from rclpy.lifecycle import TransitionCallbackReturn as R

    node, probe = graph
    assert node.call(node.trigger_configure) == R.SUCCESS
    assert node.call(node.trigger_activate) == R.SUCCESS
    assert node.loop.trigger == "clock" and node._inline is None
    drive(probe, 0.4)
    before = [m.header.frame_id for _, m in probe.commands]
    assert before and set(before) == {""}
    handed: list[int] = []
    n0 = len(probe.commands)
    node.command_link = lambda command, stamp: handed.append(stamp)
    drive(probe, 0.4)
    later = [m.header.frame_id for _, m in probe.commands[n0:]]  # all published with the link
    node.command_link = None
    assert len(handed) >= 5 and len(later) >= 5
    assert set(later[1:]) == {IN_PROCESS_FRAME}  # [0] may predate the link
