"""The language planner's run configuration (saved in the bundle manifest)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["LanguagePlannerConfig", "config_dict"]


@dataclass
class LanguagePlannerConfig:
    """Everything that defines a language planner run (saved in the bundle manifest).

    Attributes:
        task: Registered language task (needs ``instruction_id`` and ``PARAPHRASES``).
        horizon: Chunk rows H.
        period: Replanning period P in control steps (P <= H).
        demo_envs / demo_steps: Expert rollout size (samples = envs x steps).
        expert_noise: DART noise on the executed expert action (fraction of the range).
        hidden_dims: Head MLP sizes.
        epochs / batch_size / learning_rate: BC optimisation.
        n_held_out: Paraphrases per instruction held out from training (evaluation only).
        eval_envs / eval_episodes: Held-out evaluation size.
        seed: Seeds demos, training and evaluation.
    """

    task: str = "arm_reach"
    horizon: int = 8
    period: int = 4
    demo_envs: int = 64
    demo_steps: int = 600
    expert_noise: float = 0.1
    hidden_dims: list[int] = field(default_factory=lambda: [256, 256])
    epochs: int = 60
    batch_size: int = 512
    learning_rate: float = 1e-3
    n_held_out: int = 3
    eval_envs: int = 50
    eval_episodes: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        if self.horizon < 1 or not 1 <= self.period <= self.horizon:
            raise ValueError(f"need 1 <= period ({self.period}) <= horizon ({self.horizon})")
        for key in ("demo_envs", "demo_steps", "epochs", "eval_envs", "eval_episodes"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")


def config_dict(cfg: LanguagePlannerConfig) -> dict[str, Any]:
    """JSON form of the config (for the manifest)."""
    return asdict(cfg)
