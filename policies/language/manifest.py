"""The bundle manifest (:class:`~edgerl.contract.spec.PolicySpec`) of a language planner."""

from __future__ import annotations

from typing import Any

from edgerl.contract.edit_obs import EditObsConfig
from edgerl.contract.spec import ActionSpec, ChunkSpec, LatencyModel, ObservationSpec, PolicySpec
from edgerl.policies.language.config import LanguagePlannerConfig, config_dict

__all__ = ["make_language_spec"]


def make_language_spec(cfg: LanguagePlannerConfig, task_spec: Any,
                       expected_latency_s: float = 0.0) -> PolicySpec:
    """The bundle manifest of a language planner for ``task_spec`` (a sim ``TaskSpec``)."""
    hz = float(task_spec.control_hz)
    n_obs, n_act = task_spec.obs_dim, task_spec.action_dim
    return PolicySpec(
        task=cfg.task, method="language_planner", control_hz=hz,
        observation=ObservationSpec(names=list(task_spec.obs_names),
                                    units=list(task_spec.obs_units), mean=[0.0] * n_obs,
                                    std=[1.0] * n_obs, normalized_in_graph=True),
        action=ActionSpec(names=list(task_spec.action_names),
                          units=list(task_spec.action_units), low=list(task_spec.action_low),
                          high=list(task_spec.action_high)),
        chunk=ChunkSpec(horizon=cfg.horizon, dt_s=1.0 / hz, period_s=cfg.period / hz,
                        expected_latency_s=expected_latency_s),
        edit_obs=EditObsConfig(obs_dim=n_obs, action_dim=n_act),
        latency=LatencyModel(planner_period_steps=cfg.period),
        extra={"language_planner": config_dict(cfg)})
