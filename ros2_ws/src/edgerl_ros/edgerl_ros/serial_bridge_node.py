"""``serial_bridge_node``: ROS 2 <-> the edgerl firmware serial protocol.

A thin shell over :class:`edgerl.runtime.serial_transport.SerialTransport` (COBS frames,
CRC, schema-hash handshake, reconnect with backoff):

* each firmware STATE becomes a ``robot/joint_states`` ``JointState`` (names = the bundle's
  observation names, values in ``position``; stamp = host receive time minus the firmware's
  reported sensor age), published from the transport's reader thread;
* each ``robot/command`` ``JointState`` (names checked against the bundle's action names)
  becomes one absolute SETPOINT; malformed commands are dropped and counted, and so are
  commands the manifest's bounds refuse (:class:`edgerl.runtime.input_guard.InputGuard`:
  stamped longer than ``timing.command_max_age_s`` ago, zero-stamped, stamped ahead, non-finite
  or outside ``action.low/high``): they never reach the firmware, whose watchdog then stops;
* ``robot/estop`` (``std_msgs/Bool``): ``true`` latches the firmware e-stop, ``false`` clears it;
* ``/diagnostics``: link state, frames, bad/lost frames, setpoints sent/acked, command
  round-trip p50/p99 (firmware echo), dropped messages.

``command_field`` and ``diagnostics_period_s`` apply at run time; the other parameters are
refused with a reason.

The same nodes as in simulation (planner + edit policy) then drive real firmware unchanged.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from edgerl_ros.common import (
    COMMAND_QOS,
    DIAG_QOS,
    STATE_QOS,
    TOPICS,
    ParamSpec,
    declare_with_bundle,
    diag_array,
    diag_status,
    refuse_unless_live,
    replace_timer,
    run_node,
)
from edgerl_ros.messages import (
    COMMAND_FIELDS,
    BadMessage,
    joint_state_values,
    make_joint_state,
    stamp_to_ns,
)
from edgerl_ros.stats import DropCounter

__all__ = ["PARAMS", "SerialBridgeNode", "main"]

log = logging.getLogger(__name__)

ESTOP_TOPIC = "robot/estop"

PARAMS = [
    ParamSpec("port", "", "serial device (pty slave, /dev/ttyACM0...)", read_only=True),
    ParamSpec("bundle", "", "bundle whose manifest names the state and command elements",
              read_only=True),
    ParamSpec("baudrate", 1_000_000, "UART baud rate (ignored by ptys/USB-CDC)", 1200, 20_000_000,
              read_only=True),
    ParamSpec("command_field", "effort", "JointState field holding the command",
              choices=COMMAND_FIELDS),
    ParamSpec("diagnostics_period_s", 1.0, "how often /diagnostics is published", 0.05, 60.0),
]


class SerialBridgeNode(Node):
    """See the module docstring. Connects at construction; :meth:`shutdown` closes the port."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("serial_bridge_node", **kwargs)
        p, spec = declare_with_bundle(self, PARAMS, self._apply_params,
                                      required=("port", "bundle"))
        from edgerl.runtime.input_guard import InputGuard
        from edgerl.runtime.serial_transport import SerialConfig, SerialTransport

        self.guard = InputGuard(spec)
        self.obs_names = spec.observation.names
        self.action_names = spec.action.names
        self.command_field = p["command_field"]
        self.drops = DropCounter()
        self.states_published = 0
        self.state_pub = self.create_publisher(JointState, TOPICS["state"], STATE_QOS)
        self.diag_pub = self.create_publisher(DiagnosticArray, TOPICS["diagnostics"], DIAG_QOS)
        self.transport = SerialTransport(SerialConfig(port=p["port"], baudrate=p["baudrate"]),
                                         on_state=self._on_fw_state)
        self.hello = self.transport.connect()
        self.create_subscription(JointState, TOPICS["command"], self._on_command, COMMAND_QOS)
        self.create_subscription(Bool, ESTOP_TOPIC, self._on_estop, 10)
        self._diag_timer = self.create_timer(float(p["diagnostics_period_s"]),
                                             self._publish_diagnostics)
        self.get_logger().info(f"serial bridge: {p['port']} linked ({self.hello})")

    def _apply_params(self, changed: dict[str, Any]) -> str | None:
        reason = refuse_unless_live(changed, {"command_field", "diagnostics_period_s"})
        if reason is None:
            if "command_field" in changed:
                self.command_field = changed["command_field"]
            if "diagnostics_period_s" in changed:
                self._diag_timer = replace_timer(self, self._diag_timer,
                                                 changed["diagnostics_period_s"],
                                                 self._publish_diagnostics)
        return reason

    def _on_fw_state(self, sample: Any) -> None:
        """Reader-thread callback: one firmware STATE -> one JointState."""
        state = sample.state
        if state.shape[0] != len(self.obs_names):
            self.drops.drop("serial STATE", f"wrong_length: {state.shape[0]} values for "
                            f"{len(self.obs_names)} names")
            return
        age_ns = int(sample.sensor_age_us) * 1000 + int((time.perf_counter() - sample.t_host)
                                                        * 1e9)
        self.state_pub.publish(make_joint_state(self.obs_names, state, time.time_ns() - age_ns))
        self.states_published += 1

    def _on_command(self, msg: JointState) -> None:
        try:
            values = joint_state_values(msg, self.action_names, self.command_field)
        except BadMessage as exc:
            self.drops.drop(TOPICS["command"], str(exc))
            return
        stamp = stamp_to_ns(msg.header.stamp)
        reason = self.guard.check_command(values, stamp * 1e-9 if stamp > 0 else None,
                                          time.time_ns() * 1e-9)
        if reason is not None:  # never sent: the firmware watchdog stops instead
            self.drops.drop(TOPICS["command"], reason)
            return
        try:
            seq = self.transport.send_setpoint(values)
        except (OSError, ValueError, TypeError) as exc:
            self.drops.drop(TOPICS["command"], f"send_failed: {exc}")
            return
        if seq < 0:
            self.drops.drop(TOPICS["command"], "link_down: setpoint not sent")

    def _on_estop(self, msg: Bool) -> None:
        if msg.data:
            self.transport.estop()
            self.get_logger().warning("e-stop latched on request")
        else:
            self.transport.clear_estop()
            self.get_logger().info("e-stop cleared on request")

    def values(self) -> dict[str, Any]:
        stats = self.transport.stats().as_dict()
        return {**stats, "states_published": self.states_published,
                "dropped_bad_msgs": self.drops.total,
                **{f"dropped {k}": v for k, v in self.drops.by_key().items()}}

    def _publish_diagnostics(self) -> None:
        vals = self.values()
        level, message = 0, "ok"
        if not vals["connected"]:
            level, message = 2, "serial link down"
        elif self.drops.total:
            level, message = 1, self.drops.last_reason
        self.diag_pub.publish(diag_array(self, [diag_status(
            "edgerl: serial_bridge_node", self.transport.cfg.port, vals, level, message)]))

    def shutdown(self) -> None:
        self.transport.close()


def main(args: list[str] | None = None) -> int:
    return run_node(SerialBridgeNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
