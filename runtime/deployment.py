"""``Deployment.from_bundle``: the runtime assembled the way the bundle was trained.

One place turns a bundle into a running fast loop: the manifest's ``timing`` picks the
chunk merge rule (``ChunkBuffer``), the stale rule and the tick trigger (``EditLoop``), and
``planner.onnx`` (when present) becomes the planner client's ONNX planner with the chunk
period. A bundle with a ``gate`` section and a budgeted planner gets the
:class:`~edgerl.runtime.gate.client.GatedPlannerClient` instead: ``gate.onnx`` chooses the
budget every decision, the client honours it. The ROS 2 edit node, the HIL harness and
``edgerl bench loop`` build their loop here instead of wiring it by hand.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgerl.contract.spec import PolicySpec
from edgerl.runtime.bundle import PLANNER_FILE, load_bundle
from edgerl.runtime.chunk_buffer import ChunkBuffer, MergeConfig
from edgerl.runtime.edit_loop import CommandSink, EditLoop, LoopConfig, ObservationSlot
from edgerl.runtime.gate.budget_gate import make_chooser
from edgerl.runtime.gate.client import BudgetedPlanner, GatedPlannerClient
from edgerl.runtime.inference import InferenceBackend
from edgerl.runtime.input_guard import InputGuard
from edgerl.runtime.metrics import LoopMetrics
from edgerl.runtime.planners.client.client import PlannerClient, PlannerClientConfig

__all__ = ["Deployment"]

log = logging.getLogger(__name__)


@dataclass
class Deployment:
    """A bundle's runtime: ``loop`` (with its ``buffer``) and an optional planner ``client``.

    Attributes:
        spec: The manifest. backend: Its policy network (``None``: planner-only bundle).
        buffer: The chunk store, merging by ``spec.timing``.
        loop: The fast loop (trigger and stale rule from ``spec.timing`` unless overridden).
        client: Planner client running ``planner.onnx`` (or the given planner), the gated
            client (gate + budgeted planner), or ``None``.
    """

    spec: PolicySpec
    backend: InferenceBackend | None
    buffer: ChunkBuffer
    loop: EditLoop
    client: PlannerClient | GatedPlannerClient | None = None

    @classmethod
    def from_bundle(cls, path: str | Path, sink: CommandSink | None = None, *,
                    loop_cfg: LoopConfig | None = None, merge: str = "",
                    obs: ObservationSlot | None = None, planner: Any = "auto",
                    planner_cfg: PlannerClientConfig | None = None,
                    extra_latency_s: float = 0.0, backend: str = "onnx",
                    device: str = "cpu", warmup: int = 20, trt: Any = None,
                    budget_planner: BudgetedPlanner | None = None, gate_policy: str = "gate",
                    gate_seed: int = 0) -> Deployment:
        """Load ``path`` and connect buffer, loop and planner client from its manifest.

        Args:
            path: Bundle directory.
            sink: Where commands go.
            loop_cfg: Loop options (``trigger=""``: the manifest's).
            merge: Override the manifest's merge rule (``""``: ``timing.merge``).
            obs: Observation slot to use (e.g. a ROS node's stamped slot).
            planner: ``"auto"`` (``planner.onnx`` when the bundle has one, else none),
                ``"none"``, ``"onnx"`` (required), or a ``Planner`` object.
            planner_cfg: Planner client options (default: thread mode, the manifest's
                chunk period).
            extra_latency_s: Added to every planner call (emulates a slow model).
            backend / device / warmup / trt: Inference backend and its device and TensorRT EP
                options (see ``load_bundle``).
            budget_planner: With a bundle that has a ``gate``: the planner whose budgets the
                gate chooses (replaces ``planner``); ``gate_policy``: ``gate`` (gate.onnx) or
                a baseline (``fixed:NAME``, ``age:NAME:X``), ``gate:sample`` to sample the network;
                ``gate_seed`` seeds the delays and the samples.
        """
        path = Path(path)
        spec, net = load_bundle(path, backend=backend, device=device, warmup=warmup, trt=trt)
        buffer = ChunkBuffer(MergeConfig.from_timing(spec.timing, merge), spec.action.dim,
                             intent_dim=spec.edit_obs.intent_dim)
        loop = EditLoop(spec, net, buffer, obs=obs, sink=sink, cfg=loop_cfg)
        client: PlannerClient | GatedPlannerClient | None
        if budget_planner is not None:
            if spec.gate is None:
                raise ValueError(f"{path}: a budgeted planner needs a bundle with a gate "
                                 "(`edgerl gate export`)")
            chooser = make_chooser(path, spec, gate_policy, gate_seed)
            client = GatedPlannerClient(chooser, budget_planner, buffer, loop.obs,
                                        metrics=loop.metrics, seed=gate_seed)
            planner = f"gated by {chooser.name} ({', '.join(spec.gate.names)})"
        else:
            client = cls._client(path, spec, buffer, loop.obs, loop.metrics, planner,
                                 planner_cfg, extra_latency_s)
        if client is not None:  # the planner's chunks are checked against the manifest
            buffer.guard = InputGuard(spec)
        log.info("deployment %s: merge %s, stale after H+%d, trigger %s, planner %s", path,
                 buffer.merge.policy, spec.timing.stale_steps, loop.trigger,
                 "none" if client is None else planner)
        return cls(spec=spec, backend=net, buffer=buffer, loop=loop, client=client)

    @staticmethod
    def _client(path: Path, spec: PolicySpec, buffer: ChunkBuffer, obs: ObservationSlot,
                metrics: LoopMetrics, planner: Any, planner_cfg: PlannerClientConfig | None,
                extra_latency_s: float) -> PlannerClient | None:
        ch = spec.chunk
        cfg = planner_cfg or PlannerClientConfig(period_s=ch.period_s)
        if isinstance(planner, str):
            if planner not in ("auto", "none", "onnx"):
                raise ValueError(f"planner must be auto, none, onnx or a Planner, got "
                                 f"{planner!r}")
            onnx_file = path / PLANNER_FILE
            if planner == "none" or (planner == "auto" and not onnx_file.is_file()):
                return None
            if not onnx_file.is_file():
                raise FileNotFoundError(f"{onnx_file}: the bundle has no planner network")
            kwargs = {"model": str(onnx_file), "horizon": ch.horizon,
                      "action_dim": spec.action.dim, "dt_s": ch.dt_s,
                      "period_s": cfg.period_s or ch.period_s,
                      "extra_latency_s": extra_latency_s}
            cfg = dataclasses.replace(cfg, factory_kwargs={**cfg.factory_kwargs, **kwargs})
            return PlannerClient("edgerl.runtime.planners.local.onnx:onnx_planner", buffer, obs,
                                 cfg, metrics=metrics)
        if extra_latency_s > 0:
            from edgerl.runtime.planners.local.delayed import DelayedPlanner

            planner = DelayedPlanner(planner, extra_latency_s)
        return PlannerClient(planner, buffer, obs, cfg, metrics=metrics)

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the planner client, then the loop thread."""
        if self.client is not None:
            self.client.start()
        self.loop.start()

    def stop(self) -> None:
        """Stop the loop, then the planner client (idempotent)."""
        if self.loop.running:
            self.loop.stop()
        if self.client is not None:
            self.client.stop()

    def episode_reset(self, t: float) -> None:
        """A new episode started at monotonic ``t``: drop chunks planned before it, clear the
        loop's history at its next tick, replan at once."""
        self.buffer.reset(t)
        self.loop.request_reset()
        if self.client is not None:
            self.client.replan_now()
