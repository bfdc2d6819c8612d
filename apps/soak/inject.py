"""Bad messages on every topic of the deploy graph, in rotation (rclpy; used by the soak).

Each kind is something a node must refuse (and count) rather than act on: non-finite and huge
values (1e308, and 1e39, which overflows float32), stamps 10 s old, zero or 1 h ahead, wrong
sizes, unknown names, an oversized chunk, an over-long instruction, an episode reset
stamped in the future, a valid command from a node other than the edit node, and e-stop
re-arms and interventions unsigned or forged (signed with a wrong secret under the
operator's key id).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import numpy as np

__all__ = ["BadMessageInjector", "KINDS"]

#: (topic key, kind) in the order they are sent.
KINDS: tuple[tuple[str, str], ...] = (
    ("state", "nan"), ("state", "huge"), ("state", "f32_overflow"), ("state", "stale_stamp"),
    ("state", "future_stamp"), ("state", "zero_stamp"), ("state", "wrong_size"),
    ("state", "unknown_names"),
    ("chunk", "nan"), ("chunk", "huge"), ("chunk", "stale_stamp"), ("chunk", "future_stamp"),
    ("chunk", "wrong_size"), ("chunk", "decreasing_times"), ("chunk", "oversized"),
    ("command", "nan"), ("command", "huge"), ("command", "stale_stamp"),
    ("command", "future_stamp"), ("command", "zero_stamp"), ("command", "wrong_size"),
    ("instruction", "oversized"), ("episode", "future_stamp"),
    # valid messages from the wrong sender: another node's command, operator messages
    # unsigned or signed with a guessed secret under the operator's key id
    ("command", "foreign_valid"), ("estop_reset", "unsigned"), ("estop_reset", "forged"),
    ("intervention", "unsigned"), ("intervention", "forged"),
)

STALE_S = 10.0
FUTURE_S = 3600.0
OVERSIZED_POINTS = 5000


class BadMessageInjector:
    """Publishes one bad message per :meth:`send_one` call, cycling through :data:`KINDS`.

    Args:
        node: The rclpy node to publish from.
        obs_names: The manifest's observation names (state messages).
        action_names: The manifest's action names (chunks and commands).
        command_field: JointState field that carries the command.
        forge_key_id: Key id the forged operator messages claim (the real operator's).
    """

    def __init__(self, node: Any, obs_names: list[str], action_names: list[str],
                 command_field: str = "effort", forge_key_id: str = "operator") -> None:
        from edgerl_ros.common import (
            CHUNK_QOS,
            COMMAND_QOS,
            EPISODE_QOS,
            INSTRUCTION_QOS,
            INTERVENTION_QOS,
            STATE_QOS,
            TOPICS,
        )
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Header, String
        from trajectory_msgs.msg import JointTrajectory

        self.pubs = {
            "state": node.create_publisher(JointState, TOPICS["state"], STATE_QOS),
            "chunk": node.create_publisher(JointTrajectory, TOPICS["chunk"], CHUNK_QOS),
            "command": node.create_publisher(JointState, TOPICS["command"], COMMAND_QOS),
            "instruction": node.create_publisher(String, TOPICS["instruction"],
                                                 INSTRUCTION_QOS),
            "episode": node.create_publisher(Header, TOPICS["episode"], EPISODE_QOS),
            "estop_reset": node.create_publisher(Header, TOPICS["estop_reset"],
                                                 INTERVENTION_QOS),
            "intervention": node.create_publisher(JointState, TOPICS["intervention"],
                                                  INTERVENTION_QOS),
        }
        from edgerl.contract.operator_auth import OperatorKey, OperatorSigner

        self._forger = OperatorSigner(OperatorKey.generate(forge_key_id))
        self._topics = TOPICS
        self.obs_names, self.action_names = list(obs_names), list(action_names)
        self.command_field = command_field
        self.sent: Counter[str] = Counter()  # "topic kind" -> messages
        self._i = 0
        self._oversized: Any = None  # built once (5000 points take ~0.1 s), re-stamped

    @property
    def total(self) -> int:
        return sum(self.sent.values())

    def send_one(self) -> tuple[str, str]:
        """Publish the next bad message; returns its ``(topic key, kind)``."""
        topic, kind = KINDS[self._i % len(KINDS)]
        self._i += 1
        self.pubs[topic].publish(self.build(topic, kind, time.time_ns()))
        self.sent[f"{topic} {kind}"] += 1
        return topic, kind

    # --- message builders --------------------------------------------------------------------
    def build(self, topic: str, kind: str, now_ns: int) -> Any:
        """The bad message ``kind`` for ``topic`` stamped relative to ``now_ns`` (wall ns)."""
        stamp = {"stale_stamp": now_ns - int(STALE_S * 1e9), "zero_stamp": 0,
                 "future_stamp": now_ns + int(FUTURE_S * 1e9)}.get(kind, now_ns)
        if topic in ("estop_reset", "intervention"):
            return self._operator_message(topic, kind, stamp)
        if topic in ("state", "command"):
            return self._joint_state(topic, kind, stamp)
        if topic == "chunk":
            return self._chunk(kind, stamp)
        if topic == "instruction":
            from std_msgs.msg import String

            return String(data="pick the red cube " * 4096)  # 72 KiB
        from edgerl_ros.messages import ns_to_stamp
        from std_msgs.msg import Header

        return Header(stamp=ns_to_stamp(stamp), frame_id="soak")

    def _operator_message(self, topic: str, kind: str, stamp: int) -> Any:
        """A fresh re-arm or override, ``unsigned`` or ``forged``."""
        from edgerl_ros.messages import make_joint_state, ns_to_stamp
        from std_msgs.msg import Header

        from edgerl.contract.operator_auth import intervention_payload

        values = np.zeros(len(self.action_names), np.float32)
        if topic == "estop_reset":
            msg = header = Header(stamp=ns_to_stamp(stamp))
            payload = b""
        else:
            msg = make_joint_state(["override"], values, stamp)
            header, payload = msg.header, intervention_payload("override", values)
        if kind == "forged":
            header.frame_id = self._forger.tag(self._topics[topic], stamp, payload)
        return msg

    def _values(self, kind: str, n: int) -> np.ndarray:
        vals = np.zeros(n)
        if kind == "nan":
            vals[0] = np.nan
        elif kind == "huge":
            vals[:] = 1e308
        elif kind == "f32_overflow":
            vals[:] = 1e39
        return vals

    def _joint_state(self, topic: str, kind: str, stamp: int) -> Any:
        from edgerl_ros.messages import make_joint_state

        names = self.obs_names if topic == "state" else self.action_names
        field = "position" if topic == "state" else self.command_field
        if kind == "unknown_names":
            names = [f"bogus_{i}" for i in range(len(names))]
        n = len(names) + (1 if kind == "wrong_size" else 0)
        return make_joint_state(names, self._values(kind, n), stamp, field)

    def _chunk(self, kind: str, stamp: int) -> Any:
        from builtin_interfaces.msg import Duration
        from edgerl_ros.messages import ns_to_stamp
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        if kind == "oversized" and self._oversized is not None:
            self._oversized.header.stamp = ns_to_stamp(stamp)
            return self._oversized
        msg = JointTrajectory()
        msg.header.stamp = ns_to_stamp(stamp)
        msg.joint_names = list(self.action_names)
        a = len(self.action_names)
        points = OVERSIZED_POINTS if kind == "oversized" else 10
        times = [0.01 * (i + 1) for i in range(points)]
        if kind == "decreasing_times":
            times[2], times[3] = times[3], times[2]
        for i, t in enumerate(times):
            pt = JointTrajectoryPoint()
            row = self._values(kind, a) if i == 0 else np.zeros(a)
            pt.positions = [float(v) for v in row] + ([0.0] if kind == "wrong_size" else [])
            pt.time_from_start = Duration(sec=int(t), nanosec=int(round((t % 1.0) * 1e9)))
            msg.points.append(pt)
        if kind == "oversized":
            self._oversized = msg
        return msg
