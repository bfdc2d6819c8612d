"""What one HIL run is asked to do (:class:`HilConfig`): the bundle or the LQR expert, the
plant task and its episodes, the firmware and where it runs, the faults and disturbances,
the operator channel and the real-time settings. ``edgerl hil`` fills it from its flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edgerl.hil.faults import FaultSpec
from edgerl.hil.firmware import FirmwareConfig
from edgerl.hil.kicks import KickConfig
from edgerl.hil.operator import OperatorConfig

__all__ = ["HilConfig"]


@dataclass
class HilConfig:
    """One HIL run.

    Attributes:
        bundle: Exported bundle driving the host side (None: the task's LQR expert).
        task: Plant task (default: the bundle's task, else ``cartpole``).
        episodes: Episodes to run (each ends on the task's termination or time-out).
        max_steps: Cap on control steps per episode (None: the task's episode length).
        faults: Fault spec.
        firmware: Firmware options (``n_cmd`` is set from the task).
        check_estop: Run :func:`~edgerl.hil.link_checks.estop_check` after the episodes,
            once the link is up (a cable still out gives ``estop_ok: None`` and
            ``estop_skipped: "link down"``, not a failed e-stop).
        link_wait_s: Longest wait after the episodes for a pulled cable to be back (s).
        seed: Plant seed.
        planner_latency_s: Added to each planner call (emulates a slow foundation model, as
            the training delay did); bundle mode only.
        target: Where the firmware runs: ``host`` (POSIX build on a pty) or ``qemu-m4``
            (Cortex-M4 build in ``qemu-system-arm -M mps2-an386``).
        link_probe: After the episodes, this many ping-pong round trips on the same link
            (one setpoint in flight, as ``edgerl bench serial``): ``link_rtt_p99_us`` is the
            floor the episodes' ``cmd_rtt_p99_us`` is compared with (``rtt_p99_vs_link``).
        rt_priority: SCHED_FIFO priority for the harness threads (0: off; needs root or
            CAP_SYS_NICE), with a 0.1 ms GIL switch interval and a frozen GC; the firmware
            process runs one priority higher (an MCU has its own CPU), the plant's physics one
            lower so serial I/O preempts it. Where SCHED_FIFO is refused the run goes on
            without it (``rt_granted`` false).
        mode: ``host-loop`` (the host runs the edit loop and sends SETPOINTs) or
            ``fast-loop`` (the MCU runs the bundle's edit policy on streamed CHUNKs:
            :mod:`edgerl.hil.fast_loop`; needs an edit ``bundle``).
        operator: A scripted operator watching the plant that overrides the host loop
            (:mod:`edgerl.hil.operator`; host-loop mode with a bundle).
        record: Write the loop's transitions and the operator's records to this MCAP file
            (:mod:`edgerl.contract.intervention_log`; host-loop mode with an edit bundle).
        explore_std: Exploration noise on the edit residual while the policy is in control
            (policy units; :meth:`~edgerl.runtime.edit_loop.EditLoop.explore`; host-loop
            mode with an edit bundle; 0 = off). ``explore_seed``: its seed.
    """

    bundle: Path | None = None
    task: str | None = None
    episodes: int = 1
    max_steps: int | None = None
    faults: FaultSpec = field(default_factory=FaultSpec)
    firmware: FirmwareConfig = field(default_factory=FirmwareConfig)
    check_estop: bool = True
    seed: int = 0
    planner_latency_s: float = 0.0
    target: str = "host"
    rt_priority: int = 0
    link_probe: int = 300
    link_wait_s: float = 5.0
    mode: str = "host-loop"
    #: A bundle with a gate: who chooses the budgets (``gate``, ``fixed:NAME``,
    #: ``age:NAME:X``; :func:`edgerl.runtime.gate.budget_gate.make_chooser`).
    gate_policy: str = "gate"
    #: How the host expert computes the budgets' plans: ``per-budget`` (one process each,
    #: decisions never wait) or ``shared`` (one process, each decision waits for its plan);
    #: :data:`edgerl.hil.gate.BUDGET_WORKERS`.
    budget_workers: str = "per-budget"
    #: Gaussian noise (std, action units) on the command the plant applies: a disturbance the
    #: planner cannot foresee (the gated scenario's ``GateCfg.action_noise_std``).
    action_noise_std: float = 0.0
    #: Kicks on the applied command after the noise (the gated scenarios' ``kick_*``;
    #: :class:`edgerl.hil.kicks.KickConfig`), None = none.
    kicks: KickConfig | None = None
    operator: OperatorConfig | None = None
    record: Path | None = None
    explore_std: float = 0.0
    explore_seed: int = 0
