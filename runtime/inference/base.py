"""What every inference backend is: the :class:`InferenceBackend` protocol and the errors.

A backend owns preallocated buffers: the caller writes the network input into
``backend.input`` (shape ``(1, D)`` float32) and calls :meth:`InferenceBackend.infer`, which
returns ``backend.output`` (shape ``(1, A)`` float32) filled in place. Nothing is allocated per
call in the steady state.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = ["InferenceBackend", "InferenceError", "ModelIOError", "ModelLoadError"]


class InferenceError(RuntimeError):
    """A backend cannot be built (unknown device, missing provider, bad model shapes)."""


class ModelLoadError(InferenceError):
    """onnxruntime refuses the model file itself (garbage, truncated, invalid graph)."""


class ModelIOError(InferenceError):
    """The model lacks an input/output the manifest names."""


class InferenceBackend(Protocol):
    """``infer()`` runs the network on ``input`` and returns ``output`` (both preallocated).

    Attributes:
        name: Backend and device, e.g. ``"onnxruntime:CPUExecutionProvider"``.
        input: ``(1, D)`` float32 buffer the caller fills before :meth:`infer`.
        output: ``(1, A)`` float32 buffer :meth:`infer` fills.
    """

    name: str
    input: np.ndarray
    output: np.ndarray

    def infer(self) -> np.ndarray: ...

    def reset_state(self) -> None: ...
