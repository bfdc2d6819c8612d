"""The episode stage of a HIL run: the loop over episodes and control steps on the
harness's clock, and the per-episode record.

Every control period ``k`` (at ``t0 + k * period``): the faults due are acted out, the
firmware's newest ACTUATOR output (the command really applied, safe-state and e-stop zeros
included; zeros before the first) is disturbed and applied to the plant, and the new plant
state goes to the firmware's sensor HAL. An episode ends on the task's termination (the
plant resets itself; success as the task says) or at the step cap (a success; the harness
resets the plant). The host side hears of every step and every episode end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from edgerl.contract.clock import MonotonicClock
from edgerl.hil.cable import Cable
from edgerl.hil.controllers import FreezableSink
from edgerl.hil.firmware import FirmwareProcess
from edgerl.hil.host_side import HostSide
from edgerl.hil.injection import FaultInjection
from edgerl.hil.plant import HilPlant

__all__ = ["EpisodeRecord", "run_episodes"]


@dataclass
class EpisodeRecord:
    """What the episodes did.

    Attributes:
        successes: Episodes that ended in success or reached the step cap.
        steps: Control steps over all episodes.
        returns: Each episode's return (sum of the plant's rewards).
    """

    successes: int = 0
    steps: int = 0
    returns: list[float] = field(default_factory=list)


def run_episodes(fw: FirmwareProcess, plant: HilPlant, host: HostSide, faults: FaultInjection,
                 sink: FreezableSink, cable: Cable, *, episodes: int, max_steps: int,
                 t0: float, progress: Callable[[int, int], None] | None = None
                 ) -> EpisodeRecord:
    """Run ``episodes`` episodes of at most ``max_steps`` control steps, the first step at
    ``t0`` (monotonic s); ``progress(done, episodes)`` after each."""
    clock = MonotonicClock()
    record = EpisodeRecord()
    k = 0
    for ep in range(episodes):
        record.returns.append(0.0)
        faults.start_episode(ep)
        for _ in range(max_steps):
            clock.sleep_until(t0 + k * plant.period)
            t_run = k * plant.period
            faults.act(t_run, sink, cable)
            act = fw.actuator
            cmd = np.zeros(plant.n_cmd, np.float32) if act is None else act.cmd[:plant.n_cmd]
            step = plant.step(faults.disturb(cmd))
            record.returns[-1] += step.reward
            if step.done:  # the plant reset itself: step.obs is the next episode's
                host.episode_reset()  # before its first state goes out
            fw.send_sensor(step.obs, t_run)
            host.observe(step.obs, step.done)
            k += 1
            record.steps += 1
            if step.done:
                record.successes += int(step.success)
                break
        else:
            record.successes += 1  # reached max_steps without failing
            plant.reset()
            host.episode_reset()
        host.end_episode()
        if progress is not None:
            progress(ep + 1, episodes)
    return record
