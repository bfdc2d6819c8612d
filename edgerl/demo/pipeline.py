"""The demo pipeline: train -> export (parity) -> deploy (ROS 2 graph) -> HIL -> evaluate.

Every stage calls the project's own API (``edgerl.policies.train.train``,
``edgerl.export.bundle.export_bundle``, ``edgerl_ros.graph.deploy``, ``edgerl.hil.run_hil``,
``edgerl.policies.evaluate.evaluate``); the naive baseline trains in a child ``edgerl train``
process and the ``edit_zero_chunks`` ablation in another, so they use the second core while
the edit policy trains here. The ROS 2 nodes and the
firmware run as separate processes, as they are designed to.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DemoConfig", "DemoError", "StageResult", "run_demo", "MARKER"]

log = logging.getLogger(__name__)

#: File that marks a directory as a demo output (only such a directory is ever overwritten).
MARKER = ".edgerl-demo"
#: Exit status when every stage ran but the HIL episode did not succeed.
EXIT_HIL_FAILED = 2


class DemoError(RuntimeError):
    """A stage could not run (bad configuration, parity failure, a node that died)."""


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
        iterations: PPO iteration cap for the edit policy.
        naive_iterations: PPO iterations of the two trained controls, ``naive`` and
            ``edit_zero_chunks`` (0: skip both).
        stop_at_success: End training once the training success rate reaches this.
        num_envs: Parallel training envs.
        eval_episodes: Episodes per method in the success-rate comparison.
        deploy_s: Seconds the ROS 2 graph runs after its first command.
        hil_episodes: Firmware-in-the-loop episodes (all must succeed).
        seed: Training seed (evaluation uses seed + 1000, unseen in training).
        out: Output directory (created; an existing one must be an earlier demo output).
        show_progress: Progress bars on stderr.
    """

    task: str = "cartpole_goal"
    delay_steps: int = 10
    delay_jitter_steps: int = 4
    planner: str = "bc"
    iterations: int = 400
    naive_iterations: int = 400
    stop_at_success: float = 0.98
    num_envs: int = 64
    eval_episodes: int = 100
    deploy_s: float = 8.0
    hil_episodes: int = 3
    seed: int = 0
    out: Path = Path("runs/demo")
    show_progress: bool = True

    @classmethod
    def preset(cls, fast: bool, **overrides: Any) -> DemoConfig:
        """The default (<= 10 min CPU) or ``--fast`` (<= 2 min training) budget."""
        base: dict[str, Any] = dict(iterations=250, naive_iterations=250, eval_episodes=50,
                                    deploy_s=8.0, hil_episodes=1) if fast else {}
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)

    def validate(self) -> None:
        """Raise :class:`DemoError` naming the first bad field."""
        if self.delay_steps < 0 or self.delay_jitter_steps < 0:
            raise DemoError(f"delay_steps and delay_jitter_steps must be >= 0, got "
                            f"{self.delay_steps}, {self.delay_jitter_steps}")
        for name in ("iterations", "num_envs", "eval_episodes", "hil_episodes"):
            if getattr(self, name) < 1:
                raise DemoError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.naive_iterations < 0:
            raise DemoError(f"naive_iterations must be >= 0, got {self.naive_iterations}")
        if self.deploy_s <= 0:
            raise DemoError(f"deploy_s must be > 0, got {self.deploy_s}")
        if not 0.0 <= self.stop_at_success <= 1.0:
            raise DemoError(f"stop_at_success must be in [0, 1], got {self.stop_at_success}")


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


# --- stages ----------------------------------------------------------------------------------
def _task_kwargs(cfg: DemoConfig) -> dict[str, Any]:
    if cfg.delay_jitter_steps == 0:
        return {}
    return {"randomization": {"latency_steps": [0, cfg.delay_jitter_steps]}}


def _train_config(cfg: DemoConfig, method: str, iterations: int):
    from edgerl.policies.config import TrainConfig

    return TrainConfig(task=cfg.task, method=method, delay_steps=cfg.delay_steps,
                       seed=cfg.seed, num_envs=cfg.num_envs, iterations=iterations,
                       planner=cfg.planner if method == "edit" else "expert",
                       stop_at_success=cfg.stop_at_success, task_kwargs=_task_kwargs(cfg))


#: The controls the demo trains beside ``edit``, each in its own child process.
CONTROLS = ("naive", "edit_zero_chunks")


def start_control(cfg: DemoConfig, method: str, run_dir: Path) -> subprocess.Popen | None:
    """Start ``edgerl train TASK --method METHOD`` as a child process (None when skipped)."""
    if cfg.naive_iterations == 0:
        return None
    cmd = [sys.executable, "-m", "edgerl", "--log-level", "WARNING", "train", cfg.task,
           "--method", method, "--delay-steps", str(cfg.delay_steps), "--seed", str(cfg.seed),
           "--num-envs", str(cfg.num_envs), "--iterations", str(cfg.naive_iterations),
           "--stop-at-success", str(cfg.stop_at_success), "--out", str(run_dir),
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
    result = train(_train_config(cfg, "edit", cfg.iterations), out=run_dir,
                   show_progress=cfg.show_progress)
    final = result.final()
    succ = final.get("success_rate")
    data = {"run": str(result.run_dir), "iterations": len(result.history),
            "env_steps": result.env_steps, "wall_s": round(result.wall_s, 2),
            "train_success_rate": succ, "return_mean": final.get("return_mean")}
    text = (f"{len(result.history)} it, {result.env_steps} env steps, "
            f"train success {succ if succ is None else round(succ, 2)}")
    return StageResult("train edit", True, text, time.perf_counter() - t0, data)


def stage_export(run_dir: Path, bundle_dir: Path, seed: int) -> StageResult:
    """Export the run to a bundle; parity failure raises :class:`DemoError`."""
    from edgerl.export.bundle import collect_parity_inputs, export_bundle
    from edgerl.export.onnx_export import ExportError
    from edgerl.policies.runs import load_policy

    t0 = time.perf_counter()
    pol = load_policy(run_dir)
    env = pol.make_env(64, seed=seed)
    try:
        obs = collect_parity_inputs(pol.actor.input_dim, env=env, n_recorded=1000,
                                    n_random=1000, seed=seed, action_low=pol.spec.action.low,
                                    action_high=pol.spec.action.high)
    finally:
        env.close()
    try:
        report = export_bundle(pol.actor, pol.spec, bundle_dir, obs, planner=pol.planner)
    except ExportError as exc:
        raise DemoError(f"export parity failed: {exc}") from exc
    if not report.ok:
        raise DemoError(f"export parity failed: {report.rows()}")
    worst = max(p.max_abs_err for p in report.parity.values())
    data = {"bundle": str(bundle_dir), "ok": report.ok, "files": sorted(report.spec.files),
            "parity": {k: {"max_abs_err": p.max_abs_err, "ok": p.ok}
                       for k, p in report.parity.items()}}
    text = f"{len(report.parity)} parity checks ok, max abs err {worst:.1e}"
    return StageResult("export + parity", True, text, time.perf_counter() - t0, data)


def demo_params(out: Path, planner_latency_s: float) -> Path:
    """The ROS 2 parameter file: the shipped defaults with the planner node's emulated
    foundation-model latency set to the training delay and ``stale_policy: policy``."""
    import yaml
    from edgerl_ros.graph import DEFAULT_CONFIG

    doc = yaml.safe_load(Path(DEFAULT_CONFIG).read_text())
    doc["planner_node"]["ros__parameters"]["extra_latency_s"] = float(planner_latency_s)
    # before the first (late) chunk, run the edit policy on zero rows as in training instead
    # of holding the previous episode's last command
    doc["edit_policy_node"]["ros__parameters"]["stale_policy"] = "policy"
    path = out / "deploy_params.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def stage_deploy(cfg: DemoConfig, bundle_dir: Path, out: Path, delay_s: float,
                 on_progress: Callable[[float], None] | None = None) -> StageResult:
    """Run the ROS 2 graph (sim robot, planner node with ``delay_s`` latency, edit node)."""
    from edgerl_ros.graph import DeployConfig, DeployError, deploy

    t0 = time.perf_counter()
    mcap = out / "deploy.mcap"
    try:
        res = deploy(DeployConfig(bundle=bundle_dir, duration_s=cfg.deploy_s,
                                  params_file=demo_params(out, delay_s), record=mcap),
                     on_progress=on_progress)
    except DeployError as exc:
        return StageResult("ROS 2 deploy", False, f"error: {str(exc)[:200]}",
                           time.perf_counter() - t0, {"error": str(exc)})
    ok = bool(res.get("success"))
    text = (f"{res.get('successes', 0)}/{res.get('episodes', 0)} episodes ok, "
            f"{res['cmd_rate_hz']:.1f}/{res['configured_rate_hz']:.0f} Hz, e2e p50 "
            f"{res['e2e_latency_p50_us'] / 1e3:.1f} ms")
    return StageResult("ROS 2 deploy", ok, text, time.perf_counter() - t0,
                       {**res, "planner_extra_latency_s": delay_s})


def stage_hil(cfg: DemoConfig, bundle_dir: Path, delay_s: float = 0.0) -> StageResult:
    """Drive the simulated plant through the host firmware on a pty with the bundle, its
    planner slowed by ``delay_s`` as in training and in the ROS 2 stage."""
    from edgerl.hil.firmware import FirmwareError
    from edgerl.hil.harness import HilConfig, run_hil

    t0 = time.perf_counter()
    try:
        res = run_hil(HilConfig(bundle=bundle_dir, task=cfg.task, episodes=cfg.hil_episodes,
                                seed=cfg.seed, planner_latency_s=delay_s)).as_dict()
    except (FirmwareError, OSError, ValueError) as exc:
        return StageResult("HIL (firmware on pty)", False, f"error: {str(exc)[:200]}",
                           time.perf_counter() - t0, {"error": str(exc)})
    ok = res["success"] >= 1.0 and res["estop_ok"] is not False and \
        res.get("corrupted_executed", 0) == 0
    n_ok = round(res["success"] * res["episodes"])
    text = (f"{n_ok}/{res['episodes']} episodes ok, cmd RTT p50 "
            f"{res['cmd_rtt_p50_us'] / 1e3:.2f} ms, e-stop {'ok' if res['estop_ok'] else 'FAIL'}")
    return StageResult("HIL (firmware on pty)", ok, text, time.perf_counter() - t0, res)


def _evaluate(run_dir: Path, episodes: int, zero_residual: bool,
              show_progress: bool) -> dict[str, Any]:
    import torch

    from edgerl.policies.evaluate import evaluate
    from edgerl.policies.runs import load_policy

    pol = load_policy(run_dir)
    seed = pol.config.seed + 1000
    env = pol.make_env(min(episodes, 64), seed=seed)
    act_dim = int(pol.spec.action.dim)

    def zeros(obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros(obs.shape[0], act_dim)

    try:
        res = evaluate(env, zeros if zero_residual else pol.act, episodes,
                       show_progress=show_progress)
    finally:
        env.close()
    return {**res.summary(), "eval_seed": seed, "run": str(run_dir)}


def stage_eval(cfg: DemoConfig, edit_run: Path, controls: dict[str, Path]) -> StageResult:
    """Success rate of edit vs its controls: ``edit_zero_chunks`` (no planner information),
    planner-only (the same planner, residual 0) and ``naive``."""
    t0 = time.perf_counter()
    delay_ms = 1000.0 * cfg.delay_steps / _control_hz(edit_run)
    rows = []
    for method, run, zero in (("edit", edit_run, False),
                              ("edit_zero_chunks", controls.get("edit_zero_chunks"), False),
                              ("planner", edit_run, True),
                              ("naive", controls.get("naive"), False)):
        if run is None:
            continue
        r = _evaluate(run, cfg.eval_episodes, zero, cfg.show_progress)
        rows.append({"method": method, "success_rate": r["success_rate"],
                     "return_mean": r["return_mean"], "episodes": r["episodes"],
                     "delay_ms": delay_ms, "eval_seed": r["eval_seed"],
                     "what": _METHOD_TEXT[method].format(planner=cfg.planner)})
    edit = rows[0]["success_rate"]
    others = {r["method"]: r["success_rate"] for r in rows[1:]}
    beats = all(edit > v for v in others.values())
    text = f"edit {edit:.2f} vs " + ", ".join(f"{k} {v:.2f}" for k, v in others.items())
    return StageResult("evaluate vs baselines", beats, text, time.perf_counter() - t0,
                       {"rows": rows, "edit_beats_baselines": beats})


_METHOD_TEXT = {
    "edit": "{planner} planner chunks + learned edit residual every tick",
    "edit_zero_chunks": "the same edit network and budget, every chunk zero (no planner)",
    "planner": "the same {planner} planner's chunks, open loop (residual 0)",
    "naive": "PPO policy, action applied D steps late",
}


def _control_hz(run_dir: Path) -> float:
    doc = json.loads((Path(run_dir) / "config.json").read_text())
    return float(doc["resolved"]["control_hz"])


# --- the whole thing -------------------------------------------------------------------------
def run_demo(cfg: DemoConfig,
             on_stage: Callable[[StageResult], None] | None = None) -> dict[str, Any]:
    """Run every stage and write ``report.json`` and ``demo.png`` into ``cfg.out``.

    Returns the report (``exit_code``: 0 only when the HIL episodes succeeded, 2 when they
    did not). Raises :class:`DemoError` when a stage cannot run (export parity failure,
    training error); child processes are stopped on every path.
    """
    from edgerl.demo.report import collect_loop_timing, write_png

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
                done(StageResult(f"train {method} (child process)", True,
                                 f"{summary['iterations']} it, train success "
                                 f"{summary['success_rate']:.2f}", summary["wall_s"],
                                 summary))
    finally:
        for child in children.values():
            stop_process(child)
    trained = {m: run for m, run in control_runs.items() if children[m] is not None}
    export_res = done(stage_export(edit_run, bundle, cfg.seed))
    delay_s = cfg.delay_steps / _control_hz(edit_run)
    deploy_res = done(stage_deploy(cfg, bundle, out, delay_s))
    hil_res = done(stage_hil(cfg, bundle, delay_s))
    eval_res = done(stage_eval(cfg, edit_run, trained))

    mcap = out / "deploy.mcap"
    timing = collect_loop_timing(mcap) if mcap.exists() else {}
    timing_rows = timing_table(timing, deploy_res.data, hil_res.data)
    png = write_png(mcap if mcap.exists() else None, out / "demo.png",
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
    from edgerl.report import finite

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
