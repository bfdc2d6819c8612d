"""``ros2_control_bridge_node``: edgerl's graph on a robot driven by ros2_control.

ros2_control's ``joint_state_broadcaster`` publishes real joints on ``/joint_states``
(``sensor_msgs/JointState``: one name per joint, ``position`` / ``velocity`` / ``effort``
per joint). edgerl's nodes speak the bundle's observation and action names. This node maps
between them, with no glue code:

* ``observation_map``: one ``obs_name=joint:field`` entry per observation name of the
  bundle (comma separated), e.g. ``cart_x=slider:position, cart_vel=slider:velocity``. Each
  ``/joint_states`` message becomes one ``robot/joint_states`` message in edgerl's form
  (observation names, values in ``position``) with the same stamp. A message lacking a
  mapped joint or field, or carrying a non-finite value, is dropped and counted. Joints the
  map does not use may be present (a broadcaster publishes every joint). An entry may
  instead read another topic: ``goal_x=/goal:Float64MultiArray[0]`` (element 0) or
  ``goal_x=/goal_pose:PoseStamped.pose.position.x`` (also ``PointStamped.point.x``; see
  :mod:`edgerl_ros.ros2_control_maps`). The bridge keeps each such topic's newest values and
  their receipt time and composes them into the state of each ``/joint_states`` (the stamp
  stays the joint state's); until every topic has sent a message states are dropped as
  ``waiting_for <topic>``, and while one's last message is older than ``aux_max_age_s``
  (1 s) as ``stale <topic>``.
* ``command_interface``: ``forward`` publishes each ``robot/command`` as a
  ``std_msgs/Float64MultiArray`` (``data`` in ``command_joints`` order) to a
  ``forward_command_controller`` (``.../commands``); ``trajectory`` publishes a one-point
  ``trajectory_msgs/JointTrajectory`` (``joint_names`` = ``command_joints``, the command in
  ``trajectory_field``, reached after ``trajectory_time_s``) to a
  ``JointTrajectoryController`` (``.../joint_trajectory``). ``trajectory_field`` defaults to
  the point field of ``command_field`` (effort -> ``effort``, position -> ``positions``,
  velocity -> ``velocities``): a force command never lands in ``positions``. The trajectory
  is stamped zero (the controller starts it on receipt): a stamp copied from the state would
  arrive in the past on a loaded graph, and a JointTrajectoryController rejects those.
  ``command_joints`` lists the controller's joints in the bundle's action order (one per
  action).
* ``command_scale``: the bundle's action (in its own units) times this, per action (comma
  separated; one value applies to every action; default 1) is what the controller receives.
  ``urdf``: the action range ``[action.low, action.high]`` maps linearly onto each joint's
  ``<limit>`` in ``robot_description`` (URDF XML) or ``robot_description_file``:
  ``[-effort, effort]``, ``[-velocity, velocity]`` or ``[lower, upper]`` by the command's
  field (:mod:`edgerl_ros.ros2_control_limits`); a missing joint or attribute fails at start.
* **A stop when commands stop.** A forward_command_controller applies its last command
  forever, so when no valid ``robot/command`` arrived for ``command_timeout_s`` (the edit
  node died, the graph stopped) and when the bridge shuts down, the bridge sends a stop once:
  ``trajectory`` -> one point holding the last ``/joint_states`` positions of
  ``command_joints`` (zero in ``trajectory_field``): a JointTrajectoryController rejects an
  empty trajectory and a point without positions, so effort and velocity commands carry
  those positions too (a command is dropped, ``no_joint_position``, until they are known);
  ``forward`` with an effort or velocity command -> zeros. A forward position command has
  no stop that is safe everywhere; the bridge warns at start (use ``trajectory``).

Commands are checked before they are forwarded (:class:`edgerl.runtime.input_guard.
InputGuard` with the manifest's bounds): stamped longer than ``timing.command_max_age_s`` ago,
zero-stamped, stamped ahead, non-finite or outside ``action.low/high`` -> refused and counted.
``command_field``, ``trajectory_time_s``, ``command_timeout_s`` and ``diagnostics_period_s``
apply at run time; the other parameters are refused with a reason.

The mapping logic lives in :mod:`edgerl_ros.ros2_control_maps` and
:mod:`edgerl_ros.ros2_control_limits` (plain classes, tested without ROS).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from builtin_interfaces.msg import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from edgerl_ros.common import (
    COMMAND_QOS,
    STATE_QOS,
    TOPICS,
    ParamSpec,
    declare_with_bundle,
    refuse_unless_live,
    run_node,
)
from edgerl_ros.messages import (
    COMMAND_FIELDS,
    BadMessage,
    make_joint_state,
    stamp_to_ns,
)
from edgerl_ros.node_diagnostics import NodeDiagnostics, Report
from edgerl_ros.operator import COMMAND_SOURCE_PARAM
from edgerl_ros.robot_commands import COMMAND_QUEUE_DEPTH, command_values, guard_passes
from edgerl_ros.ros2_control_limits import (
    TRAJECTORY_FIELDS,
    command_scale,
    parse_scale,
    trajectory_field_for,
)
from edgerl_ros.ros2_control_maps import (
    AuxValues,
    JointMap,
    message_class,
    parse_observation_map,
    split_names,
)
from edgerl_ros.session import qos_kwargs
from edgerl_ros.sources import PublisherFilter
from edgerl_ros.stats import DropCounter

__all__ = ["PARAMS", "JointMap", "Ros2ControlBridgeNode", "main", "parse_observation_map",
           "parse_scale", "trajectory_field_for"]

log = logging.getLogger(__name__)


PARAMS = [
    ParamSpec("bundle", "", "bundle whose manifest names the observations and actions",
              read_only=True),
    ParamSpec("observation_map", "", "obs_name=joint:field | obs_name=/topic:Type[i] | "
              "obs_name=/topic:Type.field, ... (one per observation name; field: position | "
              "velocity | effort; Type: Float64MultiArray, PointStamped, PoseStamped)",
              read_only=True),
    ParamSpec("aux_max_age_s", 1.0, "an observation topic other than /joint_states older "
              "than this (s) -> states dropped as stale", 0.001, 3600.0, read_only=True),
    ParamSpec("joint_states_topic", "/joint_states", "ros2_control joint_state_broadcaster "
              "topic", read_only=True),
    ParamSpec("command_interface", "forward", "forward = forward_command_controller "
              "(Float64MultiArray), trajectory = JointTrajectoryController",
              choices=("forward", "trajectory"), read_only=True),
    ParamSpec("command_topic", "", "controller topic ('' = /forward_command_controller/"
              "commands or /joint_trajectory_controller/joint_trajectory)", read_only=True),
    ParamSpec("command_joints", "", "controller joints in the bundle's action order, comma "
              "separated", read_only=True),
    ParamSpec("command_field", "effort", "robot/command JointState field holding the command",
              choices=COMMAND_FIELDS),
    ParamSpec("trajectory_time_s", 0.02, "time_from_start of the trajectory point", 0.0, 10.0),
    ParamSpec("trajectory_field", "", "JointTrajectoryPoint field for the command ('' = the "
              "one of command_field: effort, positions or velocities)",
              choices=("",) + TRAJECTORY_FIELDS, read_only=True),
    ParamSpec("command_scale", "", "per-action factor from the bundle's action units to the "
              "controller's (comma separated; one value for all; '' = 1), or urdf: "
              "[action.low, action.high] -> the joints' URDF <limit>", read_only=True),
    ParamSpec("robot_description", "", "URDF XML for command_scale: urdf", read_only=True),
    ParamSpec("robot_description_file", "", "URDF file for command_scale: urdf (when "
              "robot_description is empty)", read_only=True),
    ParamSpec("command_timeout_s", 0.2, "no valid robot/command for this long -> send the "
              "controller a stop (once, until commands resume)", 0.01, 60.0),
    ParamSpec("diagnostics_period_s", 1.0, "how often /diagnostics is published", 0.05, 60.0),
    COMMAND_SOURCE_PARAM,
]

DEFAULT_COMMAND_TOPICS = {"forward": "/forward_command_controller/commands",
                          "trajectory": "/joint_trajectory_controller/joint_trajectory"}


class Ros2ControlBridgeNode(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("ros2_control_bridge_node", **kwargs)
        p, spec = declare_with_bundle(self, PARAMS, self._apply_params)
        from edgerl.runtime.input_guard import InputGuard

        self.guard = InputGuard(spec)
        self.action_names = spec.action.names
        self.map = parse_observation_map(p["observation_map"], spec.observation.names)
        self.command_joints = split_names(p["command_joints"])
        if len(self.command_joints) != spec.action.dim:
            raise ValueError(f"command_joints: {len(self.command_joints)} joints "
                             f"{self.command_joints} for {spec.action.dim} actions "
                             f"({', '.join(self.action_names)})")
        self.interface = p["command_interface"]
        self.command_field = p["command_field"]
        self.trajectory_time_s = float(p["trajectory_time_s"])
        self.trajectory_field = p["trajectory_field"]
        self._scale_args = (p["command_scale"], spec.action.low, spec.action.high,
                            p["robot_description"], p["robot_description_file"])
        self.scale = self._command_scale(self.command_field)
        topic = p["command_topic"] or DEFAULT_COMMAND_TOPICS[self.interface]
        msg_type = Float64MultiArray if self.interface == "forward" else JointTrajectory
        # controllers subscribe with the default (reliable, depth 10) QoS
        self.cmd_pub = self.create_publisher(msg_type, topic, 10)
        self.state_pub = self.create_publisher(JointState, TOPICS["state"], STATE_QOS)
        self.drops = DropCounter()
        self.states = 0
        self.commands = 0
        # joint_state_broadcaster publishes reliable; a best-effort reader matches it
        self.create_subscription(JointState, p["joint_states_topic"], self._on_joint_states,
                                 STATE_QOS)
        # observations from other topics: newest value kept, composed on each /joint_states
        self.aux = AuxValues(self.map.elements(), float(p["aux_max_age_s"]))
        for aux_topic, type_name in self.aux.topics().items():
            self.create_subscription(message_class(type_name), aux_topic,
                                     lambda m, t=aux_topic: self._on_aux(t, m), 10)
        # only the edit node's commands go to the controller (command_source; 'foreign')
        self.command_source = p["command_source"]
        self._edit_source = PublisherFilter(self, TOPICS["command"],
                                            self.command_source or "edit_policy_node")
        self.create_subscription(JointState, TOPICS["command"], self._on_command,
                                 QoSProfile(**{**qos_kwargs(COMMAND_QOS),
                                               "depth": COMMAND_QUEUE_DEPTH}))
        self.command_timeout_s = float(p["command_timeout_s"])
        self.last_command = time.monotonic()
        self.stopped = True  # nothing to stop before the first command
        # command_joints' last /joint_states positions: a JointTrajectoryController rejects a
        # point without positions and an empty trajectory, so both carry these
        self.joint_positions: dict[str, float] = {}
        self.stops = 0
        if self.interface == "forward" and self.command_field == "position":
            self.get_logger().warning("forward position commands have no safe stop: when "
                                      "commands stop the controller holds the last one; use "
                                      "command_interface:=trajectory")
        self.create_timer(0.02, self._watch_commands)
        self.diagnostics = NodeDiagnostics(self, "edgerl: ros2_control_bridge_node",
                                           p["diagnostics_period_s"], self._report)
        self.get_logger().info(f"ros2_control bridge: {p['joint_states_topic']} -> "
                               f"{TOPICS['state']}, {TOPICS['command']} -> {topic} "
                               f"({self.interface})")

    def _command_scale(self, command_field: str) -> Any:
        """The action -> command map for ``command_field`` (:func:`command_scale`)."""
        scale, low, high, urdf, urdf_file = self._scale_args
        kind = (command_field if self.interface == "forward"
                else trajectory_field_for(command_field, self.trajectory_field))
        return command_scale(scale, self.command_joints, kind, low, high, urdf, urdf_file)

    def _apply_params(self, changed: dict[str, Any]) -> str | None:
        reason = refuse_unless_live(changed, {"command_field", "trajectory_time_s",
                                              "command_timeout_s", "diagnostics_period_s"})
        if reason is None and "command_field" in changed:
            try:  # command_scale: urdf takes other limits for another field
                self.scale = self._command_scale(changed["command_field"])
            except ValueError as exc:
                return str(exc)
        if reason is None:
            for name, value in changed.items():
                if name == "diagnostics_period_s":
                    self.diagnostics.set_period(value)
                else:
                    setattr(self, name, value)
        return reason

    def _on_aux(self, topic: str, msg: Any) -> None:
        try:
            self.aux.update(topic, msg, time.monotonic())
        except BadMessage as exc:
            self.drops.drop(topic, str(exc))

    def _on_joint_states(self, msg: JointState) -> None:
        try:
            obs = self.map.observation(msg, self.aux.values(time.monotonic()))
        except BadMessage as exc:
            self.drops.drop("/joint_states", str(exc))
            return
        stamp = stamp_to_ns(msg.header.stamp)
        if stamp <= 0:
            self.drops.drop("/joint_states", "no_stamp: header.stamp is zero")
            return
        self.state_pub.publish(make_joint_state(self.map.names, obs, stamp))
        self.states += 1
        if len(msg.position) == len(msg.name):
            self.joint_positions.update((n, float(v)) for n, v in zip(msg.name, msg.position)
                                        if n in self.command_joints)

    def _on_command(self, msg: JointState, info: Any) -> None:
        if not self._edit_source.accept(info) and self.command_source:
            self.drops.drop(TOPICS["command"], f"foreign: not published by "
                                               f"{self.command_source}")
            return
        values = command_values(msg, self.action_names, self.command_field, self.drops)
        if values is None or not guard_passes(self.guard, self.drops, values,
                                              stamp_to_ns(msg.header.stamp), time.time_ns()):
            return
        scaled = self.scale.apply(values)
        if self.interface == "forward":
            out: Any = Float64MultiArray(data=scaled)
        else:
            out = JointTrajectory()  # stamp zero: the controller starts it on receipt
            out.joint_names = list(self.command_joints)
            t = self.trajectory_time_s
            point = JointTrajectoryPoint(
                time_from_start=Duration(sec=int(t), nanosec=int(round((t % 1.0) * 1e9))))
            field = trajectory_field_for(self.command_field, self.trajectory_field)
            if field != "positions":  # the controller requires positions in every point
                held = self._held_positions()
                if held is None:
                    self.drops.drop(TOPICS["command"], "no_joint_position: a "
                                    "JointTrajectoryController needs command_joints' positions "
                                    "(none on /joint_states yet)")
                    return
                point.positions = held
            setattr(point, field, scaled)
            out.points = [point]
        self.cmd_pub.publish(out)
        self.commands += 1
        self.last_command = time.monotonic()
        self.stopped = False

    def _held_positions(self) -> list[float] | None:
        """command_joints' last positions from /joint_states (None until all are known)."""
        if not all(j in self.joint_positions for j in self.command_joints):
            return None
        return [self.joint_positions[j] for j in self.command_joints]

    def stop_message(self) -> Any | None:
        """What stops the controller: a trajectory holding the last /joint_states positions
        (zero effort / velocity / acceleration in ``trajectory_field``; an empty trajectory,
        which a JointTrajectoryController rejects, while no position is known), zeros for an
        effort or velocity forward command, None for a forward position command (no stop is
        safe there)."""
        if self.interface == "trajectory":
            out = JointTrajectory()
            out.joint_names = list(self.command_joints)
            held = self._held_positions()
            if held is not None:
                point = JointTrajectoryPoint(positions=held)
                field = trajectory_field_for(self.command_field, self.trajectory_field)
                if field != "positions":
                    setattr(point, field, [0.0] * len(held))
                out.points = [point]
            return out
        if self.command_field == "position":
            return None
        return Float64MultiArray(data=[0.0] * len(self.command_joints))

    def send_stop(self) -> bool:
        """Send the stop once (until the next forwarded command); True if one was sent."""
        msg = None if self.stopped else self.stop_message()
        self.stopped = True
        if msg is None:
            return False
        self.cmd_pub.publish(msg)
        self.stops += 1
        return True

    def _watch_commands(self) -> None:
        late = time.monotonic() - self.last_command > self.command_timeout_s
        if not self.stopped and late and self.send_stop():
            self.get_logger().warning(f"no valid robot/command for {self.command_timeout_s:g} "
                                      "s: stop sent to the controller")

    def destroy_node(self) -> None:
        """Stop the controller (if a command was forwarded since the last stop), then go."""
        try:
            self.send_stop()
        except Exception as exc:  # the context may already be shut down
            log.warning("ros2_control bridge: stop not sent at shutdown (%s)", exc)
        finally:
            super().destroy_node()

    def values(self) -> dict[str, Any]:
        return {"states_published": self.states, "commands_forwarded": self.commands,
                "stops_sent": self.stops,
                "command_interface": self.interface, **self.drops.values()}

    def _report(self) -> Report:
        level, message = (1, self.drops.last_reason) if self.drops.total else (0, "ok")
        return self.interface, self.values(), level, message


def main(args: list[str] | None = None) -> int:
    return run_node(Ros2ControlBridgeNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
