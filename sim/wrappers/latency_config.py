"""``LatencyCfg``: which method the latency wrapper runs and the delays it models.

Methods (``LatencyCfg.method``):

``nodelay``  the policy acts on the seen observation; only actuator delay applies.
``naive``    the policy's action is applied D steps late (an action queue); D is drawn per
             env at each episode start.
``arli``     like ``naive``, but the policy runs mid-inference: inference starts at step s on
             the observation of s, and at ``t = s + m`` (``m = floor(D * arli_mid_fraction)``)
             it also sees the mid-inference observation and the actions already committed
             (queued, not yet applied); its output is applied at ``s + D = t + D - m``.
             Policy obs = [obs(s) | obs(t) | committed, newest first, zero-padded].
``planner``  chunk rows are executed open loop (the policy's actions are ignored).
``blend``    like ``planner``, but when a new chunk arrives the old and new chunks are blended
             linearly over ``rtc_blend_steps`` steps of their overlap (training-free).
``rtc``      real-time chunking: like ``planner``, but the planner is asked with the committed
             prefix, the current chunk's rows for the D steps its inference will take (what the
             robot executes meanwhile), so the new chunk continues from them. The planner is
             called ``plan(obs, env_ids, prefix (n, D, A))``; a prefix-conditioned BC planner
             (``edgerl.policies.bc_planner``, ``--method rtc --planner bc``) is trained on them.
``edit``     policy obs = ``edgerl.contract.edit_obs.build_edit_obs`` (the runtime's builder) on the
             task's *fast* observation subset (``LatencyCfg.edit_inputs``); the policy
             outputs a residual; command = ``compose_edit_action(row_now, residual,
             edit_bound)`` clipped to the task's action limits.
``edit_zero_chunks``  the ablation of ``edit``: the same network, timing and budget, but every
             chunk the planner delivers is zeros, so the policy learns and acts without the
             planner's information. ``edit`` must beat it for the planner to matter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgerl.contract.methods import CHUNK_METHODS, METHODS, SCHEDULED_METHODS
from edgerl.contract.spec import LatencyModel
from edgerl.contract.timing import TimingSpec

__all__ = ["CHUNK_METHODS", "EDIT_INPUTS", "METHODS", "SCHEDULED_METHODS", "LatencyCfg"]

#: What the edit policy reads of the robot observation.
EDIT_INPUTS = ("fast", "full")

@dataclass
class LatencyCfg:
    """How the latency wrapper times planner, policy, sensor and actuator.

    Attributes:
        method: One of :data:`METHODS`.
        latency: Delays in control steps (``edgerl.contract.spec.LatencyModel``, saved in
        manifests).
        horizon: Chunk horizon H; 0 = ``edgerl.contract.timing.default_horizon``.
        lookahead / n_committed / age_scale_s / age_clip: The edit observation's
            ``EditObsConfig`` fields.
        edit_bound: Largest edit per action element (action units).
        rtc_blend_steps: Blend length for ``blend``; 0 = P.
        arli_mid_fraction: Where in the inference window ARLI's mid observation is taken.
        obs_noise_std: Std of Gaussian noise added to the seen observation (obs units).
        stale_steps: Steps past the chunk's last row before ``has_chunk`` drops; -1 = P.
        random_phase: Per-env random planner phase in ``[0, P)`` (else all query at 0, P..).
        control_dt: Seconds per step; 0 = the wrapped env's ``spec.control_dt``.
        action_low / action_high: Command limits; empty = the env's ``spec`` limits (if any).
        seed: Seed of the wrapper's own generator (delays, noise, phases).
        edit_inputs: ``"fast"``: the edit policy reads the task's fast observation subset
            (``TaskSpec.planner_only`` hidden); ``"full"``: every element (the edit policy
            is then a bounded no-delay policy that may not need the planner at all).
        privileged: ``nodelay`` only: the policy reads the task's privileged ``"critic"``
            group (the upper bound of the result tables).
        intent_dim: Size I of the planner's intent vector, which the edit observation carries
            after the chunk (0 = none; ``edit_zero_chunks`` reads zeros of the same size).
        prefix_planner: ``edit``: the planner is asked with the committed prefix, as for
            ``rtc`` (a planner trained with it: training-time real-time chunking).
    """

    method: str = "edit"
    latency: LatencyModel = field(default_factory=LatencyModel)
    horizon: int = 0
    lookahead: int = 2
    n_committed: int = 2
    age_scale_s: float = 1.0
    age_clip: float = 4.0
    edit_bound: float = 0.5
    rtc_blend_steps: int = 0
    arli_mid_fraction: float = 0.5
    obs_noise_std: float = 0.0
    stale_steps: int = -1
    random_phase: bool = False
    control_dt: float = 0.0
    action_low: list[float] = field(default_factory=list)
    action_high: list[float] = field(default_factory=list)
    seed: int = 0
    edit_inputs: str = "fast"
    privileged: bool = False
    intent_dim: int = 0
    prefix_planner: bool = False

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose from {', '.join(METHODS)}")
        if self.edit_inputs not in EDIT_INPUTS:
            raise ValueError(f"unknown edit_inputs {self.edit_inputs!r}; choose from "
                             f"{', '.join(EDIT_INPUTS)}")
        if self.privileged and self.method != "nodelay":
            raise ValueError(f"privileged observations are the nodelay upper bound only, not "
                             f"{self.method!r}")
        if isinstance(self.latency, dict):
            self.latency = LatencyModel(**self.latency)
        if self.horizon < 0 or self.rtc_blend_steps < 0 or self.stale_steps < -1:
            raise ValueError("horizon and rtc_blend_steps must be >= 0, stale_steps >= -1")
        if not 0.0 <= self.arli_mid_fraction < 1.0:
            raise ValueError(f"arli_mid_fraction must be in [0, 1), got {self.arli_mid_fraction}")
        if self.obs_noise_std < 0 or self.edit_bound < 0 or self.intent_dim < 0:
            raise ValueError("obs_noise_std, edit_bound and intent_dim must be >= 0")

    @classmethod
    def from_timing(cls, timing: TimingSpec, method: str, **kwargs: Any) -> LatencyCfg:
        """The wrapper configuration that trains with ``timing`` (a manifest's): its delays,
        horizon, stale and blend rules and control period; other fields from ``kwargs``."""
        return cls(method=method, latency=timing.latency, horizon=timing.horizon,
                   stale_steps=timing.stale_steps, rtc_blend_steps=timing.blend_steps,
                   control_dt=timing.dt, **kwargs)
