"""The demo pipeline: train -> export (parity) -> deploy (ROS 2 graph) -> HIL -> evaluate.

Every stage (one module each in :mod:`edgerl.apps.demo.stages`) calls the project's own API
(``edgerl.policies.train.train``, ``edgerl.export.bundle.export_bundle``,
``edgerl_ros.graph.deploy``, ``edgerl.hil.run_hil``, ``edgerl.policies.evaluate.evaluate``);
the naive baseline trains in a child ``edgerl train``
process and the ``edit_zero_chunks`` ablation in another, so they use the second core while
the edit policy trains here. The ROS 2 nodes and the
firmware run as separate processes, as they are designed to.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from edgerl.apps.demo.config import EXIT_HIL_FAILED, DemoConfig, DemoError, StageResult
from edgerl.apps.demo.stages.deploy import stage_deploy
from edgerl.apps.demo.stages.evaluate import control_hz, stage_eval
from edgerl.apps.demo.stages.export import stage_export
from edgerl.apps.demo.stages.hil import stage_hil
from edgerl.apps.demo.stages.train import (
    CONTROLS,
    finish_control,
    stage_train,
    start_control,
    stop_process,
)

__all__ = ["MARKER", "prepare_out", "run_demo", "timing_table"]

#: File that marks a directory as a demo output (only such a directory is ever overwritten).
MARKER = ".edgerl-demo"


# --- output directory ------------------------------------------------------------------------
def prepare_out(out: Path) -> Path:
    """Create ``out`` (or clear an earlier demo's output there); refuse a foreign directory."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise DemoError(f"--out {out} exists and is not an edgerl demo output "
                            f"(no {MARKER}); choose another directory")
        for child in out.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("edgerl demo output; `edgerl demo` may overwrite this directory\n")
    return out




# --- the whole thing -------------------------------------------------------------------------
def run_demo(cfg: DemoConfig,
             on_stage: Callable[[StageResult], None] | None = None) -> dict[str, Any]:
    """Run every stage and write ``report.json`` and ``demo.png`` into ``cfg.out``.

    Returns the report (``exit_code``: 0 only when the HIL episodes succeeded, 2 when they
    did not). Raises :class:`DemoError` when a stage cannot run (export parity failure,
    training error); child processes are stopped on every path.
    """
    from edgerl.apps.demo.report import (
        collect_loop_timing,
        command_smoothness,
        latency_and_trace,
        write_png,
    )

    cfg.validate()
    t_start = time.perf_counter()
    out = prepare_out(cfg.out)
    edit_run = out / "edit_run"
    control_runs = {m: out / f"{m}_run" for m in CONTROLS}
    bundle = out / "bundle"
    stages: list[StageResult] = []

    def done(s: StageResult) -> StageResult:
        stages.append(s)
        if on_stage is not None:
            on_stage(s)
        return s

    children = {m: start_control(cfg, m, run) for m, run in control_runs.items()}
    try:
        train_res = done(stage_train(cfg, edit_run))
        for method, child in children.items():
            summary = finish_control(child, timeout_s=1800.0)
            if summary is not None:  # its own training time, not the wait for it
                success = summary.get("success_rate")
                shown = "n/a (no episode ended)" if success is None else f"{success:.2f}"
                done(StageResult(f"train {method} (child process)", True,
                                 f"{summary['iterations']} it, train success {shown}",
                                 summary["wall_s"], summary))
    finally:
        for child in children.values():
            stop_process(child)
    trained = {m: run for m, run in control_runs.items() if children[m] is not None}
    export_res = done(stage_export(edit_run, bundle, cfg.seed))
    delay_s = cfg.delay_steps / control_hz(edit_run)
    deploy_res = done(stage_deploy(cfg, bundle, out, delay_s))
    hil_res = done(stage_hil(cfg, bundle, delay_s))
    eval_res = done(stage_eval(cfg, edit_run, trained))

    mcap = out / "deploy.mcap"
    timing = collect_loop_timing(mcap) if mcap.exists() else {}
    timing_rows = timing_table(timing, deploy_res.data, hil_res.data)
    trace = latency_and_trace(mcap) if mcap.exists() else None  # decoded once
    command = command_smoothness(trace["command"]["values"]) if trace is not None else {}
    png = write_png(trace, out / "demo.png",
                    title=f"{cfg.task}: edit policy, planner delay {1000 * delay_s:.0f} ms")
    hil_ok = hil_res.ok
    report = {
        "ok": hil_ok, "exit_code": 0 if hil_ok else EXIT_HIL_FAILED,
        "hil_success": hil_ok, "deploy_success": deploy_res.ok, "export_ok": export_res.ok,
        "edit_beats_baselines": eval_res.data["edit_beats_baselines"],
        "task": cfg.task, "delay_steps": cfg.delay_steps, "delay_ms": 1000 * delay_s,
        "total_s": round(time.perf_counter() - t_start, 1),
        "config": {**asdict(cfg), "out": str(cfg.out)},
        "stages": [s.row() for s in stages],
        "success_rates": eval_res.data["rows"],
        "loop_timing": timing_rows,
        "deploy_command": command,
        "train": train_res.data, "export": export_res.data,
        "deploy": {k: v for k, v in deploy_res.data.items() if k != "robot"},
        "hil": hil_res.data,
        "artifacts": {"edit_run": str(edit_run),
                      **{f"{m}_run": str(r) if m in trained else None
                         for m, r in control_runs.items()},
                      "bundle": str(bundle),
                      "recording": str(mcap) if mcap.exists() else None,
                      "png": str(png) if png is not None else None,
                      "report": str(out / "report.json")},
    }
    from edgerl.contract.report import finite

    (out / "report.json").write_text(json.dumps(finite(report), indent=2) + "\n")
    return report


def timing_table(edit_diag: dict[str, float], deploy: dict[str, Any],
                 hil: dict[str, Any]) -> dict[str, Any]:
    """Loop timing numbers: the ROS 2 edit node's fast loop (its last /diagnostics), the
    deploy's state -> command latency and the HIL serial link's command round trip."""
    keys = ("ticks", "tick_compute_p50_us", "tick_compute_p99_us", "jitter_p50_us",
            "jitter_p99_us", "deadline_misses", "planner_latency_p50_ms",
            "planner_latency_p99_ms")
    out: dict[str, Any] = {k: edit_diag.get(k) for k in keys}
    out["e2e_latency_p50_us"] = deploy.get("e2e_latency_p50_us")
    out["e2e_latency_p99_us"] = deploy.get("e2e_latency_p99_us")
    out["hil_cmd_rtt_p50_us"] = hil.get("cmd_rtt_p50_us")
    out["hil_cmd_rtt_p99_us"] = hil.get("cmd_rtt_p99_us")
    out["hil_watchdog_trips"] = hil.get("watchdog_trips")
    return out
