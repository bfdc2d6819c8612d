"""edgerl.export: policy bundles (ONNX + manifest.json + parity report, TensorRT, C header).

Needs torch and onnx (the ``[export]`` extra); the runtime reads bundles without either.
Entry point: :func:`edgerl.export.bundle.export_bundle` (its checks in ``bundle_parity``, its
manifest in ``bundle_manifest``). Sub-modules: ``onnx_export``
(torch -> ONNX), ``parity`` (torch vs onnxruntime), ``trt_compat`` (static TensorRT check),
``tensorrt`` (engine build where TensorRT exists), ``c_header`` (``policy.h`` for firmware).
"""

from __future__ import annotations

__all__ = ["BundleReport", "ExportError", "export_bundle"]


def __getattr__(name: str):
    # Lazy: ``import edgerl.export`` stays cheap until the exporter is used.
    if name == "export_bundle":
        from edgerl.export.bundle import export_bundle

        return export_bundle
    if name == "BundleReport":
        from edgerl.export.bundle_parity import BundleReport

        return BundleReport
    if name == "ExportError":
        from edgerl.export.onnx_export import ExportError

        return ExportError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
