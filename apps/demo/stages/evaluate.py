"""Demo stage ``evaluate``: success rate of the edit policy against its controls."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from edgerl.apps.demo.config import DemoConfig, StageResult

__all__ = ["control_hz", "stage_eval"]


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
    delay_ms = 1000.0 * cfg.delay_steps / control_hz(edit_run)
    rows = []
    for method, run, zero in (("edit", edit_run, False),
                              ("edit_zero_chunks", controls.get("edit_zero_chunks"), False),
                              ("planner", edit_run, True),
                              ("naive", controls.get("naive"), False)):
        if run is None:
            continue
        r = _evaluate(run, cfg.checks.eval_episodes, zero, cfg.show_progress)
        rows.append({"method": method, "success_rate": r["success_rate"],
                     "return_mean": r["return_mean"], "episodes": r["episodes"],
                     "action_rate": r["action_rate"],
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


def control_hz(run_dir: Path) -> float:
    """The run's control rate (Hz, from its resolved config)."""
    doc = json.loads((Path(run_dir) / "config.json").read_text())
    return float(doc["resolved"]["control_hz"])
