"""A fake JointTrajectoryController: ros2_controllers' acceptance rules for trajectory messages.

The rules are those of ``JointTrajectoryController::validate_trajectory_msg`` (and the
``validate_trajectory_point_field`` helper it calls) in the ros-controls/ros2_controllers
repository, file ``joint_trajectory_controller/src/joint_trajectory_controller.cpp``, with
the parameter defaults of ``joint_trajectory_controller_parameters.yaml`` in the same folder.
In the controller's order:

1. ``allow_partial_joints_goal`` false (default): ``joint_names`` must name as many joints
   as the controller has.
2. ``joint_names`` is not empty.
3. ``points`` is not empty (an empty trajectory is rejected, not taken as a stop).
4. every name is one of the controller's joints.
5. ``allow_nonzero_velocity_at_trajectory_end`` false (default): every velocity of the last
   point is zero (``|v| <= float epsilon``).
6. a nonzero ``header.stamp`` whose end (stamp + last ``time_from_start``) is before the
   controller's clock is rejected (stamp zero = start on receipt).
7. ``time_from_start`` strictly increases from point to point.
8. ``allow_integration_in_goal_trajectories`` false (default): ``positions`` has one value
   per joint name; ``velocities`` and ``accelerations`` are empty or one per joint name.
   (true: at least one of the three is present and each present one has one per name.)
9. ``effort`` is only allowed when the controller has an ``effort`` command interface.

Duplicate joint names: the controller does not check them in ``validate_trajectory_msg``
(its later index mapping would silently take the first); the fake rejects them
(``duplicate_joint``) so a bridge never relies on that.

Beyond the rules the fake records what a real controller would do with what it accepts:
the last accepted point and whether it was a **stop**: the point holds the joints' current
positions (set with :meth:`FakeJointTrajectoryController.set_positions`, e.g. from the
``/joint_states`` the test publishes) with no non-zero velocity, and, with an effort
command interface, carries zero effort (the controller's own hold message does the same).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

FLOAT_EPS = 1.1920928955078125e-07  # std::numeric_limits<float>::epsilon()


def _duration_ns(d: Any) -> int:
    return int(d.sec) * 1_000_000_000 + int(d.nanosec)


class FakeJointTrajectoryController:
    """Subscribes ``/<name>/joint_trajectory`` (reliable, depth 10, as the controller's
    ``SystemDefaultsQoS``) and validates each message with the rules in the module docstring.

    Attributes:
        accepted: the accepted messages, in order.
        rejected: ``(reason, message)`` for each rejected one; ``reason`` starts with a key
            (``empty_points``, ``past_end``, ...) then the controller's wording.
        stops: the accepted messages that were stops.
        last_point: the last accepted trajectory's last point (None before one).
    """

    def __init__(self, node: Any, joints: Sequence[str],
                 command_interfaces: Sequence[str] = ("effort",), *,
                 name: str = "joint_trajectory_controller",
                 allow_partial_joints_goal: bool = False,
                 allow_integration_in_goal_trajectories: bool = False,
                 allow_nonzero_velocity_at_trajectory_end: bool = False,
                 hold_tolerance: float = 1e-9) -> None:
        from trajectory_msgs.msg import JointTrajectory

        self.node = node
        self.joints = list(joints)
        self.command_interfaces = tuple(command_interfaces)
        self.allow_partial_joints_goal = allow_partial_joints_goal
        self.allow_integration_in_goal_trajectories = allow_integration_in_goal_trajectories
        self.allow_nonzero_velocity_at_trajectory_end = allow_nonzero_velocity_at_trajectory_end
        self.hold_tolerance = hold_tolerance
        self.topic = f"/{name}/joint_trajectory"
        self.accepted: list[Any] = []
        self.rejected: list[tuple[str, Any]] = []
        self.stops: list[Any] = []
        self.last_point: Any | None = None
        self._positions: dict[str, float] = {}
        self._lock = threading.Lock()
        self.subscription = node.create_subscription(JointTrajectory, self.topic,
                                                     self._on_trajectory, 10)

    @property
    def has_effort_command_interface(self) -> bool:
        return "effort" in self.command_interfaces

    def set_positions(self, positions: dict[str, float]) -> None:
        """The joints' current positions (what a stop must hold)."""
        with self._lock:
            self._positions.update({k: float(v) for k, v in positions.items()})

    def now_ns(self) -> int:
        """The controller's clock (the node's ROS clock, as ``get_node()->now()``)."""
        return int(self.node.get_clock().now().nanoseconds)

    def validate(self, msg: Any, now_ns: int | None = None) -> str | None:
        """None if the controller accepts ``msg``, else the reason it rejects it."""
        names = list(msg.joint_names)
        points = list(msg.points)
        if not self.allow_partial_joints_goal and len(names) != len(self.joints):
            return ("joint_count: Joints on incoming trajectory don't match the controller "
                    f"joints ({len(names)} names, {len(self.joints)} joints).")
        if not names:
            return "empty_joint_names: Empty joint names on incoming trajectory."
        if not points:
            return "empty_points: Empty trajectory received."
        for n in names:
            if n not in self.joints:
                return f"unknown_joint: Incoming joint {n} doesn't match the controller's joints."
        if len(set(names)) != len(names):
            return f"duplicate_joint: joint names {names} repeat a joint"
        if not self.allow_nonzero_velocity_at_trajectory_end:
            for n, v in zip(names, points[-1].velocities):
                if abs(v) > FLOAT_EPS:
                    return (f"nonzero_end_velocity: Velocity of last trajectory point of joint "
                            f"{n} is not zero: {v:.15f}")
        start = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
        if start != 0:
            end = start + _duration_ns(points[-1].time_from_start)
            now = self.now_ns() if now_ns is None else now_ns
            if end < now:
                return (f"past_end: Received trajectory with non-zero start time "
                        f"({start / 1e9:f}) that ends in the past ({end / 1e9:f})")
        previous = 0
        for i, p in enumerate(points):
            t = _duration_ns(p.time_from_start)
            if i > 0 and t <= previous:
                return (f"not_increasing: Time between points {i - 1} and {i} is not strictly "
                        f"increasing, it is {previous / 1e9:f} and {t / 1e9:f} respectively")
            previous = t
            reason = self._check_fields(p, i, len(names))
            if reason:
                return reason
            if not self.has_effort_command_interface and len(p.effort):
                return ("effort_not_allowed: Trajectories with effort fields are only supported "
                        "for controllers using the 'effort' command interface.")
        return None

    def _check_fields(self, p: Any, i: int, n: int) -> str | None:
        def mismatch(field: str, values: Sequence[float], allow_empty: bool) -> str | None:
            if allow_empty and not len(values):
                return None
            if len(values) != n:
                return (f"field_size: Mismatch between joint_names size ({n}) and {field} "
                        f"({len(values)}) at point #{i}.")
            return None

        fields = (("positions", p.positions), ("velocities", p.velocities),
                  ("accelerations", p.accelerations))
        if self.allow_integration_in_goal_trajectories:
            if not any(len(v) for _, v in fields):
                return ("no_motion_fields: The given trajectory has no position, velocity, or "
                        "acceleration points.")
            for field, values in fields:
                reason = len(values) and mismatch(field, values, False)
                if reason:
                    return reason
            return None
        for field, values in fields:
            reason = mismatch(field, values, field != "positions")
            if reason:
                return reason
        return None

    def is_stop(self, msg: Any) -> bool:
        """Whether an (accepted) trajectory stops the joints: its last point holds their
        current positions, moves with no velocity and, with an effort interface, carries zero
        effort."""
        if not msg.points:
            return False
        p = msg.points[-1]
        with self._lock:
            held = dict(self._positions)
        names = list(msg.joint_names)
        if not all(n in held for n in names) or len(p.positions) != len(names):
            return False
        if any(abs(v - held[n]) > self.hold_tolerance for n, v in zip(names, p.positions)):
            return False
        if any(abs(v) > FLOAT_EPS for v in p.velocities):
            return False
        if self.has_effort_command_interface:
            return len(p.effort) == len(names) and all(v == 0.0 for v in p.effort)
        return True

    def _on_trajectory(self, msg: Any) -> None:
        reason = self.validate(msg)
        with self._lock:
            if reason is not None:
                self.rejected.append((reason, msg))
                return
            self.accepted.append(msg)
            self.last_point = msg.points[-1]
        if self.is_stop(msg):
            self.stops.append(msg)

    def counts(self) -> dict[str, int]:
        """``accepted`` / ``rejected`` / ``stops`` counts."""
        return {"accepted": len(self.accepted), "rejected": len(self.rejected),
                "stops": len(self.stops)}
