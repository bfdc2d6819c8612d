"""What ``edgerl bench ratios`` measures (:mod:`edgerl.bench.ratios`): :class:`RatiosConfig`,
its rows' settings in small groups (:class:`SimRows`, :class:`TrainRows`, the loop rows'
:class:`~edgerl.bench.loop.spin.SpinConfig`, :class:`HilRow`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgerl.bench.loop.spin import SpinConfig
from edgerl.bench.loop.timing import LoopTiming

__all__ = ["LOOP_ROWS", "HilRow", "RatiosConfig", "SimRows", "TrainRows"]


@dataclass(frozen=True)
class SimRows:
    """The ``sim/<task>`` rows (an empty task list skips them).

    Attributes:
        tasks: MuJoCo tasks, one row each.
        envs: Envs per task.
        steps: Steps per block.
        repeats: Interleaved (task, raw) blocks; the best of each side is compared.
    """

    tasks: tuple[str, ...] = ("arm_reach", "arm_push", "ball_balance")
    envs: int = 256
    steps: int = 20
    repeats: int = 15


@dataclass(frozen=True)
class TrainRows:
    """The ``train/<task>`` rows (an empty task list skips them).

    Attributes:
        tasks: Registered tasks, one row each.
        envs: Envs per trainer.
        steps_per_env: Rollout steps per env per PPO iteration.
        iterations: PPO iterations per block.
        repeats: (ours, bare) pairs.
    """

    tasks: tuple[str, ...] = ("cartpole", "ball_balance")
    envs: int = 64
    steps_per_env: int = 32
    iterations: int = 3
    repeats: int = 3


#: The loop rows' blocks: 1 kHz, 10 s each, 0.5 s warm-up, one (bare, loop) pair.
LOOP_ROWS = SpinConfig(timing=LoopTiming(rate_hz=1000.0, seconds=10.0, warmup_s=0.5))


@dataclass(frozen=True)
class HilRow:
    """The ``hil/rtt_p99`` row (``runs=0`` skips it).

    Attributes:
        target: Firmware build: ``host`` or ``qemu-m4``.
        runs: (paced bench serial, bench serial, hil) sets.
        rt_priority: SCHED_FIFO priority of the row's processes (firmware +1).
        episodes: Hil episodes per set.
        max_steps: Hil steps per episode.
    """

    target: str = "host"
    runs: int = 1
    rt_priority: int = 10
    episodes: int = 2
    max_steps: int = 250


@dataclass(frozen=True)
class RatiosConfig:
    """What ``edgerl bench ratios`` measures (an empty task list or a zero count skips rows).

    Attributes:
        sim: The ``sim/<task>`` rows.
        train: The ``train/<task>`` rows.
        bundle: Edit bundle of the loop and ros2 rows (``None`` skips them).
        loop: The loop rows' (bare, edit loop) blocks: rate, seconds, pairs (0 skips the
            rows), CPUs of both loops and of the planner, the burn planner's process or
            thread, SCHED_FIFO priority of both loops (0 = normal scheduling); their bundle
            is ``bundle``.
        miss_alpha: Level of the one-sided miss-rate test.
        hil: The ``hil/rtt_p99`` row.
        ros2_seconds: Seconds of the deploy and of the bench loop behind the ros2 rows (0
            skips them).
        history: Append the run's JSON line here (``None``: do not).
        record: Write the run into this results store (``experiments/``) as a
            ``bench-ratios`` results file of the ``runtime-timing`` question (``None``: do not).
        png: Redraw the trend plot of the recorded runs (else of ``history``) here.
    """

    sim: SimRows = SimRows()
    train: TrainRows = TrainRows()
    bundle: Path | None = None
    loop: SpinConfig = LOOP_ROWS
    miss_alpha: float = 0.05
    hil: HilRow = HilRow()
    ros2_seconds: float = 10.0
    history: Path | None = None
    record: Path | None = None
    png: Path | None = None
