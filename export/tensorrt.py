"""Build a TensorRT engine from ``policy.onnx`` and check it against onnxruntime.

Uses the TensorRT (>= 10) Python API directly: ``Builder`` -> ``OnnxParser`` ->
``build_serialized_network`` (fp16 flag optional) -> ``Runtime.deserialize_cuda_engine``;
device buffers are torch CUDA tensors (torch is present wherever ``edgerl export`` runs), so no
pycuda/cuda-python is needed. Where ``import tensorrt`` fails or no CUDA device is visible,
:func:`tensorrt_status` says what is missing and :func:`build_engine` raises
:class:`TensorRTUnavailable` with that message.

On a device with the runtime install only (no torch: ``edgerl trt-engine`` on a Jetson),
``tensorrt_status(torch_cuda=False)`` looks for the CUDA device through the CUDA runtime
library instead (:func:`cuda_status`, ``ctypes``), and :func:`build_engine` needs no torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["TensorRTUnavailable", "TrtRunner", "build_engine", "cuda_status", "tensorrt_status"]

log = logging.getLogger(__name__)


class TensorRTUnavailable(RuntimeError):
    """TensorRT or a CUDA device is missing on this machine."""


#: CUDA runtime library names tried after ``ctypes.util.find_library("cudart")`` (JetPack 6 and
#: x86_64 CUDA 12 install ``libcudart.so.12``; the unversioned name needs the -dev package).
_CUDART_NAMES = ("libcudart.so", "libcudart.so.12", "libcudart.so.11.0")
_ATTR_CC_MAJOR, _ATTR_CC_MINOR = 75, 76  # cudaDevAttrComputeCapabilityMajor / Minor


def cuda_status() -> tuple[bool, str]:
    """``(usable, message)``: whether the CUDA runtime library loads and sees a device.

    Through ``ctypes`` (no torch, no pycuda), so it works on a ``[runtime]``-only install. The
    message names the library names tried, the CUDA error, or the device's compute capability.
    """
    names = [n for n in (ctypes.util.find_library("cudart"), *_CUDART_NAMES) if n]
    errors = []
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    else:
        return False, ("the CUDA runtime library (libcudart) is not loadable ("
                       + "; ".join(errors) + "); install CUDA (JetPack ships it)")
    count = ctypes.c_int(0)
    rc = lib.cudaGetDeviceCount(ctypes.byref(count))
    if rc != 0 or count.value < 1:
        return False, (f"no CUDA device is visible (cudaGetDeviceCount: error {rc}, "
                       f"{count.value} devices)")
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    lib.cudaDeviceGetAttribute(ctypes.byref(major), _ATTR_CC_MAJOR, 0)
    lib.cudaDeviceGetAttribute(ctypes.byref(minor), _ATTR_CC_MINOR, 0)
    return True, f"CUDA device 0 of {count.value} (compute capability {major.value}.{minor.value})"


def tensorrt_status(*, torch_cuda: bool = True) -> tuple[bool, str]:
    """``(usable, message)``: whether ``tensorrt`` (>= 10) imports and a CUDA device is visible.

    ``torch_cuda``: look for the device through torch (``edgerl export --trt``, whose check
    runs the engine on torch CUDA buffers); False: through the CUDA runtime library
    (:func:`cuda_status`), for a device without torch.
    """
    try:
        import tensorrt as trt
    except ImportError as exc:
        return False, (f"the tensorrt Python package is not importable ({exc}); install "
                       "TensorRT >= 10 (pip install tensorrt, or JetPack on a Jetson)")
    if torch_cuda:
        try:
            import torch
        except ImportError:
            return False, "torch is needed for the TensorRT check's CUDA buffers"
        if not torch.cuda.is_available():
            return False, f"tensorrt {trt.__version__} imports but no CUDA device is visible"
        device = torch.cuda.get_device_name(0)
    else:
        ok, device = cuda_status()
        if not ok:
            return False, f"tensorrt {trt.__version__} imports but {device}"
    major = int(str(trt.__version__).split(".")[0])
    if major < 10:
        return False, f"tensorrt {trt.__version__} is too old; edgerl needs >= 10"
    return True, f"tensorrt {trt.__version__} on {device}"


def _require(*, torch_cuda: bool = True) -> Any:
    ok, msg = tensorrt_status(torch_cuda=torch_cuda)
    if not ok:
        raise TensorRTUnavailable(msg)
    import tensorrt as trt

    return trt


def build_engine(onnx_path: str | Path, engine_path: str | Path, *, fp16: bool = False,
                 workspace_bytes: int = 1 << 28, torch_cuda: bool = True) -> Path:
    """Parse ``onnx_path`` and write a serialized engine to ``engine_path``.

    ``fp16`` enables FP16 kernels (``BuilderFlag.FP16``); TensorRT keeps FP32 where faster.
    ``torch_cuda``: how the availability check looks for the CUDA device (see
    :func:`tensorrt_status`; the build itself needs no torch). Raises
    :class:`TensorRTUnavailable` or ``RuntimeError`` with the parser's errors.
    """
    trt = _require(torch_cuda=torch_cuda)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(Path(onnx_path).read_bytes()):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise RuntimeError(f"TensorRT could not parse {onnx_path}: {'; '.join(errors)}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    else:  # TF32 (on by default on Ampere+) would cost ~1e-3 of fp32 accuracy
        config.clear_flag(trt.BuilderFlag.TF32)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"TensorRT failed to build an engine from {onnx_path}")
    engine_path = Path(engine_path)
    engine_path.write_bytes(bytes(serialized))
    log.info("built TensorRT engine %s (fp16=%s)", engine_path, fp16)
    return engine_path


class TrtRunner:
    """Run a serialized engine: ``runner([obs, *state]) -> [action, *state_out]`` (numpy).

    Inputs and outputs follow the engine's I/O tensor order; shapes must be static.
    """

    def __init__(self, engine_path: str | Path) -> None:
        trt = _require()
        import torch

        self._torch = torch
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._logger)
        self.engine = self._runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
        if self.engine is None:
            raise RuntimeError(f"{engine_path}: TensorRT could not deserialize the engine")
        self.context = self.engine.create_execution_context()
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self._buffers: dict[str, Any] = {}
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            shape = tuple(self.engine.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise RuntimeError(f"engine tensor {name} has a dynamic shape {shape}")
            if self.engine.get_tensor_dtype(name) != trt.DataType.FLOAT:
                raise RuntimeError(f"engine tensor {name} is "
                                   f"{self.engine.get_tensor_dtype(name)}, expected FLOAT")
            buf = torch.zeros(shape, dtype=torch.float32, device="cuda")
            self._buffers[name] = buf
            self.context.set_tensor_address(name, buf.data_ptr())
            is_input = self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            (self.inputs if is_input else self.outputs).append(name)

    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        torch = self._torch
        for name, arr in zip(self.inputs, arrays):
            self._buffers[name].copy_(torch.from_numpy(np.ascontiguousarray(arr, np.float32)))
        stream = torch.cuda.current_stream()
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        stream.synchronize()
        return [self._buffers[name].cpu().numpy() for name in self.outputs]
