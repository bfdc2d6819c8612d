"""``edgerl_ros.graph_config``: which nodes a robot kind starts, in which processes, with
which derived parameters."""

from __future__ import annotations

import pytest

from edgerl.contract.spec import load_bundle_manifest


def test_plan_processes_puts_composed_nodes_in_one_container():
    from edgerl_ros.graph_config import plan_processes

    nodes = {"sim_robot_node": {}, "planner_node": {}, "edit_policy_node": {}}
    assert plan_processes(nodes, compose=False) == {
        "sim_robot_node": None, "planner_node": None, "edit_policy_node": None}
    assert plan_processes(nodes, compose=True) == {
        "robot_edit_container": ("sim_robot_node", "edit_policy_node"), "planner_node": None}
    serial = {"serial_bridge_node": {}, "planner_node": {}, "edit_policy_node": {}}
    assert plan_processes(serial, compose=True) == {
        "serial_edit_container": ("serial_bridge_node", "edit_policy_node"),
        "planner_node": None}
    ros2c = {"ros2_control_bridge_node": {}, "planner_node": {}, "edit_policy_node": {}}
    assert all(v is None for v in plan_processes(ros2c, compose=True).values())


@pytest.mark.parametrize(("rate_hz", "every"), [(None, 1), (200.0, 5), (1000.0, 25)])
def test_sim_expert_chunk_every_half_planner_period(session_bundle, rate_hz, every):
    """The sim computes its expert chunk (0.7-3.8 ms) about twice per planner period, not
    at every step; a value in the parameter file wins."""
    from edgerl_ros.graph_description import robot_nodes

    spec = load_bundle_manifest(session_bundle)  # 50 Hz, chunk period 50 ms
    sim = {} if rate_hz is None else {"rate_hz": rate_hz}
    nodes = robot_nodes("sim", {"sim_robot_node": sim}, spec, session_bundle)
    assert nodes["sim_robot_node"]["expert_every"] == every
    nodes = robot_nodes("sim", {"sim_robot_node": {**sim, "expert_every": 3}}, spec,
                        session_bundle)
    assert nodes["sim_robot_node"]["expert_every"] == 3


def test_shipped_parameter_file_leaves_expert_every_to_the_bundle(session_bundle):
    """The default ``config/edgerl.yaml`` must not pin ``expert_every`` (it did, at 1, which
    made ``edgerl deploy --rate-hz 200`` compute the expert chunk at every step: the composed
    sim robot then stepped at 33-56 Hz of 200); 0 there means the deploy rule."""
    from edgerl_ros.graph import DEFAULT_CONFIG
    from edgerl_ros.graph_config import load_params_yaml
    from edgerl_ros.graph_description import robot_nodes

    params = load_params_yaml(DEFAULT_CONFIG)
    assert params["sim_robot_node"]["expert_every"] == 0
    spec = load_bundle_manifest(session_bundle)
    params["sim_robot_node"]["rate_hz"] = 200.0
    nodes = robot_nodes("sim", params, spec, session_bundle)
    assert nodes["sim_robot_node"]["expert_every"] == 5
