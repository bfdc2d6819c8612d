"""TensorRT: the static compatibility checker (always) and the engine path (where present)."""

from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from edgerl.export.onnx_export import OnnxExportConfig, export_onnx, infer_signature
from edgerl.export.tensorrt import TensorRTUnavailable, build_engine, tensorrt_status
from edgerl.export.trt_compat import check_tensorrt_compat
from tests.helpers.export_models import IN_DIM, NormMLP, RecurrentActor, make_spec

HAVE_TRT = importlib.util.find_spec("tensorrt") is not None


def _graph(op: str, *, opset: int = 17, dtype: int = TensorProto.FLOAT, domain: str = "",
           dims=(1, 4)) -> onnx.ModelProto:
    node = helper.make_node(op, ["x"], ["y"], domain=domain)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dtype, dims)],
                              [helper.make_tensor_value_info("y", dtype, dims)])
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=imports)


class TestCompatChecker:
    @pytest.mark.parametrize("kind", ["mlp", "gru", "lstm"])
    def test_exported_policies_pass(self, tmp_path, kind):
        actor = NormMLP() if kind == "mlp" else RecurrentActor(kind)
        path = export_onnx(actor, tmp_path / "p.onnx", infer_signature(actor, IN_DIM))
        report = check_tensorrt_compat(path)
        assert report.ok, report.errors
        assert report.static_shapes and report.opset == 17
        assert "Gemm" in report.ops
        if kind != "mlp":
            assert kind.upper() in report.ops

    def test_dynamic_batch_is_an_error_for_the_device_graph(self, tmp_path):
        actor = NormMLP()
        path = export_onnx(actor, tmp_path / "b.onnx", infer_signature(actor, IN_DIM),
                           OnnxExportConfig(dynamic_batch=True))
        strict = check_tensorrt_compat(path)
        assert not strict.ok and not strict.static_shapes
        assert any("input obs" in e and "not static" in e for e in strict.errors)
        relaxed = check_tensorrt_compat(path, require_static=False)
        assert relaxed.ok and any("optimisation profile" in w for w in relaxed.warnings)

    def test_unsupported_op_named(self):
        report = check_tensorrt_compat(_graph("BitShift", dtype=TensorProto.UINT8))
        assert not report.ok
        assert report.errors == ["op BitShift is not in the checked TensorRT-supported op list"]

    def test_opset_out_of_range(self):
        report = check_tensorrt_compat(_graph("Relu", opset=21))
        assert report.errors == ["opset 21 is outside TensorRT's supported range 9-20"]

    def test_custom_domain_needs_plugin(self):
        report = check_tensorrt_compat(_graph("MyOp", domain="com.example"))
        assert len(report.errors) == 1 and "needs a TensorRT plugin" in report.errors[0]

    def test_dtypes(self):
        double = check_tensorrt_compat(_graph("Relu", dtype=TensorProto.DOUBLE))
        assert double.ok and any("DOUBLE is cast down" in w for w in double.warnings)
        string = check_tensorrt_compat(_graph("Identity", dtype=TensorProto.STRING))
        assert any("dtype STRING is not supported" in e for e in string.errors)

    def test_symbolic_dim(self):
        report = check_tensorrt_compat(_graph("Relu", dims=("n", 4)))
        assert not report.ok and "['n', 4]" in report.errors[0]


@pytest.mark.skipif(HAVE_TRT, reason="checks the message where TensorRT is missing")
class TestTensorRTMissing:
    def test_status_names_the_package(self):
        ok, msg = tensorrt_status()
        assert not ok and "tensorrt" in msg and "not importable" in msg

    def test_build_raises(self, tmp_path):
        with pytest.raises(TensorRTUnavailable, match="tensorrt Python package"):
            build_engine(tmp_path / "missing.onnx", tmp_path / "e.engine")


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_TRT, reason="tensorrt not installed")
def test_engine_parity(tmp_path, parity_obs):
    """On a TensorRT machine: fp32 engine within 1e-4 and fp16 within 2e-2 of onnxruntime."""
    ok, msg = tensorrt_status()
    if not ok:
        pytest.skip(msg)
    from edgerl.export.bundle import export_bundle

    for fp16 in (False, True):
        out = tmp_path / f"fp16_{fp16}"
        report = export_bundle(RecurrentActor("gru"), make_spec(), out, parity_obs, trt=True,
                               fp16=fp16)
        trt = report.parity["tensorrt"]
        assert trt.ok and np.isfinite(trt.max_abs_err)
        assert (out / "policy.engine").is_file()
