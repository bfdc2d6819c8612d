"""The ``device`` / ``trt_*`` parameters of the edit and planner nodes (real rclpy, no GPU
here: ``auto`` lands on CPU, an explicit GPU device fails with the reason). No torch needed
(the Python 3.10 runtime CI job runs it)."""

from __future__ import annotations

import pytest
from rt_bundles import write_mlp_bundle

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
    from edgerl_ros.planner_node import OnnxChunkPlanner

    from edgerl.runtime.inference import InferenceError, TensorRTOptions
    from edgerl.spec import load_bundle_manifest

    bundle = make_bundle_with_planner
    spec = load_bundle_manifest(bundle)
    planner = OnnxChunkPlanner(bundle / "planner.onnx", spec, device="cpu")
    assert planner.provider == "CPUExecutionProvider"
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(InferenceError, match="needs CUDAExecutionProvider"):
            OnnxChunkPlanner(bundle / "planner.onnx", spec, device="cuda",
                             trt=TensorRTOptions(cache_dir=tmp_path))
