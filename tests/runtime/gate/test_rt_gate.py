"""The runtime's planning-budget gate: observation parity with the sim's GatedEnv, the gate
network and its choice, and the baseline choosers (fixed, age heuristic)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.contract.gate_obs import build_gate_obs
from edgerl.contract.spec import load_bundle_manifest
from edgerl.runtime.gate.budget_gate import BudgetGate, PlanState
from tests.helpers.gate_bundles import rule_gate_weights
from tests.helpers.gate_clients import ZeroRows, gated_client


def test_runtime_gate_obs_equals_gated_env_on_one_trajectory(bundle):
    """The same budget sequence through GatedEnv and through the runtime client (chunk
    buffer, pending requests, arrival rule): equal gate observations at every decision,
    covering no chunk, plans in flight, a running plan, a stale plan and an overtaken one."""
    from edgerl.policies.gate.policy import ROADS, driving_gate_cfg
    from edgerl.sim.gate.env import GatedEnv
    from edgerl.sim.registry import make_task

    env = GatedEnv(make_task("driving", num_envs=1, seed=3, **ROADS["curves"]),
                   driving_gate_cfg(seed=3))
    client, buffer, slot = gated_client(bundle, ZeroRows())
    names = client.gate.gate.names
    k, f, s = names.index("keep"), names.index("fast"), names.index("slow")
    choices = [k, s, k, k, k, k, k, s, f, k, k, k, k, f, *[k] * 8]
    dt, steps = 0.05, env.gate_cfg.decision_steps
    seen, worst = set(), 0.0
    try:
        for i, j in enumerate(choices):
            t = i * steps * dt
            obs = env.get_observations()
            robot = obs["robot"][0].numpy()
            slot.write(robot, t)
            client.deliver(t)
            got = client.gate_observation(robot, t, t)
            want = obs["policy"][0].numpy()
            worst = max(worst, float(np.abs(got - want).max()))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6, err_msg=f"decision {i}")
            has, flying = got[-2] > 0, got[-1] > 0
            seen.add("in_flight" if flying else "idle")
            seen.add("running" if has else ("stale" if buffer.latest() else "no_chunk"))
            client.execute(j, robot, t)
            _, _, done, _ = env.step(torch.tensor([j]))
            assert not bool(done[0]), "the trajectory must stay in one episode"
    finally:
        env.close()
    assert seen == {"in_flight", "idle", "running", "stale", "no_chunk"}, seen
    assert buffer.dropped_old == 1  # the slow plan overtaken by the fast one
    assert worst == 0.0  # one builder on both sides: bitwise equal


def test_gate_network_scores_and_choice_follow_the_rule(bundle):
    spec = load_bundle_manifest(bundle)
    gate = BudgetGate(bundle, spec)
    w, b = rule_gate_weights(gate.gate)
    robot = np.arange(10, dtype=np.float32)
    cases = {"slow": (PlanState(), False), "keep": (PlanState(3, 3, 48), False),
             "fast": (PlanState(12, 12, 48), False)}
    for name, (plan, flying) in cases.items():
        x = gate.observe(robot, plan, flying)
        np.testing.assert_allclose(gate.scores(x), w @ x + b, atol=1e-6)
        assert gate.budgets[gate.decide(robot, plan, flying)].name == name
    x = gate.observe(robot, PlanState(), True)
    assert gate.budgets[int(np.argmax(gate.scores(x)))].name == "keep"  # in flight
    assert gate.counts == {"keep": 1, "fast": 1, "slow": 1}


def test_gate_obs_masks_age_and_rows_without_a_usable_plan(bundle):
    gate = load_bundle_manifest(bundle).gate
    robot = np.arange(10, dtype=np.float32)
    running = build_gate_obs(robot, np.int64(5), np.int64(4), np.int64(16), np.bool_(False),
                             gate)
    np.testing.assert_array_equal(running[:3], robot[gate.fast_indices])
    np.testing.assert_allclose(running[3:], [5 / 20, 12 / 20, 1, 0])
    stale = build_gate_obs(robot, np.int64(20), np.int64(16), np.int64(16), np.bool_(True),
                           gate)
    np.testing.assert_allclose(stale[3:], [0, 0, 0, 1])
    t = torch.from_numpy(np.stack([robot, robot]))
    both = build_gate_obs(t, torch.tensor([5, 20]), torch.tensor([4, 16]),
                          torch.tensor([16, 16]), torch.tensor([False, True]), gate)
    np.testing.assert_array_equal(both.numpy(), np.stack([running, stale]))


def test_gate_refuses_a_bundle_without_gate_and_a_tampered_file(bundle, tmp_path):
    import shutil

    from edgerl.contract.bundle_errors import BundleHashError

    spec = load_bundle_manifest(bundle)
    no_gate = type(spec)(**{**spec.__dict__, "gate": None})
    with pytest.raises(ValueError, match="no gate section"):
        BudgetGate(bundle, no_gate)
    copy = shutil.copytree(bundle, tmp_path / "b")
    (copy / "gate.onnx").write_bytes((copy / "gate.onnx").read_bytes() + b"\0")
    with pytest.raises(BundleHashError, match="gate.onnx"):
        BudgetGate(copy, spec)


def test_baseline_choosers_and_their_errors(bundle):
    from edgerl.runtime.gate.budget_gate import make_chooser

    spec = load_bundle_manifest(bundle)
    robot = np.zeros(10, np.float32)
    fixed = make_chooser(bundle, spec, "fixed:slow")
    assert [fixed.decide(robot, p, f) for p, f in ((PlanState(), False),
                                                   (PlanState(2, 2, 48), True))] == [2, 2]
    age = make_chooser(bundle, spec, "age:fast:8")
    cases = [(PlanState(), False, "fast"),          # no plan
             (PlanState(), True, "keep"),           # nothing running, but one in flight
             (PlanState(8, 8, 16), False, "keep"),  # not older than 8 steps
             (PlanState(9, 9, 16), False, "fast"),  # older
             (PlanState(3, 16, 16), False, "fast")]  # stale (past its 16 rows)
    for plan, flying, want in cases:
        assert age.budgets[age.decide(robot, plan, flying)].name == want, (plan, flying)
    assert age.counts == {"keep": 2, "fast": 3, "slow": 0} and age.name == "age>8:fast"
    for bad, msg in (("fixed:medium", "no budget named 'medium'"),
                     ("age:slow", "expected gate, gate:sample, fixed:NAME or age:NAME:STEPS"),
                     ("greedy", "expected gate, gate:sample, fixed:NAME"),
                     ("gate:softmax", "expected gate, gate:sample")):
        with pytest.raises(ValueError, match=msg):
            make_chooser(bundle, spec, bad)


def test_age_heuristic_reads_has_chunk_where_a_preview_gate_puts_it(bundle):
    """With a plan preview the observation ends in preview rows, not in has_chunk/in_flight:
    the heuristic still keeps a young usable plan and replans a stale one."""
    import dataclasses

    from edgerl.runtime.gate.budget_gate import AgeHeuristic

    spec = load_bundle_manifest(bundle)
    preview = dataclasses.replace(spec.gate, preview_steps=[0, 4], action_dim=2,
                                  extra=list(spec.gate.extra))
    assert preview.position("has_chunk") == len(preview.fast_indices) + 2 < preview.dim - 2 * 2
    age = AgeHeuristic(dataclasses.replace(spec, gate=preview), "fast", 8)
    rows = np.zeros((16, 2), np.float32)  # a plan of zeros: every preview element is 0
    robot = np.zeros(10, np.float32)
    assert age.budgets[age.decide(robot, PlanState(8, 8, 16, rows), False)].name == "keep"
    assert age.budgets[age.decide(robot, PlanState(3, 16, 16, rows), False)].name == "fast"
