"""Static check that an ONNX graph is one TensorRT can build, without TensorRT installed.

Checked against the TensorRT 10.0 ONNX parser's documented support (onnx-tensorrt
``docs/operators.md``: opsets 9-20; the operator matrix; FLOAT/FLOAT16/BFLOAT16/INT32/INT64/
INT8/UINT8/BOOL tensors, DOUBLE only by a lossy cast). :data:`TRT_SUPPORTED_OPS` is the
subset of that matrix a control policy plausibly uses; an op outside it is reported as
"not in the checked list" (it may still be supported; extend the list after checking the
matrix). The device graph must also have static shapes (no optimisation profile needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "TRT_MAX_OPSET",
    "TRT_MIN_OPSET",
    "TRT_SUPPORTED_OPS",
    "TrtCompatReport",
    "check_tensorrt_compat",
]

TRT_MIN_OPSET, TRT_MAX_OPSET = 9, 20

#: ONNX ops listed as supported (Y) in the TensorRT 10.0 onnx-tensorrt operator matrix.
TRT_SUPPORTED_OPS = frozenset({
    "Abs", "Add", "And", "ArgMax", "ArgMin", "BatchNormalization", "Cast", "Ceil", "Clip",
    "Concat", "Constant", "ConstantOfShape", "Conv", "Cos", "CumSum", "Div", "Dropout", "Einsum",
    "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "GRU", "Gather", "GatherElements",
    "Gemm", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "If",
    "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "LSTM",
    "MatMul", "Max", "Mean", "Min", "Mish", "Mul", "Neg", "Not", "Or", "Pad", "Pow", "PRelu",
    "RNN", "Reciprocal", "ReduceL2", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum",
    "Relu", "Reshape", "Round", "Selu", "Shape", "Sigmoid", "Sign", "Sin", "Slice", "Softmax",
    "Softplus", "Softsign", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile",
    "Transpose", "Unsqueeze", "Where",
})

# onnx.TensorProto data types.
_FLOAT, _UINT8, _INT8, _INT32, _INT64, _BOOL, _FLOAT16, _DOUBLE, _BFLOAT16 = (
    1, 2, 3, 6, 7, 9, 10, 11, 16)
_OK_DTYPES = {_FLOAT, _UINT8, _INT8, _INT32, _INT64, _BOOL, _FLOAT16, _BFLOAT16}


@dataclass
class TrtCompatReport:
    """Findings: ``errors`` make an engine build fail or need manual work; ``warnings`` are
    lossy or need care (DOUBLE casts, dynamic shapes in a non-device graph)."""

    opset: int
    ops: list[str]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    static_shapes: bool = True

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "opset": self.opset, "ops": self.ops,
                "static_shapes": self.static_shapes, "errors": self.errors,
                "warnings": self.warnings,
                "checked_against": f"TensorRT 10 ONNX parser, opsets {TRT_MIN_OPSET}-"
                                   f"{TRT_MAX_OPSET}"}


def _dtype_name(dt: int) -> str:
    import onnx

    try:
        return onnx.TensorProto.DataType.Name(dt)
    except ValueError:
        return f"dtype#{dt}"


def _check_dtype(where: str, dt: int, report: TrtCompatReport) -> None:
    if dt == _DOUBLE:
        report.warnings.append(f"{where}: DOUBLE is cast down to FLOAT by TensorRT (lossy)")
    elif dt not in _OK_DTYPES:
        report.errors.append(f"{where}: dtype {_dtype_name(dt)} is not supported by TensorRT")


def check_tensorrt_compat(model: Any, *, require_static: bool = True) -> TrtCompatReport:
    """Check an ONNX model (path or ``onnx.ModelProto``) against TensorRT's ONNX parser.

    Reports: opset outside 9-20, ops not in :data:`TRT_SUPPORTED_OPS` (including nested
    subgraphs), non-default-domain ops, unsupported tensor dtypes, and graph inputs/outputs
    with symbolic or unknown dimensions (an error when ``require_static``, else a warning).
    """
    import onnx

    if isinstance(model, (str, Path)):
        model = onnx.load(str(model))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    ops: set[str] = set()
    report = TrtCompatReport(opset=opset, ops=[])
    if not TRT_MIN_OPSET <= opset <= TRT_MAX_OPSET:
        report.errors.append(f"opset {opset} is outside TensorRT's supported range "
                             f"{TRT_MIN_OPSET}-{TRT_MAX_OPSET}")

    def visit(graph: Any) -> None:
        for node in graph.node:
            if node.domain not in ("", "ai.onnx"):
                report.errors.append(f"node {node.name or node.op_type}: custom domain "
                                     f"{node.domain!r} op {node.op_type} needs a TensorRT plugin")
                continue
            ops.add(node.op_type)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)
                for g in attr.graphs:
                    visit(g)
        for init in graph.initializer:
            _check_dtype(f"initializer {init.name}", init.data_type, report)

    visit(model.graph)
    report.ops = sorted(ops)
    for op in report.ops:
        if op not in TRT_SUPPORTED_OPS:
            report.errors.append(f"op {op} is not in the checked TensorRT-supported op list")
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for v in values:
            tt = v.type.tensor_type
            _check_dtype(f"{kind} {v.name}", tt.elem_type, report)
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                    for d in tt.shape.dim]
            if not tt.HasField("shape") or any(not isinstance(d, int) or d <= 0 for d in dims):
                report.static_shapes = False
                msg = (f"{kind} {v.name}: shape {dims} is not static (an engine needs an "
                       "optimisation profile)")
                (report.errors if require_static else report.warnings).append(msg)
    return report
