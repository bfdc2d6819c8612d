"""``serial_bridge_node``: ROS 2 <-> the edgerl firmware serial protocol.

A thin shell over :class:`edgerl.runtime.serial_transport.SerialTransport` (COBS frames,
CRC, schema-hash handshake, reconnect with backoff):

* each new plant state from the firmware becomes a ``robot/joint_states`` ``JointState``
  (names = the bundle's observation names, values in ``position``; stamp = host receive time
  minus the firmware's reported sensor age), published from the transport's reader thread.
  The firmware sends a STATE when it senses a sample and repeats the newest one in each
  setpoint's echo and at its state period; only the first STATE of a sensor sample (a new
  ``StateSample.sensor_stamp_us``) is published, so a state-triggered edit node computes one
  command per sensor sample, not one more per echo of its own last command;
* each ``robot/command`` ``JointState`` (names checked against the bundle's action names)
  becomes one absolute SETPOINT; malformed commands are dropped and counted, and so are
  commands the manifest's bounds refuse (:class:`edgerl.runtime.input_guard.InputGuard`:
  stamped longer than ``timing.command_max_age_s`` ago, zero-stamped, stamped ahead, non-finite
  or outside ``action.low/high``): they never reach the firmware, whose watchdog then stops;
* ``robot/estop`` (``std_msgs/Bool``): ``true`` latches the firmware e-stop (anyone may stop the
  robot); ``false`` is refused and counted: the firmware e-stop is cleared only by an operator
  re-arm on ``robot/estop_reset`` signed with the operator key (:mod:`edgerl_ros.operator`);
* ``robot/command`` is executed only from the edit node's publishers (``command_source``);
* ``/diagnostics``: link state, frames, bad/lost frames, setpoints sent/acked, command
  round-trip p50/p99 (firmware echo), dropped messages.

``command_field`` and ``diagnostics_period_s`` apply at run time; the other parameters are
refused with a reason.

The same nodes as in simulation (planner + edit policy) then drive real firmware unchanged.

Composed with the edit node in one process (``edgerl deploy --robot serial --compose``), a
:class:`~edgerl_ros.composition.ComposedLink` set as :attr:`link` gets each firmware state in
the reader thread before it is published, and the edit node's command comes back through
:meth:`accept_command` (the same checks) straight into a SETPOINT: no middleware between the
firmware's state and its next setpoint. ``e2e_latency_p50_us``/``p99`` on ``/diagnostics``:
state stamp -> setpoint sent, first answer to each state (the edit node's commands only).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Header

from edgerl_ros.common import (
    COMMAND_QOS,
    INTERVENTION_QOS,
    STATE_QOS,
    TOPICS,
    ParamSpec,
    declare_with_bundle,
    refuse_unless_live,
    run_node,
)
from edgerl_ros.messages import (
    COMMAND_FIELDS,
    make_joint_state,
)
from edgerl_ros.node_diagnostics import NodeDiagnostics, Report
from edgerl_ros.operator import COMMAND_SOURCE_PARAM, OPERATOR_PARAMS, OperatorGate
from edgerl_ros.robot_commands import ComposableCommands, guard_passes
from edgerl_ros.stats import AnswerLatency, DropCounter

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
    COMMAND_SOURCE_PARAM,
    *OPERATOR_PARAMS,
]


class SerialBridgeNode(ComposableCommands, Node):
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
        #: STATEs that repeated an already published sensor sample (not published).
        self.states_repeated = 0
        self.estops_requested = 0  # robot/estop true
        self.estop_clears = 0  # signed robot/estop_reset applied
        self._last_sensor_stamp: int | None = None
        self.latency = AnswerLatency()  # e2e, first answer to each state
        #: In-process edit node (composed): gets each state before it is published.
        self.link: Any = None
        self.state_pub = self.create_publisher(JointState, TOPICS["state"], STATE_QOS)
        self.transport = SerialTransport(SerialConfig(port=p["port"], baudrate=p["baudrate"]),
                                         on_state=self._on_fw_state)
        self.hello = self.transport.connect()
        # only the edit node's commands are sent (command_source; others: 'foreign')
        self._subscribe_commands(COMMAND_QOS, p["command_source"])
        self.operator = OperatorGate(p["operator_key_file"], p["operator_auth"])
        self.create_subscription(Bool, ESTOP_TOPIC, self._on_estop, 10)
        self.create_subscription(Header, TOPICS["estop_reset"], self._on_estop_reset,
                                 INTERVENTION_QOS)
        self.diagnostics = NodeDiagnostics(self, "edgerl: serial_bridge_node",
                                           p["diagnostics_period_s"], self._report)
        self.get_logger().info(f"serial bridge: {p['port']} linked ({self.hello})")

    def _apply_params(self, changed: dict[str, Any]) -> str | None:
        reason = refuse_unless_live(changed, {"command_field", "diagnostics_period_s"})
        if reason is None:
            if "command_field" in changed:
                self.command_field = changed["command_field"]
            if "diagnostics_period_s" in changed:
                self.diagnostics.set_period(changed["diagnostics_period_s"])
        return reason

    def _on_fw_state(self, sample: Any) -> None:
        """Reader-thread callback: the first firmware STATE of a sensor sample -> one
        JointState (repeats of that sample are counted, not published)."""
        state = sample.state
        if sample.sensor_stamp_us == self._last_sensor_stamp:
            self.states_repeated += 1
            return
        if state.shape[0] != len(self.obs_names):
            self.drops.drop("serial STATE", f"wrong_length: {state.shape[0]} values for "
                            f"{len(self.obs_names)} names")
            return
        age_ns = int(sample.sensor_age_us) * 1000 + int((time.perf_counter() - sample.t_host)
                                                        * 1e9)
        stamp = time.time_ns() - age_ns
        self._last_sensor_stamp = sample.sensor_stamp_us
        if self.link is not None:  # the composed edit node ticks on it first
            self.link.state(state, stamp)
        self.state_pub.publish(make_joint_state(self.obs_names, state, stamp))
        self.states_published += 1

    def accept_command(self, values: np.ndarray, stamp_ns: int, now_ns: int | None = None,
                       from_edit: bool = True) -> bool:
        """Send ``values`` (``(A,)``, the bundle's action order), computed from the state
        stamped ``stamp_ns`` (ns, wall clock), as one SETPOINT after the guard's checks;
        called by :meth:`_on_command` and by a composed edit node. Returns whether it was
        sent (refusals and link errors are counted under their reason)."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        if not guard_passes(self.guard, self.drops, values, stamp_ns, now_ns):
            return False  # never sent: the firmware watchdog stops instead
        try:
            seq = self.transport.send_setpoint(values)
        except (OSError, ValueError, TypeError) as exc:
            self.drops.drop(TOPICS["command"], f"send_failed: {exc}")
            return False
        if seq < 0:
            self.drops.drop(TOPICS["command"], "link_down: setpoint not sent")
            return False
        if from_edit:
            self.latency.answer(stamp_ns, time.time_ns())
        return True

    def _on_estop(self, msg: Bool) -> None:
        """``robot/estop`` true: latch the firmware e-stop (anyone may stop the robot).
        False is refused and counted: only a signed ``robot/estop_reset`` clears it."""
        if msg.data:
            self.transport.estop()
            self.estops_requested += 1
            self.get_logger().warning("e-stop latched on request")
        else:
            self.drops.drop(ESTOP_TOPIC, "clear_refused: clear the e-stop with a signed "
                                         f"{TOPICS['estop_reset']}")

    def _on_estop_reset(self, msg: Header) -> None:
        """Operator re-arm (signed ``robot/estop_reset``, :mod:`edgerl_ros.operator`): clear
        the firmware e-stop; the firmware then outputs the safe action until a fresh setpoint
        arrives. Refusals are counted by reason."""
        reason = self.operator.check(TOPICS["estop_reset"], msg)
        if reason is not None:
            self.drops.drop(TOPICS["estop_reset"], reason)
            return
        self.transport.clear_estop()
        self.estop_clears += 1
        self.get_logger().info("e-stop cleared by the operator")

    def values(self) -> dict[str, Any]:
        stats = self.transport.stats().as_dict()
        return {**stats, "states_published": self.states_published,
                "states_repeated": self.states_repeated,
                "e2e_latency_p50_us": self.latency.percentile(50) * 1e6,
                "e2e_latency_p99_us": self.latency.percentile(99) * 1e6,
                "estops_requested": self.estops_requested, "estop_clears": self.estop_clears,
                **self.operator.values(), **self.drops.values()}

    def _report(self) -> Report:
        vals = self.values()
        level, message = 0, "ok"
        if not vals["connected"]:
            level, message = 2, "serial link down"
        elif self.drops.total:
            level, message = 1, self.drops.last_reason
        return self.transport.cfg.port, vals, level, message

    def shutdown(self) -> None:
        self.transport.close()


def main(args: list[str] | None = None) -> int:
    return run_node(SerialBridgeNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
