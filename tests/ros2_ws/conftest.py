"""Fixtures for the ROS 2 tests: real rclpy (Fast DDS) on a private domain, real bundles.

Bundles reuse the runtime tests' writer (``tests/helpers/bundles.py``) and then take the
cartpole task's names, limits and rate, so the sim robot, planner and edit loop agree.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.bundles import write_mlp_bundle
from tests.helpers.edit_node_graph import Probe
from tests.helpers.task_bundles import write_task_bundle


@pytest.fixture(scope="session")
def rclpy_ok() -> None:
    """Skip (with the reason) when rclpy cannot even be imported in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", "import rclpy, sensor_msgs.msg"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        pytest.skip(f"rclpy not importable: {proc.stderr.strip()[-300:]}")


@pytest.fixture
def ros_domain(monkeypatch, rclpy_ok) -> int:
    """A random ROS_DOMAIN_ID (1..200) on loopback for this test and its child processes."""
    domain = random.randint(1, 200)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    return domain


@pytest.fixture
def cartpole_bundle(tmp_path) -> Path:
    return write_task_bundle(tmp_path / "cartpole_bundle")


@pytest.fixture
def make_bundle_with_planner(tmp_path) -> Path:
    """A runtime-test bundle (obs 4, action 2) with a random MLP ``planner.onnx``."""
    return write_mlp_bundle(tmp_path / "planner_bundle", planner=True, hidden=(16,))


@pytest.fixture(scope="session")
def session_bundle(tmp_path_factory) -> Path:
    """A cartpole bundle shared by the in-process tests (they never modify it)."""
    return write_task_bundle(tmp_path_factory.mktemp("ros") / "cartpole_bundle")


@pytest.fixture
def rclpy_context(ros_domain):
    """An initialised rclpy context (shut down after the test)."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    ctx.try_shutdown()


@pytest.fixture
def graph_bundle(session_bundle) -> Path:
    """The bundle the ``graph`` fixture's edit node runs (a test module may override it)."""
    return session_bundle


@pytest.fixture
def graph_overrides() -> list[tuple[str, object]]:
    """Extra ``(name, value)`` start-up parameters of the ``graph`` fixture's edit node (a
    test parametrizes it for read-only ones such as ``loop_cpus``)."""
    return []


@pytest.fixture(scope="session")
def operator_key_file(tmp_path_factory) -> Path:
    """An operator key file (mode 600) the ``graph`` fixture's edit node trusts."""
    from edgerl.contract.operator_auth import OperatorKey

    return OperatorKey.generate("test-operator").save(
        tmp_path_factory.mktemp("operator") / "operator.key")


@pytest.fixture
def graph(rclpy_context, graph_bundle, graph_overrides, operator_key_file):
    """(EditPolicyNode, Probe, executor) spinning in a background thread; the probe's
    ``operator`` (:class:`edgerl_ros.operator.OperatorPublisher`) holds the node's operator
    key."""
    from edgerl_ros.edit_policy_node import EditPolicyNode
    from edgerl_ros.operator import OperatorPublisher
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from edgerl.contract.operator_auth import OperatorKey

    node = EditPolicyNode(context=rclpy_context, parameter_overrides=[
        Parameter("bundle", value=str(graph_bundle)),
        Parameter("diagnostics_period_s", value=0.2),
        Parameter("operator_key_file", value=str(operator_key_file)),
        *(Parameter(name, value=value) for name, value in graph_overrides)])
    probe = Probe(rclpy_context)
    probe.operator = OperatorPublisher(probe.node, OperatorKey.load(operator_key_file))
    # single-threaded, as the node runs in production (run_node); under rclpy's
    # MultiThreadedExecutor here the inline node received only 1-8 of ~40 states/s (its
    # timers and subscription share one mutually exclusive callback group)
    ex = SingleThreadedExecutor(context=rclpy_context)
    ex.add_node(node)
    ex.add_node(probe.node)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ex.spin_once(timeout_sec=0.02)

    def call(fn, *args):
        """Run ``fn`` inside the executor (transitions destroy entities it waits on)."""
        fut = ex.create_task(fn, *args)
        t_end = time.monotonic() + 10
        while not fut.done() and time.monotonic() < t_end:
            time.sleep(0.005)
        assert fut.done(), f"{fn} did not run"
        return fut.result()

    node.call = call

    th = threading.Thread(target=spin, daemon=True)
    th.start()
    try:
        yield node, probe
    finally:
        call(node.shutdown)
        stop.set()
        th.join(5)
        ex.shutdown()
        node.destroy_node()
        probe.node.destroy_node()
