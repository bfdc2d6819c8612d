"""Deadline misses of the bare loop and the edit loop under named conditions, interleaved.

Per repetition, every condition in ``conditions`` once, in order: a 10 s block at 1 kHz on
SCHED_FIFO 50 of ``edgerl bench spin`` (the bare loop: the edit loop's own scheduler with an
empty tick) or ``edgerl bench loop`` (the edit loop over ``bundle``), some with a planner
burning CPU beside them. Conditions:

* ``bare``: the bare loop alone; ``bare_burn``: beside a burner process (70 ms of CPU in every
  100 ms at SCHED_FIFO 48, :mod:`edgerl.apps.experiments.probes.burn`); ``bare_burn_w120``: the
  same with 120 us of busy work per tick; ``bare_burn_other``: the burner at normal priority;
  ``bare_pin_burn``: loop on ``loop_cpu``, burner on ``planner_cpu``;
* ``edit_none``: the edit loop without a planner; ``edit_burnproc``: with the burn planner in
  a process; ``noprewarm`` / ``ssi0``: the same without the prewarm / the GIL hold;
  ``thread``: the burn planner in a thread; ``edit_proc_pin`` / ``thread_pin``: pinned apart.

Rows: each block's misses, skipped ticks, latest wake-up and tick compute p50, with ``rep``
and ``condition``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.rows import flatten
from edgerl.contract.errors import UserError

__all__ = ["CONDITIONS", "Params", "run"]

BURN = ["python", "-m", "edgerl.apps.experiments.probes.burn"]
CONDITIONS = ("bare", "bare_burn", "bare_burn_w120", "bare_burn_other", "bare_pin_burn",
              "edit_proc_pin", "thread_pin", "edit_none", "edit_burnproc", "noprewarm", "ssi0",
              "thread")


@dataclass
class Params:
    """The ``[run]`` table of a ``loop_conditions`` config."""

    bundle: str
    reps: int = 4
    conditions: list[str] = field(default_factory=lambda: ["bare", "bare_burn",
                                                           "bare_burn_w120", "edit_none",
                                                           "edit_burnproc"])
    loop_cpu: int = 1
    planner_cpu: int = 0
    burn_seconds: float = 11.5

    def __post_init__(self) -> None:
        bad = [c for c in self.conditions if c not in CONDITIONS]
        if bad:
            raise ValueError(f"unknown condition(s) {bad}; known: {', '.join(CONDITIONS)}")


def commands(p: Params, condition: str) -> tuple[list[str] | None, list[str]]:
    """(the burner started beside the block or None, the block's command)."""
    loop = ["edgerl", "bench", "loop", "--bundle", p.bundle, "--rate", "1000", "--seconds", "10",
            "--warmup", "0.5", "--rt-priority", "50", "--json"]
    burn = ["--planner", "burn", "--planner-latency-ms", "70", "--planner-period-ms", "100"]
    spin = ["edgerl", "bench", "spin", "--seconds", "10", "--rt-priority", "50", "--json"]
    pin = ["--loop-cpus", str(p.loop_cpu), "--planner-cpus", str(p.planner_cpu)]
    secs = f"{p.burn_seconds:g}"
    other = [*BURN, secs, "70", "100", "0"]
    table: dict[str, tuple[list[str] | None, list[str]]] = {
        "bare": (None, spin),
        "bare_burn": ([*BURN, secs], spin),
        "bare_burn_w120": ([*BURN, secs], [*spin, "--work-us", "120"]),
        "bare_burn_other": (other, spin),
        "bare_pin_burn": (["taskset", "-c", str(p.planner_cpu), *other],
                          [*spin, "--loop-cpus", str(p.loop_cpu)]),
        "edit_proc_pin": (None, [*loop, *burn, "--planner-process", *pin]),
        "thread_pin": (None, [*loop, *burn, *pin]),
        "edit_none": (None, [*loop, "--planner", "none"]),
        "edit_burnproc": (None, [*loop, *burn, "--planner-process"]),
        "noprewarm": (None, [*loop, *burn, "--planner-process", "--prewarm-us", "0"]),
        "ssi0": (None, [*loop, *burn, "--planner-process", "--spin-switch-interval-us", "0"]),
        "thread": (None, [*loop, *burn]),
    }
    if condition not in table:
        raise UserError(f"unknown condition {condition!r}")
    return table[condition]


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    rows: list[dict[str, Any]] = []
    for rep in range(1, p.reps + 1):
        for condition in p.conditions:
            burner, block = commands(p, condition)
            handle = ex.start(burner) if burner else None
            result = ex.run(block, json_out=True)
            if handle is not None:
                ex.wait(handle)
            rows += [{"rep": rep, "condition": condition, "metric": name, "value": value}
                     for name, value in flatten(result)]
    return Outcome(parts={"": rows}, seeds=[])
