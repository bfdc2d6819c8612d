"""``GraphMonitor``: the deploy process's own rclpy node. It measures the edit node's command
stream (rate, stamp -> arrival latency), collects every node's ``/diagnostics`` and records
the session's topics to MCAP (raw CDR, as received).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["GraphMonitor"]


class GraphMonitor:
    """An rclpy node in the deploy process: measures the command stream, collects
    diagnostics and records MCAP."""

    RECORDED = {
        "state": "sensor_msgs/msg/JointState",
        "command": "sensor_msgs/msg/JointState",
        "chunk": "trajectory_msgs/msg/JointTrajectory",
        "instruction": "std_msgs/msg/String",
        "episode": "std_msgs/msg/Header",
        "intervention": "sensor_msgs/msg/JointState",
        "diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    }

    def __init__(self, node: Any, record: Path | None) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.serialization import deserialize_message
        from sensor_msgs.msg import JointState

        from edgerl_ros.common import (
            CHUNK_QOS,
            DIAG_QOS,
            EPISODE_QOS,
            INSTRUCTION_QOS,
            INTERVENTION_QOS,
            STATE_QOS,
            TOPICS,
        )
        from edgerl_ros.recording import McapRecorder
        from edgerl_ros.session import qos_kwargs
        from edgerl_ros.sources import PublisherFilter

        self.node = node
        #: only the edit node's commands count in rate and latency (anyone may publish on
        #: robot/command); the others are counted in ``commands_foreign``
        self.command_source = PublisherFilter(node, TOPICS["command"], "edit_policy_node")
        self._deser = deserialize_message
        self._types = {"command": JointState, "diagnostics": DiagnosticArray}
        self.recorder = McapRecorder(record) if record is not None else None
        self.cmd_times: list[float] = []
        self.first_stamped: float | None = None
        self.cmd_latency_s: list[float] = []
        self.diag_msgs = 0
        self.diag: dict[str, dict[str, str]] = {}
        self.lock = threading.Lock()
        qos = {"state": STATE_QOS, "command": STATE_QOS, "chunk": CHUNK_QOS,
               "instruction": INSTRUCTION_QOS, "episode": EPISODE_QOS,
               "diagnostics": DIAG_QOS, "intervention": INTERVENTION_QOS}
        from rclpy.qos import QoSProfile

        for key, datatype in self.RECORDED.items():
            topic = TOPICS[key]
            full = topic if topic.startswith("/") else "/" + topic
            if self.recorder is not None:
                self.recorder.add_topic(full, datatype)
            msg_type = self._msg_type(datatype)
            # same reliability/durability as the publishers, but a deep queue: the monitor
            # records every message and must not lose any to its own scheduling
            kw = {**qos_kwargs(qos[key]), "depth": 500}
            node.create_subscription(msg_type, topic, self._callback(key, full),
                                     QoSProfile(**kw), raw=True)

    @staticmethod
    def _msg_type(datatype: str) -> Any:
        import importlib

        pkg, _, name = datatype.split("/")
        return getattr(importlib.import_module(f"{pkg}.msg"), name)

    def _callback(self, key: str, topic: str) -> Callable[[bytes, Any], None]:
        def cb(data: bytes, info: Any) -> None:
            now_ns = time.time_ns()
            if self.recorder is not None:
                self.recorder.write(topic, data, now_ns)
            if key == "command" and self.command_source.accept(info):
                from edgerl_ros.messages import stamp_to_ns

                msg = self._deser(data, self._types["command"])
                stamp = stamp_to_ns(msg.header.stamp)
                with self.lock:
                    if stamp > 0 and self.first_stamped is None:
                        self.first_stamped = time.perf_counter()
                    self.cmd_times.append(time.perf_counter())
                    self.cmd_latency_s.append((now_ns - stamp) * 1e-9 if stamp > 0
                                              else float("nan"))
            elif key == "diagnostics":
                msg = self._deser(data, self._types["diagnostics"])
                with self.lock:
                    self.diag_msgs += 1
                    for st in msg.status:
                        self.diag[st.name] = {kv.key: kv.value for kv in st.values}
        return cb

    def first_command_time(self) -> float | None:
        """When the first command computed from a real (stamped) state arrived."""
        with self.lock:
            return self.first_stamped

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
