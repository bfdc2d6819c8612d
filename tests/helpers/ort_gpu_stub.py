"""A stub ``onnxruntime-gpu`` distribution for tests on machines without a GPU.

``write_ort_gpu_stub(site)`` writes ``onnxruntime_gpu-1.23.2.dist-info`` and an
``onnxruntime`` package into ``site``; with ``site`` first on ``PYTHONPATH`` (in a fresh
process), ``import onnxruntime`` gives the real CPU onnxruntime's API with the provider list
of a GPU build (TensorRT, CUDA, CPU) and ``onnxruntime.ASKED``, the providers and provider
options every ``InferenceSession`` was created with. The real onnxruntime then runs on CPU.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["write_ort_gpu_stub"]

_STUB_INIT = '''
"""Stub of NVIDIA's onnxruntime-gpu for tests: the real CPU onnxruntime underneath, the
provider list of a GPU build on top, and a record of what sessions were asked for."""
import importlib
import os
import sys

_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_stub = sys.modules.pop("onnxruntime")
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_real = importlib.import_module("onnxruntime")
sys.path.insert(0, _here)
for _k in dir(_real):
    if not _k.startswith("__"):
        setattr(_stub, _k, getattr(_real, _k))
sys.modules["onnxruntime"] = _stub
STUB = True
ASKED = []


def get_available_providers():
    return ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


class InferenceSession(_real.InferenceSession):
    def __init__(self, path_or_bytes, sess_options=None, providers=None,
                 provider_options=None, **kwargs):
        ASKED.append({"providers": list(providers or []),
                      "provider_options": list(provider_options or [])})
        super().__init__(path_or_bytes, sess_options, providers=providers,
                         provider_options=provider_options, **kwargs)
'''


def write_ort_gpu_stub(site: Path) -> Path:
    """Write the stub distribution into ``site`` (created); returns ``site``."""
    site = Path(site)
    dist = site / "onnxruntime_gpu-1.23.2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime-gpu\n"
                                   "Version: 1.23.2\n")
    (dist / "top_level.txt").write_text("onnxruntime\n")
    (dist / "RECORD").write_text("")
    (site / "onnxruntime").mkdir()
    (site / "onnxruntime" / "__init__.py").write_text(textwrap.dedent(_STUB_INIT))
    return site
