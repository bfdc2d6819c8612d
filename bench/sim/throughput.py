"""Env-steps/s of a task next to its raw physics backend (``edgerl bench sim``).

``steps_per_s`` times ``step()`` (auto-resets included) through the whole task (and the
latency wrapper with ``method``) with zero actions, or with ``actions="expert"`` the task's
expert computed every step (closed loop, its cost included: a stand-in for a policy's
inference); ``raw_physics_steps_per_s`` is the task's
``raw_physics_steps_per_s`` hook (dynamics kernel / ``mujoco.rollout`` with zero control, no
observation, reward or wrapper), measured in the same run, so overhead is their ratio.
MuJoCo tasks add ``raw_same_states_steps_per_s`` / ``overhead_ratio_same_states``: their own
batch replaying the states the run stepped (``edgerl bench ratios``' reference).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

__all__ = ["measure"]

log = logging.getLogger(__name__)


def measure(task: str, num_envs: int, device: str = "cpu", steps: int = 200, warmup: int = 10,
            method: str = "", seed: int = 0, show_progress: bool = False,
            actions: str = "zero", repeats: int = 1) -> dict[str, Any]:
    """Build ``task`` and time it; returns the JSON object ``edgerl bench sim`` prints.

    Both rates are the best of ``repeats`` blocks of ``steps`` steps (other jobs on the
    machine only ever slow a block down).
    """
    import torch

    from edgerl.contract.logs import progress
    from edgerl.contract.spec import LatencyModel
    from edgerl.sim.registry import get_task_info, make_task
    from edgerl.sim.wrappers import LatencyCfg, make_latency_env

    info = get_task_info(task)
    env = make_task(task, num_envs=num_envs, device=device, seed=seed)
    try:
        stepper = env
        if method:
            lat = LatencyModel(planner_delay_steps=3, planner_period_steps=4)
            stepper = make_latency_env(env, LatencyCfg(method=method, latency=lat))
        zeros = torch.zeros(num_envs, int(env.num_actions), device=env.device)
        if actions not in ("zero", "expert"):
            raise ValueError(f"actions must be 'zero' or 'expert', got {actions!r}")
        use_expert = actions == "expert" and not method

        def act() -> torch.Tensor:
            return env.expert_action() if use_expert else zeros

        def sync() -> None:
            if env.device.type == "cuda":
                torch.cuda.synchronize(env.device)

        for _ in range(warmup):
            stepper.step(act())
        elapsed = math.inf
        for rep in range(max(int(repeats), 1)):
            sync()
            start = time.perf_counter()
            for _ in progress(range(steps), total=steps, desc=f"bench {task} {rep + 1}",
                              disable=not show_progress):
                stepper.step(act())
            sync()
            elapsed = min(elapsed, time.perf_counter() - start)
        raw = max(float(env.raw_physics_steps_per_s(num_envs, steps))
                  for _ in range(max(int(repeats), 1)))
        same = _same_state_raw(env, stepper, act, steps, repeats)
    finally:
        env.close()
    rate = num_envs * steps / elapsed
    extra = {} if same is None else {"raw_same_states_steps_per_s": same,
                                     "overhead_ratio_same_states": rate / same}
    agents = int(getattr(env, "n_agents", 1))
    return {"task": task, "backend": info.backend, "num_envs": num_envs, "device": device,
            "method": method or "none", "actions": actions, "steps": steps, "repeats": repeats,
            "threads": torch.get_num_threads(),
            "steps_per_s": rate, "raw_physics_steps_per_s": raw, "overhead_ratio": rate / raw,
            # one agent per env is policy-controlled; the others (driving's scripted cars) are
            # simulated vehicles, reported apart so the headline is not inflated by them
            "agents_per_env": agents, "policy_agent_steps_per_s": rate,
            "agent_steps_per_s": rate * agents, **extra}


def _same_state_raw(env: Any, stepper: Any, act: Any, steps: int, repeats: int) -> float | None:
    """MuJoCo tasks: the task's own batch replaying the states ``steps`` more steps of
    ``stepper`` leave it in (:class:`~edgerl.bench.sim.overhead.StateReplay`), env-steps/s, best of
    ``repeats``; ``None`` for tasks without a batch, and through the latency wrapper (its
    expert planner rolls the batch forward, which is not the task's physics). The same
    reference as ``edgerl bench ratios``' ``sim/<task>`` (a contact task's physics costs what
    its states make it cost, so the from-rest figure charges the difference to the task)."""
    from edgerl.bench.sim.overhead import StateReplay

    if stepper is not env or not hasattr(env, "sim") or not hasattr(env, "substeps"):
        return None
    replay = StateReplay(env.sim, steps)
    best = math.inf
    for _ in range(max(int(repeats), 1)):
        with replay.recording():
            for _ in range(steps):
                stepper.step(act())
        best = min(best, replay.replay(env.substeps))
    return env.num_envs * replay.count / best

