"""Run the bundle's prebuilt ``policy.engine`` (``edgerl export --trt``) with TensorRT directly.

A serialized TensorRT engine only loads on the TensorRT version and GPU it was built for, so
it is used only when it *matches*: :func:`engine_status` checks that the file is in the
manifest (its sha256 was verified by the bundle loader), that the policy is feed-forward,
that ``tensorrt`` (JetPack's ``python3-libnvinfer``, or ``pip install tensorrt``) and the
CUDA runtime library load, that TensorRT deserializes the engine, and that its I/O tensors
are the manifest's names with static float32 shapes. Anything else returns the reason, and
the loader falls back to onnxruntime (whose TensorRT EP keeps its own engine cache).

Device memory comes from the CUDA runtime through ``ctypes`` (``libcudart.so``: no torch,
no pycuda). :class:`TensorRTEngineBackend` follows the backend protocol of
:mod:`edgerl.runtime.inference`: ``input`` ``(1, D)`` and ``output`` ``(1, A)`` float32
host buffers, ``infer()`` = copy in, ``execute_async_v3``, copy out, synchronize.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.spec import PolicySpec

__all__ = ["ENGINE_FILE", "TensorRTEngineBackend", "engine_status"]

log = logging.getLogger(__name__)

ENGINE_FILE = "policy.engine"
_H2D, _D2H = 1, 2  # cudaMemcpyKind


def _cudart() -> Any:
    """``libcudart`` through ctypes, or raise ``OSError`` naming what was tried."""
    names = [ctypes.util.find_library("cudart"), "libcudart.so", "libcudart.so.12",
             "libcudart.so.11.0"]
    errors = []
    for name in (n for n in names if n):
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    raise OSError("CUDA runtime library not found (" + "; ".join(errors) + ")")


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"CUDA {what} failed with error {rc}")


def engine_status(spec: PolicySpec, bundle_dir: str | Path) -> tuple[bool, str]:
    """``(usable, reason)`` for the bundle's ``policy.engine`` on this machine (cheap checks
    only; deserialization is checked by :class:`TensorRTEngineBackend`)."""
    path = Path(bundle_dir) / ENGINE_FILE
    if not path.is_file():
        return False, f"no {ENGINE_FILE} in the bundle"
    if ENGINE_FILE not in spec.files:
        return False, f"{ENGINE_FILE} is not listed in manifest.files (hash unchecked)"
    if spec.recurrent.kind != "none":
        return False, f"{ENGINE_FILE}: recurrent policies run through onnxruntime"
    try:
        import tensorrt as trt
    except ImportError as exc:
        return False, f"the tensorrt Python package is not importable ({exc})"
    try:
        _cudart()
    except OSError as exc:
        return False, str(exc)
    return True, f"tensorrt {trt.__version__}"


class TensorRTEngineBackend:
    """A deserialized TensorRT engine with preallocated host and device buffers.

    Raises:
        RuntimeError: the engine does not deserialize here (other TensorRT version or GPU),
            or its I/O does not match the manifest (names, static float32 shapes).
    """

    def __init__(self, spec: PolicySpec, bundle_dir: str | Path, warmup: int = 20) -> None:
        import tensorrt as trt

        self._cuda = _cudart()
        path = Path(bundle_dir) / ENGINE_FILE
        self._logger = trt.Logger(trt.Logger.ERROR)
        self._runtime = trt.Runtime(self._logger)
        self.engine = self._runtime.deserialize_cuda_engine(path.read_bytes())
        if self.engine is None:
            raise RuntimeError(f"{path}: TensorRT {trt.__version__} cannot deserialize it "
                               "(built by another TensorRT version or for another GPU)")
        self.context = self.engine.create_execution_context()
        want = {spec.tensors.inputs[0]: True, spec.tensors.outputs[0]: False}
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        if sorted(names) != sorted(want):
            raise RuntimeError(f"{path}: engine tensors {names} are not the manifest's "
                               f"{list(want)}")
        self._host: dict[str, np.ndarray] = {}
        self._dev: dict[str, ctypes.c_void_p] = {}
        self._stream = ctypes.c_void_p()
        for name, is_input in want.items():
            shape = tuple(self.engine.get_tensor_shape(name))
            if any(d < 0 for d in shape) or \
                    self.engine.get_tensor_dtype(name) != trt.DataType.FLOAT:
                raise RuntimeError(f"{path}: tensor {name} must be static float32, got "
                                   f"{shape} {self.engine.get_tensor_dtype(name)}")
            if (self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT) != is_input:
                raise RuntimeError(f"{path}: tensor {name} has the wrong direction")
            host = np.zeros(shape, dtype=np.float32).reshape(1, -1)
            ptr = ctypes.c_void_p()
            _check(self._cuda.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(host.nbytes)),
                   "cudaMalloc")
            self._host[name], self._dev[name] = host, ptr
            self.context.set_tensor_address(name, ptr.value)
        self.input = self._host[spec.tensors.inputs[0]]
        self.output = self._host[spec.tensors.outputs[0]]
        src, dst = self._dev[spec.tensors.inputs[0]], self._dev[spec.tensors.outputs[0]]
        self._in_args = (src, ctypes.c_void_p(self.input.ctypes.data),
                         ctypes.c_size_t(self.input.nbytes))
        self._out_args = (ctypes.c_void_p(self.output.ctypes.data), dst,
                          ctypes.c_size_t(self.output.nbytes))
        _check(self._cuda.cudaStreamCreate(ctypes.byref(self._stream)), "cudaStreamCreate")
        self.name = f"tensorrt:{ENGINE_FILE}"
        self.provider = "TensorRT engine"
        for _ in range(warmup):
            self.infer()

    def infer(self) -> np.ndarray:
        """Run on ``self.input``; returns ``self.output`` (filled in place)."""
        cuda = self._cuda
        _check(cuda.cudaMemcpyAsync(*self._in_args, _H2D, self._stream), "copy in")
        if not self.context.execute_async_v3(self._stream.value):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        _check(cuda.cudaMemcpyAsync(*self._out_args, _D2H, self._stream), "copy out")
        _check(cuda.cudaStreamSynchronize(self._stream), "cudaStreamSynchronize")
        return self.output

    def reset_state(self) -> None:
        """Feed-forward: nothing to reset."""

    def close(self) -> None:
        """Free the device buffers and the stream (idempotent)."""
        for ptr in self._dev.values():
            if ptr.value:
                self._cuda.cudaFree(ptr)
                ptr.value = None
        self._dev = {}
        if self._stream.value:
            self._cuda.cudaStreamDestroy(self._stream)
            self._stream = ctypes.c_void_p()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing to free into
            self.close()
