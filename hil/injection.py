"""The faults stage of a HIL run: everything the run does to the loop on purpose.

* On the link: the byte faults of the ``--faults`` spec, as the transport's filters
  (:class:`~edgerl.hil.faults.TxFaults` host->firmware, :class:`~edgerl.hil.faults.RxFaults`
  firmware->host); lifted after the episodes, so the self-tests run fault-free.
* On the host: the spec's timed faults, each acted out once when the run's clock passes it:
  a host freeze (the command sink stalls) and a cable pull (:class:`~edgerl.hil.cable.Cable`).
* On the plant: Gaussian noise on the command it applies, then kicks
  (:class:`~edgerl.hil.kicks.PlantKicks`), disturbances no planner can foresee.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from edgerl.hil.cable import Cable
from edgerl.hil.controllers import FreezableSink
from edgerl.hil.faults import FaultSpec, RxFaults, TxFaults
from edgerl.hil.kicks import KickConfig, PlantKicks

__all__ = ["FaultInjection"]


class FaultInjection:
    """The faults of one run.

    Args:
        spec: The ``--faults`` spec (link faults and the timed host faults).
        n_cmd: Command size. seed: The run's plant seed (the noise draws from ``seed + 1``,
            the kicks from their own seed, :class:`~edgerl.hil.kicks.PlantKicks`).
        action_noise_std: Noise std on the applied command (action units; 0 = off).
        kicks: Kick settings, None = none.

    Attributes:
        tx, rx: The link's byte filters (their counts go into the result).
    """

    def __init__(self, spec: FaultSpec, n_cmd: int, seed: int, action_noise_std: float = 0.0,
                 kicks: KickConfig | None = None) -> None:
        self.spec = spec
        self.n_cmd = n_cmd
        self.tx, self.rx = TxFaults(spec), RxFaults(spec)
        self.action_noise_std = action_noise_std
        self._noise = np.random.default_rng(seed + 1)
        self.kick_cfg = kicks
        self.kicks = None if kicks is None else PlantKicks(kicks, n_cmd, seed)
        self._froze = self._unplugged = False

    def start_episode(self, episode: int) -> None:
        """Episode ``episode`` starts: its kicks are reseeded (the same for every policy)."""
        if self.kicks is not None:
            self.kicks.start_episode(episode)

    def act(self, t_run: float, sink: FreezableSink, cable: Cable) -> None:
        """The timed host faults due at ``t_run`` (s since the run's first step), once each."""
        f = self.spec
        if f.freeze_at is not None and not self._froze and t_run >= f.freeze_at:
            self._froze = True
            sink.freeze(f.freeze_s)
        if f.unplug_at is not None and not self._unplugged and t_run >= f.unplug_at:
            self._unplugged = True
            cable.pull(f.unplug_s)

    def disturb(self, cmd: np.ndarray) -> np.ndarray:
        """The command the plant applies: ``cmd`` (``n_cmd``,) plus noise, then kicks."""
        if self.action_noise_std > 0:
            cmd = cmd + self.action_noise_std * self._noise.standard_normal(self.n_cmd)
        if self.kicks is not None:
            cmd = self.kicks.apply(cmd)
        return cmd

    def lift(self, transport: Any) -> None:
        """No more link faults: what follows the episodes runs fault-free."""
        transport.tx_filter = transport.rx_filter = None

    def corrupted_executed(self, acked: set[int]) -> int:
        """Corrupted setpoints among ``acked`` (those the firmware executed): 0 is the goal."""
        return len(acked & self.tx.corrupted_setpoints)

    def injected(self) -> dict[str, Any]:
        """What the link filters did (counts)."""
        return {**self.tx.as_dict(), "rx_corrupted_bytes": self.rx.corrupted_bytes}

    def kick_summary(self) -> dict[str, Any]:
        """The kicks' settings and how many started (empty without kicks)."""
        if self.kicks is None:
            return {}
        return {"kicks": dataclasses.asdict(self.kick_cfg), "kicks_started": self.kicks.started}
