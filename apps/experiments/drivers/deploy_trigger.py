"""``edgerl deploy`` state -> command end to end at some rates, beside its references measured
in the same minutes.

Per rate: the bare rclpy round trip between two processes at that pace (the transport floor,
:mod:`edgerl.apps.experiments.probes.ros2_roundtrip`); then per configuration
``TRIGGER:RT_PRIORITY:MODE`` (``compose``: the edit node inside the robot's process; ``sep``:
separate processes): ``refs`` runs of ``edgerl bench loop`` at the same rate, priority and
trigger with a planner process feeding chunks (the tick-compute reference), the deploy, and
``refs`` reference runs after it. Every output goes to ``out`` (``roundtrip_HZ.json``,
``benchpre*_TAG.json``, ``deploy_TAG.json``, ``bench*_TAG.json``); the table of
:mod:`edgerl.apps.experiments.probes.deploy_trigger_table` reads them.

``bundle``: the cartpole edit bundle the graph runs (the quoted runs used the untrained test
bundle, ``python -m tests.helpers.task_bundles DIR``). Rows: each deploy's and each
reference's JSON, with ``rate_hz``, ``config`` and ``run``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.rows import flatten

__all__ = ["Params", "run"]


@dataclass
class Params:
    """The ``[run]`` table of a ``deploy_trigger`` config."""

    bundle: str
    out: str = "runs/deploy_trigger"
    seconds: float = 8
    rates: list[int] = field(default_factory=lambda: [50, 200])
    configs: list[str] = field(default_factory=lambda: [
        "state:80:compose", "state:80:sep", "state:0:sep", "clock:0:sep"])
    refs: int = 1
    domain_id: int = 221


def _num(x: float) -> str:
    return f"{x:g}"


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    rows: list[dict[str, Any]] = []
    for hz in p.rates:
        env = {"ROS_DOMAIN_ID": str(p.domain_id), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        if not ex.dry_run:
            os.environ.update(env)
        ex.run(["python", "-m", "edgerl.apps.experiments.probes.ros2_roundtrip", "--n", "500",
                "--period-ms", str(1000 / hz), "--json"], stdout=f"{p.out}/roundtrip_{hz}.json")
        for cfg in p.configs:
            trig, rt, mode = cfg.split(":")
            tag = f"{hz}_{trig}_rt{rt}_{mode}"
            sensor = (["--trigger", "state", "--sensor", "thread", "--sensor-hz", str(hz)]
                      if trig == "state" else [])
            bench = ["edgerl", "bench", "loop", "--bundle", p.bundle, "--seconds", "4", "--rate",
                     str(hz), "--planner", "burn", "--planner-process", "--rt-priority", rt,
                     *sensor, "--json"]
            for k in range(1, p.refs + 1):
                name = "benchpre" + ("" if k == 1 else str(k))
                ref = ex.run(bench, stdout=f"{p.out}/{name}_{tag}.json", json_out=True)
                rows += [{"rate_hz": hz, "config": cfg, "run": name, "metric": m, "value": v}
                         for m, v in flatten(ref)]
            ex.note(f"{tag}: load {' '.join(map(str, os.getloadavg()))}")
            deploy = ex.run(["edgerl", "deploy", "--bundle", p.bundle, "--duration",
                             _num(p.seconds), "--trigger", trig, "--rate-hz", str(hz),
                             "--rt-priority", rt, *(["--compose"] if mode == "compose" else []),
                             "--json"], stdout=f"{p.out}/deploy_{tag}.json", json_out=True,
                            check=False)  # exit 2: an untrained bundle misses the task
            rows += [{"rate_hz": hz, "config": cfg, "run": "deploy", "metric": m, "value": v}
                     for m, v in flatten(deploy or {})]
            for k in range(1, p.refs + 1):
                name = "bench" + ("" if k == 1 else f"post{k}")
                ref = ex.run(bench, stdout=f"{p.out}/{name}_{tag}.json", json_out=True)
                rows += [{"rate_hz": hz, "config": cfg, "run": name, "metric": m, "value": v}
                         for m, v in flatten(ref)]
    ex.run(["python", "-m", "edgerl.apps.experiments.probes.deploy_trigger_table", p.out])
    return Outcome(parts={"": rows}, seeds=[])
