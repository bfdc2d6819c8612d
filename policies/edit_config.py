"""The edit policy's training settings beyond PPO: the warm start and the validation guard
(fields of :class:`~edgerl.policies.config.TrainConfig`; plain dataclasses, no imports of the
code that uses them)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DistillConfig", "GuardConfig"]


@dataclass(frozen=True)
class DistillConfig:
    """The DAgger warm start of an edit actor.

    Attributes:
        rounds: DAgger rounds (0 = no warm start).
        steps: Control steps rolled per round (each gives ``num_envs`` samples).
        epochs: Passes over the aggregated data after each round.
        batch_size: Minibatch size of the regression.
        learning_rate: Adam's learning rate.
        init_std: The actor's exploration std after the warm start (residual units): PPO
            fine-tunes a good start, so it explores less than from scratch.
        critic_warmup: PPO iterations with the distilled actor frozen, so the critic learns
            the student's values before the first policy update.
        smooth: Weight of matching the command's step-to-step change to the teacher's (0 =
            imitation of each step alone).
        teacher: ``fresh``: the planner without delay (every BC planner); ``intent`` (an
            intent planner only): its decoder on the fresh fast observation and the held
            chunk's intent, a target the edit's inputs determine. On dm_control reacher-easy
            (seeds 0 and 2) the ``intent`` student validated at 130 and 83 against ``fresh``'s
            335 and 180: the decoder's stale-intent rows miss where the planner-only element
            is relative (fingertip to target), so ``fresh`` is the default.
    """

    rounds: int = 8
    steps: int = 64
    epochs: int = 30
    batch_size: int = 1024
    learning_rate: float = 1e-3
    init_std: float = 0.1
    critic_warmup: int = 0
    smooth: float = 5.0
    teacher: str = "fresh"

    def __post_init__(self) -> None:
        if self.teacher not in ("intent", "fresh"):
            raise ValueError(f"distill.teacher: 'intent' or 'fresh', got {self.teacher!r}")
        for key in ("steps", "epochs", "batch_size"):
            if getattr(self, key) < 1:
                raise ValueError(f"distill.{key}: must be >= 1, got {getattr(self, key)}")
        if self.rounds < 0 or self.learning_rate <= 0 or self.smooth < 0:
            raise ValueError("distill.rounds and distill.smooth must be >= 0 and "
                             "distill.learning_rate > 0")


@dataclass(frozen=True)
class GuardConfig:
    """The validation that picks the deployed edit actor.

    Attributes:
        episodes: Validation episodes per candidate (0 = no selection: the best training
            iteration is deployed, as for other methods).
        seed_offset: Validation envs are seeded ``seed + seed_offset`` (evaluation uses
            ``seed + 1000``, training ``seed``).
        max_rate_ratio: A candidate competes only if its command's mean |du| per tick is at
            most this times the teacher's in the same episodes (when any candidate is).
    """

    episodes: int = 30
    seed_offset: int = 2000
    max_rate_ratio: float = 1.2

    def __post_init__(self) -> None:
        if self.episodes < 0 or self.max_rate_ratio <= 0:
            raise ValueError(f"guard.episodes must be >= 0 and guard.max_rate_ratio > 0, got "
                             f"{self.episodes} and {self.max_rate_ratio}")
