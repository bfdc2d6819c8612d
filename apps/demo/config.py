"""What the demo runs and what each stage returns: :class:`DemoConfig` (with its
:class:`DemoTraining` budget and :class:`DemoChecks` lengths), :class:`StageResult`,
:class:`DemoError`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl.contract.config_groups import change

__all__ = ["EXIT_HIL_FAILED", "DemoChecks", "DemoConfig", "DemoError", "DemoTraining",
           "StageResult"]

#: Exit status when every stage ran but the HIL episode did not succeed.
EXIT_HIL_FAILED = 2


class DemoError(RuntimeError):
    """A stage could not run (bad configuration, parity failure, a node that died)."""


@dataclass
class DemoTraining:
    """The training budget of the edit policy and its two trained controls.

    Attributes:
        iterations: PPO iteration cap for the edit policy.
        naive_iterations: PPO iterations of the two trained controls, ``naive`` and
            ``edit_zero_chunks`` (0: skip both).
        stop_at_success: End training once the training success rate reaches this.
        num_envs: Parallel training envs.
    """

    iterations: int = 400
    naive_iterations: int = 400
    stop_at_success: float = 0.98
    num_envs: int = 64


@dataclass
class DemoChecks:
    """How long each check of the trained policy runs.

    Attributes:
        eval_episodes: Episodes per method in the success-rate comparison.
        deploy_s: Seconds the ROS 2 graph runs after its first command.
        hil_episodes: Firmware-in-the-loop episodes (all must succeed).
    """

    eval_episodes: int = 100
    deploy_s: float = 8.0
    hil_episodes: int = 3


@dataclass
class DemoConfig:
    """What the demo runs.

    Attributes:
        task: Registered task (the plant for training, deploy and HIL). The default,
            ``cartpole_goal``, hides the goal from the fast policy: only the planner knows it.
        delay_steps: Planner delay D in control steps (10 steps = 200 ms at 50 Hz).
        delay_jitter_steps: Extra planner delay drawn per episode in ``0..J`` steps during
            training and evaluation (the ROS 2 planner's latency is not a constant).
        planner: Chunk planner for training (``bc``: a learned MLP, exported as
            ``planner.onnx`` and run by the ROS planner node and the HIL host).
        training: The training budget.
        checks: The evaluation, deploy and HIL checks' lengths.
        seed: Training seed (evaluation uses seed + 1000, unseen in training).
        out: Output directory (created; an existing one must be an earlier demo output).
        show_progress: Progress bars on stderr.
    """

    task: str = "cartpole_goal"
    delay_steps: int = 10
    delay_jitter_steps: int = 4
    planner: str = "bc"
    training: DemoTraining = field(default_factory=DemoTraining)
    checks: DemoChecks = field(default_factory=DemoChecks)
    seed: int = 0
    out: Path = Path("runs/demo")
    show_progress: bool = True

    @classmethod
    def preset(cls, fast: bool, **overrides: Any) -> DemoConfig:
        """The default (<= 10 min CPU) or ``--fast`` (<= 2 min training) budget, with
        ``overrides`` (``None``: the preset's) naming fields of the config or of its groups."""
        cfg = cls(training=DemoTraining(iterations=250, naive_iterations=250),
                  checks=DemoChecks(eval_episodes=50, deploy_s=8.0, hil_episodes=1)) \
            if fast else cls()
        return change(cfg, **{k: v for k, v in overrides.items() if v is not None})

    def validate(self) -> None:
        """Raise :class:`DemoError` naming the first bad field."""
        if self.delay_steps < 0 or self.delay_jitter_steps < 0:
            raise DemoError(f"delay_steps and delay_jitter_steps must be >= 0, got "
                            f"{self.delay_steps}, {self.delay_jitter_steps}")
        sizes = {"iterations": self.training.iterations, "num_envs": self.training.num_envs,
                 "eval_episodes": self.checks.eval_episodes,
                 "hil_episodes": self.checks.hil_episodes}
        for name, value in sizes.items():
            if value < 1:
                raise DemoError(f"{name} must be >= 1, got {value}")
        if self.training.naive_iterations < 0:
            raise DemoError(f"naive_iterations must be >= 0, got "
                            f"{self.training.naive_iterations}")
        if self.checks.deploy_s <= 0:
            raise DemoError(f"deploy_s must be > 0, got {self.checks.deploy_s}")
        if not 0.0 <= self.training.stop_at_success <= 1.0:
            raise DemoError(f"stop_at_success must be in [0, 1], got "
                            f"{self.training.stop_at_success}")


@dataclass
class StageResult:
    """One row of the stage table."""

    stage: str
    ok: bool
    result: str
    seconds: float
    data: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"stage": self.stage, "ok": self.ok, "result": self.result,
                "seconds": round(self.seconds, 1)}


