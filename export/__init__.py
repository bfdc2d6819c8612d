"""edgerl.export: policy bundles (ONNX + manifest.json + parity report, TensorRT, C header)."""

from __future__ import annotations
