"""``/diagnostics`` of one node: its publisher, the timer that publishes, and the period that
changes at run time (the ``diagnostics_period_s`` parameter every node declares).

Each node supplies only what it reports: a callable returning ``(hardware_id, values, level,
message)``, published as one ``DiagnosticStatus`` named ``"edgerl: <node>"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray

from edgerl_ros.common import DIAG_QOS, TOPICS, diag_array, diag_status, replace_timer

__all__ = ["NodeDiagnostics", "Report"]

#: What a node reports: hardware id, key/values, level (0 ok, 1 warn, 2 error), message.
Report = tuple[str, dict[str, Any], int, str]


class NodeDiagnostics:
    """Publishes ``report()`` on ``/diagnostics`` every ``period_s``.

    Args:
        node: The rclpy node (or lifecycle node) that owns the publisher and the timer.
        name: The status name, ``"edgerl: <node>"``.
        period_s: Publishing period (s); :meth:`set_period` changes it.
        report: Called on every publish: ``() -> (hardware_id, values, level, message)``.
    """

    def __init__(self, node: Any, name: str, period_s: float,
                 report: Callable[[], Report]) -> None:
        self.node = node
        self.name = name
        self._report = report
        self.pub = node.create_publisher(DiagnosticArray, TOPICS["diagnostics"], DIAG_QOS)
        self.timer = node.create_timer(float(period_s), self.publish)

    def set_period(self, period_s: float) -> None:
        """A new publishing period (s), from now on (rclpy timers cannot change in place)."""
        self.timer = replace_timer(self.node, self.timer, period_s, self.publish)

    def publish(self) -> None:
        """Publish the node's report now (the timer's callback)."""
        hardware_id, values, level, message = self._report()
        self.pub.publish(diag_array(self.node, [diag_status(self.name, hardware_id, values,
                                                            level, message)]))

    def close(self) -> None:
        """Destroy the timer and the publisher (a lifecycle node's cleanup)."""
        self.node.destroy_timer(self.timer)
        self.node.destroy_publisher(self.pub)
