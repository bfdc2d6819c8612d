"""The ``device`` / ``trt_*`` parameters of the edit and planner nodes (real rclpy, no GPU
here: ``auto`` lands on CPU, an explicit GPU device fails with the reason). No torch needed
(the Python 3.10 runtime CI job runs it)."""

from __future__ import annotations

import pytest

from tests.helpers.bundles import write_mlp_bundle

pytestmark = pytest.mark.ros


@pytest.fixture
def bundle(tmp_path):
    return write_mlp_bundle(tmp_path / "bundle", obs_dim=4, action_dim=1, control_hz=50.0,
                            hidden=(16,))


def _edit_node(ctx, bundle, **params):
    from edgerl_ros.edit_policy_node import EditPolicyNode
    from rclpy.parameter import Parameter

    return EditPolicyNode(context=ctx, parameter_overrides=[
        Parameter("bundle", value=str(bundle)),
        *(Parameter(k, value=v) for k, v in params.items())])


def test_edit_node_device_auto_runs_on_what_this_onnxruntime_has(rclpy_context, bundle,
                                                                  tmp_path):
    import onnxruntime as ort
    from rclpy.lifecycle import TransitionCallbackReturn

    node = _edit_node(rclpy_context, bundle, device="auto", trt_fp16=True,
                      trt_cache_dir=str(tmp_path / "cache"), trt_workspace_mb=64)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        want = "TensorrtExecutionProvider" if "TensorrtExecutionProvider" in \
            ort.get_available_providers() else "CPUExecutionProvider"
        first = node.loop.backend.requested[0]
        assert (first if isinstance(first, str) else first[0]) == want
        assert node.values()["inference"] == "onnxruntime:" + node.loop.backend.provider
    finally:
        node.shutdown()
        node.destroy_node()


def test_edit_node_refuses_a_gpu_device_this_onnxruntime_lacks(rclpy_context, bundle):
    import onnxruntime as ort
    from rclpy.lifecycle import TransitionCallbackReturn

    if "TensorrtExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has TensorRT")
    node = _edit_node(rclpy_context, bundle, device="tensorrt")
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert node.loop is None
    finally:
        node.destroy_node()


def test_device_parameter_rejects_unknown_values(rclpy_context, bundle):
    from rclpy.exceptions import InvalidParameterValueException

    with pytest.raises(InvalidParameterValueException):
        _edit_node(rclpy_context, bundle, device="gpu")


def test_onnx_planner_takes_the_device(make_bundle_with_planner, tmp_path):
    import onnxruntime as ort
    from edgerl_ros.planner_node import onnx_chunk_planner

    from edgerl.contract.spec import load_bundle_manifest
    from edgerl.runtime.inference import InferenceError, TensorRTOptions

    bundle = make_bundle_with_planner
    spec = load_bundle_manifest(bundle)
    planner = onnx_chunk_planner(bundle / "planner.onnx", spec, device="cpu")
    assert planner.provider == "CPUExecutionProvider"
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(InferenceError, match="needs CUDAExecutionProvider"):
            onnx_chunk_planner(bundle / "planner.onnx", spec, device="cuda",
                             trt=TensorRTOptions(cache_dir=tmp_path))


NODE_PROBE = '''
import json, sys
import rclpy
from rclpy.parameter import Parameter
import onnxruntime
from edgerl_ros.edit_policy_node import EditPolicyNode
rclpy.init()
node = EditPolicyNode(parameter_overrides=[
    Parameter("bundle", value=sys.argv[1]), Parameter("device", value="auto"),
    Parameter("trt_cache_dir", value=sys.argv[2]), Parameter("trt_fp16", value=True),
    Parameter("trt_workspace_mb", value=256)])
ok = node.trigger_configure().value
print(json.dumps({"configured": ok, "asked": onnxruntime.ASKED,
                  "requested": node.loop.backend.requested,
                  "inference": node.values()["inference"]}))
node.shutdown()
node.destroy_node()
rclpy.shutdown()
'''


def test_edit_node_device_auto_picks_tensorrt_beside_onnxruntime_gpu(bundle, tmp_path,
                                                                     ros_domain):
    """device:=auto on the node with a (stub) onnxruntime-gpu that lists TensorRT: the
    session is asked for TensorRT with the node's cache/fp16/workspace options."""
    import json
    import os
    import subprocess
    import sys

    from tests.helpers.ort_gpu_stub import write_ort_gpu_stub

    site, cache = write_ort_gpu_stub(tmp_path / "site"), tmp_path / "trt-cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}
    res = subprocess.run([sys.executable, "-c", NODE_PROBE, str(bundle), str(cache)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    opts = {"trt_fp16_enable": "True", "trt_max_workspace_size": str(256 << 20),
            "trt_engine_cache_enable": "True", "trt_engine_cache_path": str(cache),
            "trt_timing_cache_enable": "True", "trt_timing_cache_path": str(cache)}
    assert out["requested"] == [["TensorrtExecutionProvider", opts], "CUDAExecutionProvider",
                                "CPUExecutionProvider"]
    assert out["asked"][0]["providers"][0] == "TensorrtExecutionProvider"
    assert out["asked"][0]["provider_options"][0] == opts
    assert cache.is_dir()
    # no TensorRT here: the real onnxruntime runs it on CPU, and the node reports that
    assert out["inference"] == "onnxruntime:CPUExecutionProvider"


def test_edit_node_pins_its_loop_thread_to_loop_cpus(rclpy_context, bundle):
    """``loop_cpus``: the loop thread runs on those CPUs once active; a CPU this process may
    not use fails the configure (the reason is logged), with no loop built."""
    import os
    import time

    from rclpy.lifecycle import TransitionCallbackReturn

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs Linux sched_setaffinity")
    cpu = min(os.sched_getaffinity(0))
    node = _edit_node(rclpy_context, bundle, loop_cpus=str(cpu), trigger="clock")
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.loop.cfg.cpus == (cpu,)
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        end = time.monotonic() + 5.0
        while node.loop.cpus_applied == () and time.monotonic() < end:
            time.sleep(0.01)
        assert node.loop.cpus_applied == (cpu,)
        assert os.sched_getaffinity(node.loop._thread.native_id) == {cpu}
    finally:
        node.shutdown()
        node.destroy_node()
    absent = max(os.sched_getaffinity(0)) + 4096
    node = _edit_node(rclpy_context, bundle, loop_cpus=str(absent))
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert node.loop is None
    finally:
        node.destroy_node()
