"""``EditNodeDiagnostics``: what the edit node reports on ``/diagnostics`` (a mixin of
:class:`~edgerl_ros.edit_policy_node.EditPolicyNode`): rate, trigger, tick compute split into
policy and publish, jitter, state age at the tick, chunk age, planner latency, the loop's
state and escalation step, safety interventions and dropped inputs by reason.
"""

from __future__ import annotations

from typing import Any

from edgerl_ros.node_diagnostics import Report

__all__ = ["EditNodeDiagnostics"]


class EditNodeDiagnostics:
    """:meth:`values` (the key/value list) and :meth:`_report`, what the node's
    :class:`~edgerl_ros.node_diagnostics.NodeDiagnostics` publishes."""

    def values(self) -> dict[str, Any]:
        loop = self.loop
        out: dict[str, Any] = {"lifecycle": "configured" if loop is not None else "unconfigured"}
        if loop is not None:
            m = loop.metrics.summary()
            out.update({
                "configured_rate_hz": loop.rate_hz,
                "trigger": loop.trigger,
                "trigger_timeouts": loop.trigger_timeouts,
                "inline_tick": self._inline is not None,
                "inference": getattr(loop.backend, "name", "none"),
                "rt_priority_applied": self.rt_applied,
                "inline_cpus": ",".join(map(str, self.inline_cpus)),
                "ticks": m["ticks"],
                "commands_sent": self.commands_sent,
                "states_received": self.states_received,
                "states_awaited": self.states_awaited,
                "episode_resets": self.episode_resets,
                "estop_resets": self.estop_resets,
                "chunks_dropped_pre_reset": self.chunks_dropped_pre_reset,
                "tick_compute_p50_us": m["tick_compute_p50_us"],
                "tick_compute_p99_us": m["tick_compute_p99_us"],
                "tick_policy_p50_us": m["tick_policy_p50_us"],
                "tick_policy_p99_us": m["tick_policy_p99_us"],
                "publish_p50_us": m["send_p50_us"],
                "publish_p99_us": m["send_p99_us"],
                "jitter_p50_us": m["jitter_p50_us"],
                "jitter_p99_us": m["jitter_p99_us"],
                "deadline_misses": m["deadline_misses"],
                "state_age_at_tick_p50_ms": self.state_age.percentile(50) * 1e3,
                "state_age_at_tick_p99_ms": self.state_age.percentile(99) * 1e3,
                "chunk_age_p50_ms": m["chunk_age_p50_ms"],
                "planner_latency_p50_ms": m["planner_latency_p50_ms"],
                "planner_latency_p99_ms": m["planner_latency_p99_ms"],
                "state": loop.state, "escalation": loop.safety.escalation.step,
                **{f"escalation {k}": v for k, v in loop.safety.escalation.entered.items()},
                **{f"ticks {k}": v for k, v in m["states"].items()},
                **{f"safety {k}": v for k, v in loop.safety.interventions().items()},
            })
        if self.transitions is not None:  # transitions_file: ticks and records written
            out.update(self.transitions.counts())
        if self.operator is not None:  # operator auth mode, key id, accepted / refused
            out.update(self.operator.values())
        out.update(self.drops.values())
        return out

    def _report(self) -> Report:
        vals = self.values()
        level, message = 0, "ok"
        if self.drops.total:
            level, message = 1, f"dropped bad messages; last: {self.drops.last_reason}"
        if self.loop is not None and self.loop.state not in ("ok",):
            level, message = max(level, 1), f"loop state {self.loop.state}"
        name = self.spec.task if self.spec is not None else ""
        return name, vals, level, message
