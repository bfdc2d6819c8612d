"""The planning-budget gate through the HIL runtime path: the plant in sim, the firmware host
build over a pty, the host's EditLoop + gated planner client running the bundle's gate.onnx,
and the plant's expert planning each chosen budget (real time: a few decisions)."""

from __future__ import annotations

import math

import pytest

from edgerl.hil.harness import HilConfig, run_hil
from tests.helpers.gate_bundles import write_gate_bundle

pytestmark = [pytest.mark.hil, pytest.mark.slow]


def test_gate_choices_reach_the_planner_through_the_hil(fw_binaries, tmp_path):
    bundle = write_gate_bundle(tmp_path / "gate")
    res = run_hil(HilConfig(bundle=bundle, episodes=1, max_steps=60, link_probe=0,
                            check_estop=False)).as_dict()
    decided, requests, plans = res["gate_decided"], res["gate_requests"], res["expert_plans"]
    shown = {k: res.get(k) for k in ("steps", "gate_decided", "expert_plans",
                                      "chunks_delivered", "chunks_dropped_reset",
                                      "chunks_late", "gate_errors")}
    # ~30 decisions in 3 s (every 2 plant steps at 20 Hz); the rule gate picks all budgets
    assert sum(decided.values()) >= 15 and all(decided[b] > 0 for b in decided), shown
    # keep asks for nothing; every other choice is exactly one plan of that budget
    assert requests["keep"] == plans["keep"] == 0, shown
    assert {b: plans[b] for b in ("fast", "slow")} == {b: decided[b] for b in ("fast", "slow")}
    assert requests == plans, shown
    # the plans arrived (the last one may still be in flight at the end; one planned before
    # an episode reset is dropped) and drove the plant
    arrived = res["chunks_delivered"] + res["chunks_dropped_reset"]
    assert arrived >= sum(plans.values()) - 1 and res["gate_errors"] == 0, shown
    assert res["setpoints_sent"] > 30 and math.isfinite(res["return_mean"]), shown


def test_hil_refuses_a_baseline_gate_policy_without_a_gate(fw_binaries, tmp_path):
    from tests.helpers.task_bundles import write_task_bundle

    bundle = write_task_bundle(tmp_path / "edit", "driving", horizon=48)
    with pytest.raises(ValueError, match="'fixed:fast' needs a host-loop bundle with a gate"):
        run_hil(HilConfig(bundle=bundle, episodes=1, max_steps=5, link_probe=0,
                          check_estop=False, gate_policy="fixed:fast"))


def test_sampled_gate_with_kicks_charges_the_planning_price(fw_binaries, tmp_path):
    from edgerl.hil.kicks import KickConfig

    bundle = write_gate_bundle(tmp_path / "gate", outputs="logits")
    res = run_hil(HilConfig(bundle=bundle, episodes=2, max_steps=24, link_probe=0,
                            check_estop=False, gate_policy="gate:sample",
                            kicks=KickConfig(rate=1.0, size=0.5, steps=4))).as_dict()
    shown = {k: res.get(k) for k in ("steps", "gate_decided", "gate_requests", "plan_cost",
                                      "kicks_started", "return_mean")}
    assert res["gate_policy"] == "gate:sample" and sum(res["gate_decided"].values()) >= 10
    # rate 1: a new 4-step kick starts the step after one ends
    assert res["kicks_started"] == -(-res["steps"] // 4), shown
    assert tuple(res["kicks"]["dims"]) == (1,), shown
    from tests.helpers.gate_bundles import driving_gate_spec

    costs = {b.name: b.cost for b in driving_gate_spec()[1].budgets}
    want = sum(costs[b] * n for b, n in res["gate_requests"].items())
    assert res["plan_cost"] == pytest.approx(want, abs=1e-4) and want > 0, shown
    assert res["return_minus_cost_mean"] == pytest.approx(res["return_mean"] - want / 2), shown
    # each episode's share of the price, by when its plans were asked: both episodes planned
    per_episode = res["episode_plan_costs"]
    assert len(per_episode) == 2 and min(per_episode) > 0, per_episode
    assert sum(per_episode) == pytest.approx(want, abs=1e-3), per_episode


def test_expert_planner_layouts_give_the_same_plans(tmp_path):
    """``per-budget`` returns futures (the gate decides while plans compute), ``shared``
    waits; both compute the sim's budget plan from the plant as it is."""
    from concurrent.futures import Future

    import numpy as np

    from edgerl.contract.spec import load_bundle_manifest
    from edgerl.hil.gate import ExpertBudgetPlanner
    from edgerl.policies.gate.policy import ROADS
    from edgerl.sim.registry import make_task

    spec = load_bundle_manifest(write_gate_bundle(tmp_path / "gate"))
    plant = make_task("driving", num_envs=1, seed=4, **ROADS["curves"])
    slow = next(b for b in spec.gate.budgets if b.name == "slow")
    assert slow.noise_std == 0 and slow.hold == 1  # deterministic rows: comparable
    rows = {}
    for workers in ("per-budget", "shared"):
        experts = ExpertBudgetPlanner(plant, spec.gate, spec.action.low, spec.action.high,
                                      0.05, seed=0, workers=workers)
        try:
            got = experts.plan(slow, np.zeros(3), 1.5, None)
            assert isinstance(got, Future) == (workers == "per-budget")
            chunk = got.result(timeout=60) if isinstance(got, Future) else got
            assert chunk.t0 == chunk.obs_time == 1.5 and chunk.horizon == slow.horizon
            rows[workers] = chunk.actions
            assert experts.calls["slow"] == 1
        finally:
            experts.close()
    np.testing.assert_array_equal(rows["per-budget"], rows["shared"])
    assert np.abs(rows["shared"]).max() > 0
    with pytest.raises(ValueError, match="budget workers 'two': expected one of per-budget"):
        ExpertBudgetPlanner(plant, spec.gate, spec.action.low, spec.action.high, 0.05,
                            workers="two")


def test_expert_planner_starts_a_deferred_prefix_from_the_plant_at_the_call(tmp_path):
    """A prefix future (a plan in flight still computing): the plan starts once it resolves,
    from the plant pickled at the call, so the plant moving on meanwhile changes nothing."""
    from concurrent.futures import Future

    import numpy as np
    import torch

    from edgerl.contract.spec import load_bundle_manifest
    from edgerl.hil.gate import ExpertBudgetPlanner
    from edgerl.policies.gate.policy import ROADS
    from edgerl.sim.registry import make_task

    spec = load_bundle_manifest(write_gate_bundle(tmp_path / "gate"))
    plant = make_task("driving", num_envs=1, seed=4, **ROADS["curves"])
    slow = next(b for b in spec.gate.budgets if b.name == "slow")
    prefix = np.full((slow.latency.planner_delay_steps, 2), 0.3, np.float32)
    experts = ExpertBudgetPlanner(plant, spec.gate, spec.action.low, spec.action.high, 0.05,
                                  seed=0)
    try:
        direct = experts.plan(slow, np.zeros(3), 1.5, prefix).result(timeout=60)
        rows: Future = Future()
        deferred = experts.plan(slow, np.zeros(3), 1.5, rows)
        for _ in range(20):  # the plant moves on while the prefix is unknown
            plant.step(torch.full((1, 2), 0.5))
        assert not deferred.done()
        moved = experts.plan(slow, np.zeros(3), 1.5, prefix).result(timeout=60)
        rows.set_result(prefix)
        np.testing.assert_array_equal(deferred.result(timeout=60).actions, direct.actions)
        assert np.abs(moved.actions - direct.actions).max() > 1e-3  # the plant did move
        failed: Future = Future()
        failed.set_exception(RuntimeError("the plan in flight failed"))
        with pytest.raises(RuntimeError, match="in flight failed"):
            experts.plan(slow, np.zeros(3), 1.5, failed).result(timeout=60)
    finally:
        experts.close()


def test_planner_processes_exit_when_their_parent_is_killed(tmp_path):
    """A harness killed outright (SIGKILL: no ``close()``) leaves no planner process behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    bundle = write_gate_bundle(tmp_path / "gate")
    code = (
        "import os, sys\n"
        "from edgerl.hil.gate import ExpertBudgetPlanner\n"
        "from edgerl.policies.gate.policy import ROADS\n"
        "from edgerl.sim.registry import make_task\n"
        "from edgerl.contract.spec import load_bundle_manifest\n"
        "if __name__ == '__main__':\n"
        f"    spec = load_bundle_manifest({str(bundle)!r})\n"
        "    plant = make_task('driving', num_envs=1, seed=0, **ROADS['curves'])\n"
        "    e = ExpertBudgetPlanner(plant, spec.gate, spec.action.low, spec.action.high, 0.05)\n"
        "    pids = [p.pid for pool in e._pools.values() for p in pool._processes.values()]\n"
        "    print(' '.join(map(str, pids)), flush=True)\n"
        "    import time; time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=os.getcwd())
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2  # fast and slow: one process each
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        alive = pids
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [p for p in pids if _alive(p)]
        assert not alive, f"planner processes {alive} outlived their killed parent"
    finally:
        proc.kill()


def _alive(pid: int) -> bool:
    """``pid`` runs and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
