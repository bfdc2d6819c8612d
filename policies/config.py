"""Training configuration: dataclasses for one run, and their rsl-rl-lib 5.5.1 config dict.

Everything a run needs is one :class:`TrainConfig` (saved as ``config.json`` next to the
checkpoints, reloaded by :func:`edgerl.policies.runs.load_policy`). Units: delays and periods in
control steps of the task; ``residual_bound`` in action units.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from edgerl.contract.methods import METHODS, Method, get_method
from edgerl.contract.serde import SchemaError, from_dict, to_dict
from edgerl.contract.timing import (
    TRIGGERS,
    LatencyModel,
    default_horizon,
    oldest_chunk_age,
    resolve_period,
    sampling_delay_steps,
)
from edgerl.policies.edit_config import DistillConfig, GuardConfig

__all__ = ["CONFIG_NAME", "PLANNER_NAME",
    "EDIT_INPUTS",
    "PLANNERS",
    "BCConfig",
    "ModelConfig",
    "PPOConfig",
    "TrainConfig",
]

#: A run directory's files: the resolved config (+ planner info) and the BC planner weights.
CONFIG_NAME = "config.json"
PLANNER_NAME = "planner.pt"

#: The planner intent's size when ``TrainConfig.intent_dim`` is automatic (a learned planner).
DEFAULT_INTENT_DIM = 8

#: What the edit policy reads of the robot observation (``edgerl.sim.wrappers.EDIT_INPUTS``).
EDIT_INPUTS = ("fast", "full")
#: Planner kinds: the task's scripted expert rolled into chunks, or a behaviour-cloned MLP.
PLANNERS = ("expert", "bc")


@dataclass(frozen=True)
class PPOConfig:
    """rsl_rl ``PPO`` constructor arguments (see ``rsl_rl.algorithms.PPO``).

    Attributes:
        learning_rate: PPO initial learning rate (Adam).
        num_learning_epochs: Passes over each rollout.
        num_mini_batches: PPO minibatches per epoch.
        clip_param: PPO ratio clip epsilon.
        gamma: Discount per control step.
        lam: GAE lambda.
        value_loss_coef: Weight of the value loss.
        entropy_coef: Weight of the entropy bonus.
        max_grad_norm: Gradient norm clip.
        schedule: ``adaptive`` (learning rate follows ``desired_kl``) or ``fixed``.
        desired_kl: Target KL divergence of the adaptive schedule.
    """

    learning_rate: float = 1e-3
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    clip_param: float = 0.2
    gamma: float = 0.99
    lam: float = 0.95
    value_loss_coef: float = 1.0
    entropy_coef: float = 0.005
    max_grad_norm: float = 1.0
    schedule: str = "adaptive"
    desired_kl: float = 0.01


@dataclass(frozen=True)
class ModelConfig:
    """An rsl_rl ``MLPModel``: hidden sizes, activation, empirical obs normalisation.

    ``init_std`` is the initial action std of the actor's Gaussian and ``output_scale``
    multiplies the initial weights of the actor's last layer (bias zeroed when != 1); both are
    ignored for the critic. ``None`` = per method: the ``edit`` residual starts near zero
    (std 0.3, scale 0.01) so training starts from the planner; other methods use 1.0 / 1.0.
    """

    hidden_dims: list[int] = field(default_factory=lambda: [128, 128])
    activation: str = "elu"
    obs_normalization: bool = True
    init_std: float | None = None
    output_scale: float | None = None


@dataclass(frozen=True)
class BCConfig:
    """Behaviour cloning of the chunk planner from expert demonstrations.

    ``demo_envs`` x ``demo_steps`` expert transitions are collected with the plain task
    (no delay); the MLP is fit for ``epochs`` passes with minibatches of ``batch_size``.
    ``expert_noise`` (fraction of the action range) perturbs the executed action (not the
    label) so the demos cover recoveries (DART-style). ``intent_stale_steps`` S (intent
    planners): the decoder learns from intents of observations up to S steps older than its
    own (``edgerl.policies.bc_planner.stale_inputs``), as the edit policy will read them;
    -1 = the oldest a chunk gets before the next one arrives (planner delay + period).
    """

    demo_envs: int = 64
    demo_steps: int = 400
    epochs: int = 30
    batch_size: int = 512
    learning_rate: float = 1e-3
    hidden_dims: list[int] = field(default_factory=lambda: [256, 256])
    expert_noise: float = 0.1
    intent_stale_steps: int = -1


@dataclass(frozen=True)
class TrainConfig:
    """One training run (``edgerl train`` flags map 1:1 onto the top-level fields).

    Attributes:
        task: Registered task name.
        method: A registered method (:data:`edgerl.contract.methods.METHODS`).
        delay_steps: Planner (``edit``/``planner``/``blend``/``rtc``) or action (``naive``/``arli``)
            delay D in control steps. ``nodelay`` always runs with D = 0.
        seed: Seeds torch and the env.
        num_envs: Parallel environments.
        iterations: PPO iterations (each ``num_steps_per_env`` x ``num_envs`` env steps).
        device: Torch device.
        planner: ``expert``, ``bc`` (learned chunk planner) or ``remote:HOST:PORT`` (a
            planner service, e.g. ``edgerl serve-planner --bc TASK``).
        horizon: Planner chunk rows H (0 = automatic: ``edgerl.contract.timing.default_horizon``,
            counting the randomizer's extra planner delay from ``task_kwargs``).
        period_steps: Planner query period P (0 = automatic: ``max(1, D)``).
        residual_bound: ``edit``: the residual moves the chunk row by at most this much
            (action units) per element; 0 = automatic (half the action range: a late chunk
            can be far off, so the fast policy needs the authority to correct it).
        lookahead / n_committed: Edit observation sizes (:class:`edgerl.EditObsConfig`).
        num_steps_per_env: Rollout length per PPO iteration.
        save_interval: Checkpoint every N iterations (the final one is always saved).
        stop_at_success: Stop once the training success rate (last 100 episodes) reaches
            this (0 = run all iterations).
        task_kwargs: Extra keyword arguments for the task factory.
        edit_inputs: ``fast``: the edit policy reads the task's fast observation subset (the
            planner-only fields hidden, as on a robot); ``full``: every field (the edit policy
            is then a bounded no-delay policy).
        privileged: ``nodelay`` only: read the task's privileged observation (the goal the
            planner knows), the upper bound of the result tables.
        latency_model: A measured planner delay model (``edgerl train --latency-model``):
            its delay distribution replaces the fixed ``delay_steps`` (which then only names
            the run); its period is used when ``period_steps`` is 0.
        trigger: What makes the deployed edit loop tick (``edgerl.contract.timing.TRIGGERS``):
            ``state`` (each state message: no sampling delay) or ``clock`` (the loop's own
            grid reads a state up to a period old: trained with one more step of
            observation delay, ``edgerl.contract.timing.sampling_delay_steps``). Saved in the
            manifest.
        intent_dim: Size of the BC planner's intent vector (an encoder bottleneck it exports
            beside each chunk), which the edit policy reads with the chunk; 0 = none; -1 =
            automatic: 8 with a learned (``bc``) planner, else none.
        distill: The edit actor's warm start as the student of the planner without delay
            (:mod:`edgerl.policies.distill`); ``rounds`` 0 = none.
        guard: The choice of the deployed edit actor on validation episodes, the planner
            alone among the candidates (:mod:`edgerl.policies.guard`); ``episodes`` 0 = none.
        planner_prefix: ``edit``: the BC planner is trained with, and asked with, the
            committed prefix (the chunk rows the robot executes while it thinks), as ``rtc``'s
            is: training-time real-time chunking under the edit.
        smooth_weight: ``edit``: during PPO, the cost of a command change in excess of the
            teacher's, in units of the typical reward per step
            (:mod:`edgerl.policies.smoothness`); 0 = off.
    """

    task: str
    method: str = field(metadata={"choices": METHODS})
    delay_steps: int = 0
    seed: int = 0
    num_envs: int = 64
    iterations: int = 100
    device: str = "cpu"
    planner: str = "expert"
    horizon: int = 0
    period_steps: int = 0
    residual_bound: float = 0.0
    lookahead: int = 2
    n_committed: int = 2
    num_steps_per_env: int = 32
    save_interval: int = 50
    stop_at_success: float = 0.0
    ppo: PPOConfig = field(default_factory=PPOConfig)
    actor: ModelConfig = field(default_factory=ModelConfig)
    critic: ModelConfig = field(default_factory=ModelConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    edit_inputs: str = field(default="fast", metadata={"choices": EDIT_INPUTS})
    privileged: bool = False
    latency_model: LatencyModel | None = None
    trigger: str = field(default="state", metadata={"choices": TRIGGERS})
    intent_dim: int = -1
    distill: DistillConfig = field(default_factory=DistillConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    planner_prefix: bool = False
    smooth_weight: float = 0.0

    def __post_init__(self) -> None:
        if self.trigger not in TRIGGERS:
            raise SchemaError(f"trigger: must be one of {', '.join(TRIGGERS)}, got "
                              f"{self.trigger!r}")
        try:
            info = get_method(self.method)
        except ValueError as exc:
            raise SchemaError(f"method: {exc}") from None
        if self.planner not in PLANNERS and not self.planner.startswith("remote:"):
            raise SchemaError(f"planner: unknown planner {self.planner!r}; choose one of "
                              f"{', '.join(PLANNERS)} or remote:HOST:PORT")
        if self.edit_inputs not in EDIT_INPUTS:
            raise SchemaError(f"edit_inputs: unknown value {self.edit_inputs!r}; choose one of "
                              f"{', '.join(EDIT_INPUTS)}")
        if self.privileged and not info.no_delay:
            raise SchemaError(f"privileged: only the nodelay upper bound reads privileged "
                              f"observations, not {self.method!r}")
        for key in ("delay_steps", "horizon", "period_steps", "lookahead", "n_committed"):
            if getattr(self, key) < 0:
                raise SchemaError(f"{key}: must be >= 0, got {getattr(self, key)}")
        for key in ("num_envs", "num_steps_per_env", "save_interval"):
            if getattr(self, key) < 1:
                raise SchemaError(f"{key}: must be >= 1, got {getattr(self, key)}")
        if self.iterations < 0:
            raise SchemaError(f"iterations: must be >= 0, got {self.iterations}")
        if self.intent_dim < -1:
            raise SchemaError(f"intent_dim: must be >= -1 (-1 = automatic), got "
                              f"{self.intent_dim}")
        if self.intent_dim > 0 and self.planner != "bc" and info.uses_planner:
            raise SchemaError(f"intent_dim: {self.intent_dim} needs a learned planner that exports "
                              f"an intent (--planner bc), not {self.planner!r}")
        if self.smooth_weight < 0:
            raise SchemaError(f"smooth_weight: must be >= 0, got {self.smooth_weight}")
        if self.residual_bound < 0:
            raise SchemaError(f"residual_bound: must be >= 0, got {self.residual_bound}")
        # frozen: the per-method defaults are set once, here, and never changed afterwards
        if info.no_delay:
            object.__setattr__(self, "delay_steps", 0)
        actor = {"init_std": 0.3 if info.residual else 1.0,
                 "output_scale": 0.01 if info.residual else 1.0}
        unset = {k: v for k, v in actor.items() if getattr(self.actor, k) is None}
        if unset:
            object.__setattr__(self, "actor", replace(self.actor, **unset))

    # --- derived values -------------------------------------------------------------------
    @property
    def method_info(self) -> Method:
        """The registry entry of ``method`` (:class:`edgerl.contract.methods.Method`)."""
        return get_method(self.method)

    @property
    def learned(self) -> bool:
        """Whether the method trains a PPO policy."""
        return self.method_info.learned

    @property
    def uses_planner(self) -> bool:
        """Whether the method runs a chunk planner (``edit_zero_chunks`` runs none)."""
        return self.method_info.uses_planner

    @property
    def resolved_intent_dim(self) -> int:
        """The planner intent's size: ``intent_dim``, or automatically
        :data:`DEFAULT_INTENT_DIM` for an edit or a chunk method with a learned planner."""
        if self.intent_dim >= 0:
            return self.intent_dim
        uses = self.method_info.residual or self.method_info.uses_planner
        return DEFAULT_INTENT_DIM if uses and self.planner == "bc" else 0

    @property
    def resolved_intent_stale_steps(self) -> int:
        """``bc.intent_stale_steps``, or the oldest a chunk's intent gets before the next chunk
        arrives: the planner delay (with the randomizer's extra) plus its period."""
        if self.bc.intent_stale_steps >= 0:
            return self.bc.intent_stale_steps
        return oldest_chunk_age(self.resolved_latency, self.extra_delay_steps[1])

    @property
    def prefix_conditioned(self) -> bool:
        """Whether the planner reads the committed prefix (``rtc``, or an edit with
        ``planner_prefix``)."""
        return self.method_info.conditions_on_prefix or (self.planner_prefix
                                                         and self.method_info.residual)

    @property
    def is_edit(self) -> bool:
        """Whether the policy is a bounded residual on a chunk row."""
        return self.method_info.residual

    @property
    def resolved_period(self) -> int:
        """Planner period P in steps (``edgerl.contract.timing.resolve_period``; a measured model's
        period when ``period_steps`` is 0)."""
        if self.latency_model is not None and not self.period_steps:
            return self.latency_model.planner_period_steps
        return resolve_period(self.period_steps, self.delay_steps)

    @property
    def resolved_latency(self) -> LatencyModel:
        """The delay model training uses: the measured planner delay (else fixed D), and
        the trigger's sampling delay as observation delay."""
        base = (to_dict(self.latency_model) if self.latency_model is not None
                else {"planner_delay_steps": self.delay_steps})
        sampling = sampling_delay_steps(self.trigger)
        return LatencyModel(**{**base, "planner_period_steps": self.resolved_period,
                               "obs_delay_steps": base.get("obs_delay_steps", 0) + sampling})

    @property
    def extra_delay_steps(self) -> list[int]:
        """``[lo, hi]`` extra planner delay per episode from the task's randomization."""
        rand = self.task_kwargs.get("randomization") or {}
        lo, hi = rand.get("latency_steps", [0, 0]) if isinstance(rand, dict) else (0, 0)
        return [int(lo), int(hi)]

    @property
    def resolved_horizon(self) -> int:
        """Chunk rows H (``edgerl.contract.timing.default_horizon``, the wrapper's own rule)."""
        return self.horizon or default_horizon(self.resolved_latency, self.lookahead,
                                               self.extra_delay_steps[1], self.method)

    def resolved_residual_bound(self, action_low: list[float], action_high: list[float]) -> float:
        """``residual_bound`` or half of the smallest action range."""
        if self.residual_bound > 0:
            return float(self.residual_bound)
        return 0.5 * min(h - lo for lo, h in zip(action_low, action_high))

    def run_name(self, stamp: str) -> str:
        """``{task}__{method}__d{D}__s{S}__{stamp}``."""
        return f"{self.task}__{self.method}__d{self.delay_steps}__s{self.seed}__{stamp}"

    # --- rsl_rl -----------------------------------------------------------------------------
    def rsl_rl_cfg(self, critic_groups: list[str] | None = None) -> dict[str, Any]:
        """The ``train_cfg`` dict rsl-rl-lib 5.5.1's ``OnPolicyRunner`` takes (fresh copy).

        ``critic_groups``: observation groups the critic reads (default ``["policy"]``);
        training passes the privileged ones the env has (asymmetric actor-critic: the critic
        is not deployed, so it may know the goal the fast policy does not see).
        """
        return {
            "num_steps_per_env": self.num_steps_per_env,
            "save_interval": self.save_interval,
            "obs_groups": {"actor": ["policy"], "critic": list(critic_groups or ["policy"])},
            "actor": {"class_name": "MLPModel", **self.mlp_kwargs("actor")},
            "critic": {"class_name": "MLPModel", **self.mlp_kwargs("critic")},
            "algorithm": {"class_name": "PPO", **to_dict(self.ppo)},
            "logger": "tensorboard",
            "check_for_nan": True,
            "run_name": self.run_name("run"),
        }

    def mlp_kwargs(self, role: str) -> dict[str, Any]:
        """rsl_rl ``MLPModel`` keyword arguments of the ``"actor"`` (with its Gaussian) or the
        ``"critic"`` (a fresh dict, without ``class_name``)."""
        model: ModelConfig = getattr(self, role)
        kwargs: dict[str, Any] = {"hidden_dims": list(model.hidden_dims),
                                  "activation": model.activation,
                                  "obs_normalization": model.obs_normalization}
        if role == "actor":
            kwargs["distribution_cfg"] = {"class_name": "GaussianDistribution",
                                          "init_std": model.init_std, "std_type": "scalar"}
        return kwargs

    # --- (de)serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON dict (every nested dataclass expanded)."""
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: Any) -> TrainConfig:
        """Strictly validated inverse of :meth:`to_dict`."""
        return from_dict(cls, data, "config")
