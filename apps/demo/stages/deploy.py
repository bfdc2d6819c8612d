"""Demo stage ``deploy``: the bundle on the ROS 2 graph (sim robot, planner node, edit node)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from edgerl.apps.demo.config import DemoConfig, StageResult

__all__ = ["demo_params", "stage_deploy"]


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
        # ok when at least half of the deployed episodes reach the task's success (the
        # policy's own success rate is ~0.93: all of 4 episodes is a coin flip); k/n is shown
        res = deploy(DeployConfig(bundle=bundle_dir, duration_s=cfg.checks.deploy_s,
                                  params_file=demo_params(out, delay_s), record=mcap,
                                  min_success=0.5),
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
