"""The controller stage of a HIL run: which command source drives the link and what it
reports.

The command source is one of: the task's LQR expert at a fixed rate (no bundle,
:class:`~edgerl.hil.lqr.LqrController`); the deployed runtime over a bundle
(:class:`~edgerl.hil.controllers.BundleController`), with the gated client and the plant's
expert as its budgeted planner when the bundle has a gate (:mod:`edgerl.hil.gate`); or, in
fast-loop mode, the chunk streamer whose edits the MCU computes
(:class:`~edgerl.hil.fast_loop.FastLoopController`). Over the deployed runtime the operator
channel (:mod:`edgerl.hil.operator`) and exploration noise may act. :class:`HostSide` holds
them for one run: made before the firmware starts (the gated planner's processes), connected
once the link is up, told of every plant step and episode end, and summarised after.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl.hil.config import HilConfig
from edgerl.hil.controllers import BundleController, Sink
from edgerl.hil.fast_loop import FastLoopController
from edgerl.hil.gate import ExpertBudgetPlanner, expert_budget_planner, plan_cost
from edgerl.hil.lqr import LqrController, lqr_gain, plant_lqr
from edgerl.hil.operator import OperatorChannel, operator_channel
from edgerl.hil.plant import HilPlant
from edgerl.runtime.serial_transport import SerialTransport

__all__ = ["HostSide", "HostSummary", "make_controller"]

Controller = LqrController | BundleController | FastLoopController


def make_controller(bundle: Path | None, fast: bool, plant: Any, rate_hz: float, sink: Sink,
                    transport: SerialTransport, obs_dim: int, *, planner_latency_s: float,
                    budget_planner: Any, gate_policy: str, seed: int) -> Controller:
    """The host side of one HIL run: the fast loop's chunk streamer (``fast`` with a
    ``bundle``: the MCU edits), the task's LQR expert at ``rate_hz`` half a period after the
    plant (no bundle), else the deployed runtime over ``bundle``. The LQR gain, where the
    task has one, is the bundles' planner fallback."""
    gain = plant_lqr(plant)
    if fast and bundle is not None:
        return FastLoopController(bundle, transport, obs_dim, gain,
                                  planner_latency_s=planner_latency_s)
    if bundle is None:
        return LqrController(lqr_gain(plant), rate_hz, sink, transport, 0.5 / rate_hz)
    return BundleController(bundle, rate_hz, sink, transport, obs_dim, int(plant.num_actions),
                            gain, planner_latency_s=planner_latency_s,
                            budget_planner=budget_planner, gate_policy=gate_policy, seed=seed)


@dataclass
class HostSummary:
    """What the host side reports after the episodes.

    Attributes:
        host_ticks: Commands the host computed (None for the fast loop: the MCU computes).
        planner_latencies_s: Planner latencies (s, observation -> chunk) the host measured.
        operator: The operator channel's counts (empty without one).
        fast_loop: The fast loop's numbers from the firmware's telemetry (empty otherwise).
    """

    host_ticks: int | None = None
    planner_latencies_s: list[float] = field(default_factory=list)
    operator: dict[str, Any] = field(default_factory=dict)
    fast_loop: dict[str, Any] = field(default_factory=dict)


class HostSide:
    """The command source of one run, with its gated planner and operator channel.

    Args:
        cfg: The run. plant: The plant (a gated planner's expert reads it; the plant then
            steps under the expert's lock).

    Attributes:
        experts: The gated planner's host expert (None without a gate).
        controller: The command source (None until :meth:`connect`).
        channel: The operator channel (None without an operator or a recording).
        costs_at_ends: The planning price paid by each episode's end (None entries without
            a gate).
    """

    def __init__(self, cfg: HilConfig, plant: HilPlant) -> None:
        self.cfg = cfg
        self.plant = plant
        self.fast = cfg.mode == "fast-loop"
        self.experts: ExpertBudgetPlanner | None = expert_budget_planner(
            cfg.bundle, plant.env, cfg.seed, self.fast, cfg.gate_policy, cfg.budget_workers)
        if self.experts is not None:
            plant.share(self.experts.lock)
        self.controller: Controller | None = None
        self.channel: OperatorChannel | None = None
        self.costs_at_ends: list[float | None] = []
        self._on_reset: Any = None

    def _connected(self) -> Controller:
        if self.controller is None:
            raise RuntimeError("HostSide.connect() first: no command source yet")
        return self.controller

    @property
    def client(self) -> Any:
        """The deployed runtime's planner client (None for the LQR expert, the fast loop)."""
        return getattr(self.controller, "client", None)

    def connect(self, sink: Sink, transport: SerialTransport) -> None:
        """Make the command source on the connected link (commands go through ``sink``),
        with exploration noise and the operator channel over the deployed runtime."""
        cfg = self.cfg
        self.controller = controller = make_controller(
            cfg.bundle, self.fast, self.plant.env, self.plant.rate, sink, transport,
            self.plant.obs_dim, planner_latency_s=cfg.planner_latency_s,
            budget_planner=self.experts, gate_policy=cfg.gate_policy, seed=cfg.seed)
        if isinstance(controller, BundleController):
            if cfg.explore_std:
                controller.loop.explore(cfg.explore_std, cfg.explore_seed)
            self.channel = operator_channel(cfg.operator, cfg.record, controller.loop,
                                            self.plant.env, cfg.bundle)
        self._on_reset = getattr(controller, "episode_reset", None)

    def start(self, t0: float) -> None:
        """Start commanding; the first plant step is at ``t0`` (monotonic s)."""
        self._connected().start(t0)

    def episode_reset(self) -> None:
        """The plant started a new episode: the command source drops the old one's plans
        (before the new episode's first state goes out)."""
        if self._on_reset is not None:
            self._on_reset(time.perf_counter())

    def observe(self, obs: Any, done: bool) -> None:
        """After a plant step: the operator watches the plant state."""
        if self.channel is not None:
            self.channel.observe(obs, done)

    def end_episode(self) -> None:
        """An episode ended: the operator forgets its takeover, the recording gets its
        ticks, and the planning price paid so far is noted."""
        if self.channel is not None:
            self.channel.end_episode()
        self.costs_at_ends.append(plan_cost(self.client))

    def finish(self) -> HostSummary:
        """Stop commanding and summarise (the operator channel closes its recording)."""
        controller = self._connected()
        controller.stop()
        if self.costs_at_ends:  # plans asked after the last episode ended are the last one's
            self.costs_at_ends[-1] = plan_cost(self.client)
        out = HostSummary(host_ticks=_host_ticks(controller))
        out.operator = {} if self.channel is None else self.channel.close()
        loop = getattr(controller, "loop", None)
        if loop is not None:
            out.planner_latencies_s = list(loop.metrics.planner_latency_s)
        if isinstance(controller, FastLoopController):
            out.planner_latencies_s = list(controller.planner_latencies_s)
            out.fast_loop = controller.summary()
        return out

    def close(self) -> None:
        """Stop everything this stage started (idempotent; also after an error)."""
        if self.controller is not None:
            self.controller.stop()
        if self.experts is not None:
            self.experts.close()
        if self.channel is not None:
            self.channel.close()


def _host_ticks(controller: Any) -> int | None:
    """Commands the host computed in the episodes (LQR ticks, or the edit loop's ticks;
    None for the fast loop, where the MCU computes them): one per plant step is the design,
    ``host_ticks_per_step`` in the JSON."""
    loop = getattr(controller, "loop", None)
    if loop is not None:
        return int(loop.metrics.ticks)
    ticks = getattr(controller, "ticks", None)  # the fast loop's are the MCU's tick records
    return ticks if isinstance(ticks, int) else None
