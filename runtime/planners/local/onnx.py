"""``OnnxChunkPlanner``: a bundle's ``planner.onnx`` (observation in, ``H x A`` chunk out) on
one onnxruntime thread, and its factory :func:`onnx_planner` for a planner subprocess."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerHealth, PlannerInfo
from edgerl.runtime.planners.local.delayed import DelayedPlanner

__all__ = ["OnnxChunkPlanner", "onnx_planner"]


class OnnxChunkPlanner:
    """``planner.onnx``: input ``(1, O)`` observation, output ``(1, H*A)`` or ``(1, H, A)``.

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
        in_name, out_name = inputs[0].name, sess.get_outputs()[0].name
        del sess
        self.net = OrtBackend(model, input_name=in_name, output_name=out_name, warmup=3,
                              device=device, trt=trt)
        self.provider = self.net.session.get_providers()[0]
        self.info = info
        if self.net.output.size != info.horizon * info.action_dim:
            raise ValueError(f"{model}: output has {self.net.output.size} elements, expected "
                             f"horizon*action_dim = {info.horizon * info.action_dim}")

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        np.copyto(self.net.input.reshape(-1), observation)
        out = self.net.infer().reshape(self.info.horizon, self.info.action_dim)
        return ActionChunk(actions=out.copy(), t0=now, dt=self.info.dt_s, obs_time=now,
                           source="planner.onnx")

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
