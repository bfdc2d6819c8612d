"""``OnnxChunkPlanner``: a bundle's ``planner.onnx`` (observation in, ``H x A`` chunk out, and
the planner's ``intent`` when the graph exports one) on one onnxruntime thread, and its factory
:func:`onnx_planner` for a planner subprocess."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerHealth, PlannerInfo
from edgerl.runtime.planners.local.delayed import DelayedPlanner

__all__ = ["OnnxChunkPlanner", "onnx_planner"]


#: The output name of a planner's intent vector (``edgerl.export.bundle``'s planner.onnx).
INTENT_OUTPUT = "intent"


class OnnxChunkPlanner:
    """``planner.onnx``: input ``(1, O)`` observation, output ``(1, H*A)`` or ``(1, H, A)``
    first, and optionally a second output ``intent`` ``(1, I)``, which every chunk then
    carries (``info.intent_dim`` is I).

    ``device`` / ``trt``: where onnxruntime runs it (``edgerl.runtime.inference.DEVICES``,
    TensorRT EP options); ``provider`` is the execution provider it really runs on.
    """

    def __init__(self, model: str | Path, info: PlannerInfo, device: str = "cpu",
                 trt: Any = None) -> None:
        import onnxruntime as ort

        from edgerl.runtime.inference import OrtBackend

        sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        inputs = sess.get_inputs()
        if len(inputs) != 1:
            raise ValueError(f"{model}: expected one input (the observation), got "
                             f"{[i.name for i in inputs]}; language-conditioned planners are "
                             "served with `edgerl serve-planner`")
        outputs = [o.name for o in sess.get_outputs()]
        in_name, out_name = inputs[0].name, outputs[0]
        del sess
        extra = (INTENT_OUTPUT,) if INTENT_OUTPUT in outputs[1:] else ()
        self.net = OrtBackend(model, input_name=in_name, output_name=out_name, warmup=3,
                              device=device, trt=trt, extra_outputs=extra)
        self.provider = self.net.session.get_providers()[0]
        self._intent = self.net.extra.get(INTENT_OUTPUT)
        intent_dim = 0 if self._intent is None else int(self._intent.size)
        if info.intent_dim not in (0, intent_dim):
            raise ValueError(f"{model}: intent output has {intent_dim} elements, the planner "
                             f"info says {info.intent_dim}")
        self.info = dataclasses.replace(info, intent_dim=intent_dim)
        if self.net.output.size != info.horizon * info.action_dim:
            raise ValueError(f"{model}: output has {self.net.output.size} elements, expected "
                             f"horizon*action_dim = {info.horizon * info.action_dim}")

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        np.copyto(self.net.input.reshape(-1), observation)
        out = self.net.infer().reshape(self.info.horizon, self.info.action_dim)
        intent = None if self._intent is None else self._intent.reshape(-1).copy()
        return ActionChunk(actions=out.copy(), t0=now, dt=self.info.dt_s, obs_time=now,
                           source="planner.onnx", intent=intent)

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK


def onnx_planner(model: str, horizon: int, action_dim: int, dt_s: float,
                 period_s: float, extra_latency_s: float = 0.0
                 ) -> OnnxChunkPlanner | DelayedPlanner:
    """Factory (``edgerl.runtime.planners.local.onnx:onnx_planner``) for a planner subprocess;
    ``extra_latency_s > 0`` wraps it in a :class:`DelayedPlanner`."""
    info = PlannerInfo(horizon=horizon, action_dim=action_dim, dt_s=dt_s, period_s=period_s,
                       expected_latency_s=0.0)
    planner = OnnxChunkPlanner(model, info)
    return DelayedPlanner(planner, extra_latency_s) if extra_latency_s > 0 else planner
