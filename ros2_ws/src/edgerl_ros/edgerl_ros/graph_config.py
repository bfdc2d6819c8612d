"""The graph's configuration: parameter files, node command lines and environment, which
nodes a robot kind starts (:mod:`edgerl_ros.graph_description` decides, for ``edgerl
deploy`` and the launch file alike) and in which processes (``edgerl deploy``, the soak,
the demo).

Parameter files are ROS 2's (``node: {ros__parameters: {...}}``), checked against each node's
declared ``PARAMS`` before anything starts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from edgerl_ros.executables import CONTAINERS, NODE_MODULES

__all__ = ["DEFAULT_CONFIG", "PACKAGE_DIR", "ROBOTS", "RT_NODES", "DeployError",
           "load_params_yaml", "plan_processes", "ros_env", "rt_env",
           "to_ros_args"]

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_CONFIG = PACKAGE_DIR.parent / "config" / "edgerl.yaml"
#: What ``robot`` may be: the node that speaks for the robot (``ros``: none, the robot's
#: own ROS driver publishes ``robot/joint_states`` and takes ``robot/command``).
ROBOTS = {"sim": "sim_robot_node", "serial": "serial_bridge_node",
          "ros2_control": "ros2_control_bridge_node", "ros": None}


class DeployError(RuntimeError):
    """The graph could not be started or failed while running (message names the node)."""


# --- configuration ---------------------------------------------------------------------------
def _node_params(node: str) -> list[Any]:
    import importlib

    return list(importlib.import_module(NODE_MODULES[node]).PARAMS)


def load_params_yaml(path: str | Path | None) -> dict[str, dict[str, Any]]:
    """Read a ROS 2 parameter file (``node: {ros__parameters: {...}}``) and validate every
    value against the node's declared parameters; returns ``{node: {name: value}}``.

    Raises:
        DeployError: unreadable YAML, unknown node or parameter, or a rejected value.
    """
    import yaml

    if path is None:
        return {}
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise DeployError(f"{path}: cannot read parameter file ({exc})") from exc
    if not isinstance(data, dict):
        raise DeployError(f"{path}: expected a mapping of node names")
    out: dict[str, dict[str, Any]] = {}
    for node, body in data.items():
        node = str(node).lstrip("/")
        if node not in NODE_MODULES:
            raise DeployError(f"{path}: unknown node {node!r} (nodes: {', '.join(NODE_MODULES)})")
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters", {}), dict):
            raise DeployError(f"{path}: {node}: expected 'ros__parameters: {{...}}'")
        specs = {s.name: s for s in _node_params(node)}
        values = {}
        for name, value in (body.get("ros__parameters") or {}).items():
            if name not in specs:
                raise DeployError(f"{path}: {node}: unknown parameter {name!r} (known: "
                                  f"{', '.join(specs)})")
            if isinstance(specs[name].default, float) and isinstance(value, int) \
                    and not isinstance(value, bool):
                value = float(value)
            reason = specs[name].check(value)
            if reason is not None:
                raise DeployError(f"{path}: {node}: {reason}")
            values[name] = value
        out[node] = values
    return out


def _ros_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("'", "''")
    return f"'{text}'"


def to_ros_args(node: str, params: dict[str, Any]) -> list[str]:
    """``--ros-args -r __node:=NODE -p k:=v ...`` (values typed as YAML: floats keep a '.')."""
    args = ["--ros-args", "-r", f"__node:={node}"]
    for name, value in params.items():
        args += ["-p", f"{name}:={_ros_value(value)}"]
    return args


def ros_env(domain_id: int | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the child processes: one ROS domain, loopback discovery only, Fast DDS,
    and ``edgerl_ros`` importable."""
    env = dict(os.environ if base is None else base)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    pkg_root = str(PACKAGE_DIR.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


#: Nodes on the state -> command path; ``rt_priority`` makes these processes SCHED_FIFO
#: (the planner stays at normal priority: it is slow by design and must not starve them).
RT_NODES = ("edit_policy_node", "sim_robot_node", "serial_bridge_node",
            "ros2_control_bridge_node")


def rt_env(node: str, priority: int) -> dict[str, str]:
    """Extra environment for ``node``'s process: its SCHED_FIFO priority, if it is on the
    state -> command path and ``priority`` > 0."""
    from edgerl_ros.common import RT_PRIORITY_ENV

    return {RT_PRIORITY_ENV: str(int(priority))} if priority and node in RT_NODES else {}


def plan_processes(node_params: dict[str, dict[str, Any]], compose: bool
                   ) -> dict[str, tuple[str, ...] | None]:
    """Processes to start, in order: ``{process: None}`` for a node alone in its process,
    ``{container: (nodes...)}`` for composed ones (at the place of the first of them)."""
    out: dict[str, tuple[str, ...] | None] = {}
    hosted_by = {node: name for name, (_mod, nodes) in CONTAINERS.items() for node in nodes
                 if compose and all(n in node_params for n in nodes)}
    for node in node_params:
        container = hosted_by.get(node)
        if container is None:
            out[node] = None
        elif container not in out:
            out[container] = CONTAINERS[container][1]
    return out
