"""Demo stage ``train``: the edit policy in-process, its two controls (``naive``,
``edit_zero_chunks``) in child ``edgerl train`` processes on the other core."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from edgerl.apps.demo.config import DemoConfig, DemoError, StageResult

__all__ = ["CONTROLS", "finish_control", "stage_train", "start_control", "stop_process"]

log = logging.getLogger(__name__)


def _task_kwargs(cfg: DemoConfig) -> dict[str, Any]:
    if cfg.delay_jitter_steps == 0:
        return {}
    return {"randomization": {"latency_steps": [0, cfg.delay_jitter_steps]}}


def _train_config(cfg: DemoConfig, method: str, iterations: int):
    from edgerl.policies.config import TrainConfig

    budget = cfg.training
    return TrainConfig(task=cfg.task, method=method, delay_steps=cfg.delay_steps,
                       seed=cfg.seed, num_envs=budget.num_envs, iterations=iterations,
                       planner=cfg.planner if method == "edit" else "expert",
                       stop_at_success=budget.stop_at_success, task_kwargs=_task_kwargs(cfg))


#: The controls the demo trains beside ``edit``, each in its own child process.
CONTROLS = ("naive", "edit_zero_chunks")


def start_control(cfg: DemoConfig, method: str, run_dir: Path) -> subprocess.Popen | None:
    """Start ``edgerl train TASK --method METHOD`` as a child process (None when skipped)."""
    budget = cfg.training
    if budget.naive_iterations == 0:
        return None
    cmd = [sys.executable, "-m", "edgerl.apps", "--log-level", "WARNING", "train", cfg.task,
           "--method", method, "--delay-steps", str(cfg.delay_steps), "--seed", str(cfg.seed),
           "--num-envs", str(budget.num_envs), "--iterations", str(budget.naive_iterations),
           "--stop-at-success", str(budget.stop_at_success), "--out", str(run_dir),
           "--no-progress", "--json"]
    for key, value in _task_kwargs(cfg).items():
        cmd += ["--task-arg", f"{key}={json.dumps(value)}"]
    log.info("%s control: %s", method, " ".join(cmd[1:]))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_control(proc: subprocess.Popen | None, timeout_s: float) -> dict[str, Any] | None:
    """Wait for a control's child; its ``--json`` summary (DemoError if it failed)."""
    if proc is None:
        return None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise DemoError(f"control training did not finish in {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        raise DemoError(f"control training failed (exit {proc.returncode}):\n"
                        f"{stderr[-1500:]}")
    return json.loads(stdout)


def stop_process(proc: subprocess.Popen | None) -> None:
    """Terminate a child that is still running (errors, Ctrl-C)."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stage_train(cfg: DemoConfig, run_dir: Path) -> StageResult:
    """Train the latency-aware edit policy in-process."""
    import torch

    from edgerl.policies.train import train

    t0 = time.perf_counter()
    torch.set_num_threads(1)
    result = train(_train_config(cfg, "edit", cfg.training.iterations), out=run_dir,
                   show_progress=cfg.show_progress)
    final = result.final()
    succ = final.get("success_rate")
    data = {"run": str(result.run_dir), "iterations": len(result.history),
            "env_steps": result.env_steps, "wall_s": round(result.wall_s, 2),
            "train_success_rate": succ, "return_mean": final.get("return_mean")}
    text = (f"{len(result.history)} it, {result.env_steps} env steps, "
            f"train success {succ if succ is None else round(succ, 2)}")
    return StageResult("train edit", True, text, time.perf_counter() - t0, data)
