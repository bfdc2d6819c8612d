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
  map does not use may be present (a broadcaster publishes every joint).
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

The mapping logic lives in :class:`JointMap` and :func:`parse_observation_map` (plain
classes, tested without ROS).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
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
from edgerl_ros.session import qos_kwargs
from edgerl_ros.sources import PublisherFilter
from edgerl_ros.stats import DropCounter

__all__ = ["PARAMS", "JointMap", "Ros2ControlBridgeNode", "main", "parse_observation_map",
           "parse_scale", "trajectory_field_for"]

log = logging.getLogger(__name__)

JOINT_FIELDS = ("position", "velocity", "effort")
TRAJECTORY_FIELDS = ("positions", "velocities", "accelerations", "effort")

PARAMS = [
    ParamSpec("bundle", "", "bundle whose manifest names the observations and actions",
              read_only=True),
    ParamSpec("observation_map", "", "obs_name=joint:field, ... (one per observation name; "
              "field: position | velocity | effort)", read_only=True),
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
              "controller's (comma separated; one value for all; '' = 1)", read_only=True),
    ParamSpec("command_timeout_s", 0.2, "no valid robot/command for this long -> send the "
              "controller a stop (once, until commands resume)", 0.01, 60.0),
    ParamSpec("diagnostics_period_s", 1.0, "how often /diagnostics is published", 0.05, 60.0),
    COMMAND_SOURCE_PARAM,
]

def trajectory_field_for(command_field: str, trajectory_field: str = "") -> str:
    """The ``JointTrajectoryPoint`` field a command goes in: ``trajectory_field`` when set,
    else the one matching the ``robot/command`` JointState field."""
    return trajectory_field or {"effort": "effort", "position": "positions",
                                "velocity": "velocities"}[command_field]


def parse_scale(text: str, n: int) -> np.ndarray:
    """``command_scale`` -> ``(n,)`` float64 factors (empty: ones; one value: all actions).

    Raises:
        ValueError: not numbers, non-finite or zero, or a count other than 1 or ``n``.
    """
    parts = _split_names(text)
    if not parts:
        return np.ones(n)
    try:
        vals = np.array([float(t) for t in parts])
    except ValueError:
        raise ValueError(f"command_scale: {text!r} is not a comma-separated list of numbers") \
            from None
    if not np.all(np.isfinite(vals)) or np.any(vals == 0.0):
        raise ValueError(f"command_scale: every factor must be finite and non-zero, got {text!r}")
    if vals.size not in (1, n):
        raise ValueError(f"command_scale: {vals.size} factors for {n} actions (give 1 or {n})")
    return np.broadcast_to(vals, (n,)).astype(np.float64)


DEFAULT_COMMAND_TOPICS = {"forward": "/forward_command_controller/commands",
                          "trajectory": "/joint_trajectory_controller/joint_trajectory"}


@dataclass(frozen=True)
class JointMap:
    """Observation ``i`` = ``/joint_states`` joint ``joints[i]``, field ``fields[i]``."""

    names: tuple[str, ...]
    joints: tuple[str, ...]
    fields: tuple[str, ...]

    def observation(self, msg: JointState) -> np.ndarray:
        """``(len(names),)`` float32 observation from a ros2_control ``JointState``.

        Raises:
            BadMessage: a mapped joint is absent (``missing_joint``), a field has the wrong
                length (``wrong_length``) or a value is not finite (``non_finite``).
        """
        index = {n: i for i, n in enumerate(msg.name)}
        out = np.empty(len(self.names), dtype=np.float32)
        for k, (joint, field) in enumerate(zip(self.joints, self.fields)):
            i = index.get(joint)
            if i is None:
                raise BadMessage(f"missing_joint: {joint!r} (for {self.names[k]}) not in "
                                 "/joint_states")
            values = getattr(msg, field)
            if len(values) != len(msg.name):
                raise BadMessage(f"wrong_length: {len(msg.name)} names but {len(values)} "
                                 f"{field} values")
            v = float(values[i])
            if not np.isfinite(v):
                raise BadMessage(f"non_finite: {joint}.{field} = {v}")
            out[k] = v
        return out


def parse_observation_map(text: str, obs_names: Sequence[str]) -> JointMap:
    """Parse ``obs=joint:field, ...``; every observation name must appear exactly once.

    Raises:
        ValueError: malformed entry, unknown field or observation, duplicate or missing names.
    """
    pairs: dict[str, tuple[str, str]] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, target = entry.partition("=")
        joint, sep2, field = target.partition(":")
        name, joint, field = name.strip(), joint.strip(), field.strip()
        if not sep or not sep2 or not name or not joint:
            raise ValueError(f"observation_map entry {entry!r}: expected obs_name=joint:field")
        if field not in JOINT_FIELDS:
            raise ValueError(f"observation_map entry {entry!r}: field {field!r} is not one of "
                             f"{', '.join(JOINT_FIELDS)}")
        if name not in obs_names:
            raise ValueError(f"observation_map: {name!r} is not an observation of the bundle "
                             f"({', '.join(obs_names)})")
        if name in pairs:
            raise ValueError(f"observation_map: {name!r} is mapped twice")
        pairs[name] = (joint, field)
    missing = [n for n in obs_names if n not in pairs]
    if missing:
        raise ValueError(f"observation_map: no joint for {', '.join(missing)} (every "
                         "observation must come from /joint_states)")
    return JointMap(tuple(obs_names), tuple(pairs[n][0] for n in obs_names),
                    tuple(pairs[n][1] for n in obs_names))


def _split_names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


class Ros2ControlBridgeNode(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("ros2_control_bridge_node", **kwargs)
        p, spec = declare_with_bundle(self, PARAMS, self._apply_params)
        from edgerl.runtime.input_guard import InputGuard

        self.guard = InputGuard(spec)
        self.action_names = spec.action.names
        self.map = parse_observation_map(p["observation_map"], spec.observation.names)
        self.command_joints = _split_names(p["command_joints"])
        if len(self.command_joints) != spec.action.dim:
            raise ValueError(f"command_joints: {len(self.command_joints)} joints "
                             f"{self.command_joints} for {spec.action.dim} actions "
                             f"({', '.join(self.action_names)})")
        self.interface = p["command_interface"]
        self.command_field = p["command_field"]
        self.trajectory_time_s = float(p["trajectory_time_s"])
        self.trajectory_field = p["trajectory_field"]
        self.scale = parse_scale(p["command_scale"], spec.action.dim)
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

    def _apply_params(self, changed: dict[str, Any]) -> str | None:
        reason = refuse_unless_live(changed, {"command_field", "trajectory_time_s",
                                              "command_timeout_s", "diagnostics_period_s"})
        if reason is None:
            for name, value in changed.items():
                if name == "diagnostics_period_s":
                    self.diagnostics.set_period(value)
                else:
                    setattr(self, name, value)
        return reason

    def _on_joint_states(self, msg: JointState) -> None:
        try:
            obs = self.map.observation(msg)
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
        scaled = [float(v) for v in np.asarray(values, np.float64) * self.scale]
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
