"""``make_spec``: one builder of valid :class:`edgerl.PolicySpec` manifests for every test.

Sizes and timing are arguments; names, units and limits default to ``o0..``/``a0..``, unit
"1" and +-1; ``observation``/``action`` dicts override those specs' fields; any other
PolicySpec field (``task``, ``latency``, ``recurrent``, ``chunk``, ...) is passed as is.
"""

from __future__ import annotations

from typing import Any

from edgerl.contract.edit_obs import EditObsConfig
from edgerl.contract.spec import ActionSpec, ChunkSpec, ObservationSpec, PolicySpec

__all__ = ["make_spec"]


def make_spec(obs_dim: int = 4, action_dim: int = 2, method: str = "edit",
              control_hz: float = 100.0, horizon: int = 10, chunk_dt: float | None = None,
              period_s: float = 0.05, residual_bound: float = 0.25,
              max_rate: list[float] | None = None, lookahead: int = 2,
              n_committed: int = 2, obs_indices: list[int] | None = None, *,
              intent_dim: int = 0,
              expected_latency_s: float = 0.03, task: str = "test-task",
              observation: ObservationSpec | dict[str, Any] | None = None,
              action: ActionSpec | dict[str, Any] | None = None,
              **fields: Any) -> PolicySpec:
    """A valid manifest: obs ``obs_dim`` (mean 0, std 1), action ``action_dim`` (limits +-1,
    rates unlimited unless ``max_rate``), chunk ``horizon`` rows ``chunk_dt`` s apart (default
    one control period) queried every ``period_s`` s; the edit observation reads a planner
    intent of ``intent_dim`` values. ``observation``/``action``: a whole spec, or a dict of
    fields replacing the defaults."""
    if not isinstance(observation, ObservationSpec):
        observation = ObservationSpec(**{
            "names": [f"o{i}" for i in range(obs_dim)], "units": ["1"] * obs_dim,
            "mean": [0.0] * obs_dim, "std": [1.0] * obs_dim, **(observation or {})})
    if not isinstance(action, ActionSpec):
        action = ActionSpec(**{
            "names": [f"a{i}" for i in range(action_dim)], "units": ["1"] * action_dim,
            "low": [-1.0] * action_dim, "high": [1.0] * action_dim, "max_rate": max_rate or [],
            **(action or {})})
    kwargs: dict[str, Any] = dict(
        task=task, method=method, control_hz=control_hz, observation=observation, action=action,
        chunk=ChunkSpec(horizon=horizon, dt_s=chunk_dt or 1.0 / control_hz, period_s=period_s,
                        expected_latency_s=expected_latency_s),
        edit_obs=EditObsConfig(obs_dim=obs_dim, action_dim=action_dim, lookahead=lookahead,
                               n_committed=n_committed, obs_indices=obs_indices or [],
                               intent_dim=intent_dim),
        residual_bound=residual_bound)
    return PolicySpec(**{**kwargs, **fields})
