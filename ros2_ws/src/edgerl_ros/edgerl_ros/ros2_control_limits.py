"""The ros2_control bridge's command scaling: the bundle's action -> the controller's units.

``command_scale`` is either numeric factors (one for all actions, or one per action; the
controller receives ``action * factor``) or ``urdf``: each ``command_joints`` joint's
``<limit>`` in the robot description (URDF, as ``robot_state_publisher`` publishes it on
``robot_description``) maps the action's range ``[action.low, action.high]`` (the bundle's
manifest; typically ``[-1, 1]``) linearly onto

* ``[-effort, effort]`` (N or N m) for an effort command,
* ``[-velocity, velocity]`` (m/s or rad/s) for a velocity command,
* ``[lower, upper]`` (m or rad) for a position command.

The command kind is ``trajectory_field`` / ``command_field`` (``effort``, ``velocity`` /
``velocities``, ``position`` / ``positions``). Parsed with the standard library's
``xml.etree.ElementTree``. Plain functions, tested without ROS.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgerl_ros.ros2_control_maps import split_names

__all__ = ["TRAJECTORY_FIELDS", "CommandScale", "command_scale", "parse_scale",
           "trajectory_field_for", "urdf_limits"]

TRAJECTORY_FIELDS = ("positions", "velocities", "accelerations", "effort")

# command / trajectory field -> the URDF <limit> attributes bounding it
_LIMIT_ATTRS = {"effort": ("effort",), "velocity": ("velocity",), "velocities": ("velocity",),
                "position": ("lower", "upper"), "positions": ("lower", "upper")}


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
    parts = split_names(text)
    if not parts:
        return np.ones(n)
    try:
        vals = np.array([float(t) for t in parts])
    except ValueError:
        raise ValueError(f"command_scale: {text!r} is not a comma-separated list of numbers "
                         "(or urdf)") from None
    if not np.all(np.isfinite(vals)) or np.any(vals == 0.0):
        raise ValueError(f"command_scale: every factor must be finite and non-zero, got {text!r}")
    if vals.size not in (1, n):
        raise ValueError(f"command_scale: {vals.size} factors for {n} actions (give 1 or {n})")
    return np.broadcast_to(vals, (n,)).astype(np.float64)


def urdf_limits(urdf: str, joints: Sequence[str], attrs: Sequence[str]
                ) -> dict[str, dict[str, float]]:
    """Each joint's ``<limit>`` attributes ``attrs`` from a URDF XML string.

    Raises:
        ValueError: the XML does not parse, a joint is absent, has no ``<limit>`` or lacks an
            attribute, or a value is not a finite number (naming the joint and attribute).
    """
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise ValueError(f"robot_description: not valid XML ({exc})") from None
    by_name = {j.get("name"): j for j in root.iter("joint")}
    out: dict[str, dict[str, float]] = {}
    for name in joints:
        joint = by_name.get(name)
        if joint is None:
            raise ValueError(f"robot_description: joint {name!r} (command_joints) is not in the "
                             "URDF")
        limit = joint.find("limit")
        out[name] = {}
        for attr in attrs:
            text = None if limit is None else limit.get(attr)
            if text is None:
                raise ValueError(f"robot_description: joint {name!r} has no <limit {attr}=...> "
                                 "(needed by command_scale: urdf)")
            try:
                value = float(text)
            except ValueError:
                value = float("nan")
            if not np.isfinite(value):
                raise ValueError(f"robot_description: joint {name!r} <limit {attr}={text!r}> "
                                 "is not a finite number")
            out[name][attr] = value
    return out


@dataclass(frozen=True)
class CommandScale:
    """``command = offset + gain * action`` per action (controller units)."""

    gain: np.ndarray
    offset: np.ndarray

    def apply(self, action: np.ndarray) -> list[float]:
        """The controller's command for ``action`` (the bundle's units), as floats."""
        return [float(v) for v in self.offset + self.gain * np.asarray(action, np.float64)]


def _read_description(text: str, path: str) -> str:
    if text.strip():
        return text
    if path:
        try:
            return Path(path).read_text()
        except OSError as exc:
            raise ValueError(f"robot_description_file: cannot read {path!r} ({exc})") from None
    raise ValueError("command_scale: urdf needs robot_description (the URDF XML) or "
                     "robot_description_file")


def command_scale(scale: str, joints: Sequence[str], kind: str, low: Sequence[float],
                  high: Sequence[float], description: str = "", description_file: str = ""
                  ) -> CommandScale:
    """The action -> command map for ``command_scale`` (module docstring).

    Args:
        scale: ``command_scale``: ``''``, factors, or ``urdf``.
        joints: ``command_joints``, in action order.
        kind: the command's field (``command_field`` or the trajectory field).
        low, high: the bundle's action limits (``action.low`` / ``action.high``).
        description, description_file: the URDF XML, or a file holding it.

    Raises:
        ValueError: bad factors; with ``urdf``: no description, a field with no URDF limit,
            a missing joint or attribute, an empty range or a non-finite action range.
    """
    n = len(joints)
    if scale.strip().lower() != "urdf":
        return CommandScale(parse_scale(scale, n), np.zeros(n))
    attrs = _LIMIT_ATTRS.get(kind)
    if attrs is None:
        raise ValueError(f"command_scale: urdf has no limit for {kind!r} commands (effort, "
                         "velocity or position)")
    lo, hi = np.asarray(low, np.float64), np.asarray(high, np.float64)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(hi > lo)):
        raise ValueError("command_scale: urdf needs finite action.low < action.high in the "
                         "bundle's manifest")
    limits = urdf_limits(_read_description(description, description_file), joints, attrs)
    tlo, thi = np.empty(n), np.empty(n)
    for i, j in enumerate(joints):
        if len(attrs) == 2:
            tlo[i], thi[i] = limits[j]["lower"], limits[j]["upper"]
        else:
            thi[i] = abs(limits[j][attrs[0]])
            tlo[i] = -thi[i]
        if not thi[i] > tlo[i]:
            raise ValueError(f"robot_description: joint {j!r} has an empty {kind} range "
                             f"[{tlo[i]:g}, {thi[i]:g}] (<limit {' '.join(attrs)}>)")
    gain = (thi - tlo) / (hi - lo)
    return CommandScale(gain, tlo - gain * lo)
