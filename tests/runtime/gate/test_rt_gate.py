"""The runtime's planning-budget gate: observation parity with the sim's GatedEnv, the gate
network, and the gated planner client honouring its choices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import VirtualClock
from edgerl.contract.gate_obs import build_gate_obs
from edgerl.contract.spec import LatencyModel, load_bundle_manifest
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.gate.budget_gate import BudgetGate, PlanState
from edgerl.runtime.gate.client import (
    GatedPlannerClient,
    chain,
    committed_prefix,
    draw_delay_steps,
    when_all,
)
from edgerl.runtime.loop_io import ObservationSlot
from tests.helpers.gate_bundles import rule_gate_weights, write_gate_bundle


class ZeroRows:
    """A budgeted planner returning ``budget.horizon`` rows of ``value``; records its calls."""

    def __init__(self, value: float = 0.0) -> None:
        self.value = value
        self.calls: list[tuple[str, float, np.ndarray | None]] = []

    def plan(self, budget, observation, now, prefix):
        self.calls.append((budget.name, now, None if prefix is None else prefix.copy()))
        return ActionChunk(actions=np.full((budget.horizon, 2), self.value, np.float32),
                           t0=now, dt=0.05, obs_time=now, source=budget.name)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return write_gate_bundle(tmp_path_factory.mktemp("gate") / "bundle")


def _client(bundle, planner, clock=None):
    spec = load_bundle_manifest(bundle)
    buffer = ChunkBuffer("replace", spec.action.dim)
    slot = ObservationSlot(spec.observation.dim)
    client = GatedPlannerClient(BudgetGate(bundle, spec), planner, buffer, slot,
                                clock=clock or VirtualClock())
    return client, buffer, slot


def test_runtime_gate_obs_equals_gated_env_on_one_trajectory(bundle):
    """The same budget sequence through GatedEnv and through the runtime client (chunk
    buffer, pending requests, arrival rule): equal gate observations at every decision,
    covering no chunk, plans in flight, a running plan, a stale plan and an overtaken one."""
    from edgerl.policies.gate.policy import ROADS, driving_gate_cfg
    from edgerl.sim.gate.env import GatedEnv
    from edgerl.sim.registry import make_task

    env = GatedEnv(make_task("driving", num_envs=1, seed=3, **ROADS["curves"]),
                   driving_gate_cfg(seed=3))
    client, buffer, slot = _client(bundle, ZeroRows())
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


def test_client_honours_the_gate_keep_sends_nothing(bundle):
    planner = ZeroRows(0.25)
    clock = VirtualClock()
    client, buffer, slot = _client(bundle, planner, clock)
    period = client.period_s
    chosen = []
    for i in range(40):
        t = i * period
        clock.sleep_until(t)
        slot.write(np.zeros(10, np.float32), t)
        chosen.append(client.gate.budgets[client.step(t)].name)
    made = [name for name, _, _ in planner.calls]
    decided = client.stats()["decided"]
    assert {n: chosen.count(n) for n in ("keep", "fast", "slow")} == decided
    assert all(decided[n] > 0 for n in ("keep", "fast", "slow")), decided
    assert made.count("keep") == 0
    assert {n: made.count(n) for n in ("fast", "slow")} == {
        n: decided[n] for n in ("fast", "slow")} == {
        n: client.stats()["requests"][n] for n in ("fast", "slow")}
    # each request arrived after its budget's delay (fast 1 step, slow 8 steps)
    assert client.counters["delivered"] >= len(made) - 1
    assert buffer.latest() is not None and buffer.latest().actions[0, 0] == np.float32(0.25)
    # the slow plan is asked with the committed prefix (its 8 delay steps), the fast without
    prefixes = {name: p for name, _, p in planner.calls}
    assert prefixes["fast"] is None and prefixes["slow"].shape == (8, 2)


def test_committed_prefix_and_delay_draws():
    chunk = ActionChunk(actions=np.arange(8, dtype=np.float32).reshape(4, 2), t0=1.0, dt=0.1,
                        obs_time=1.0)
    p = committed_prefix(chunk, 1.2, 4, 0.1, 0, 2)
    np.testing.assert_array_equal(p, [[4, 5], [6, 7], [0, 0], [0, 0]])  # stale after row 3
    assert committed_prefix(None, 1.0, 3, 0.1, 0, 2).tolist() == [[0, 0]] * 3
    rng = np.random.default_rng(0)
    assert draw_delay_steps(LatencyModel(planner_delay_steps=8), rng) == 8
    dist = LatencyModel(delay_distribution=[0.0, 0.5, 0.5])
    assert {draw_delay_steps(dist, rng) for _ in range(50)} == {1, 2}
    jit = LatencyModel(planner_delay_steps=2, delay_jitter_steps=1.0)
    assert {draw_delay_steps(jit, rng) for _ in range(200)} == {2, 3}  # ceil of (1, 3)


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


def test_client_waits_for_a_post_reset_observation_and_drops_old_requests(bundle):
    planner = ZeroRows()
    client, buffer, slot = _client(bundle, planner)
    slot.write(np.zeros(10, np.float32), 0.0)
    assert client.gate.budgets[client.step(0.0)].name == "slow"  # no plan: slow, in flight
    assert client.in_flight(0.1)
    buffer.reset(0.2)  # a new episode; the slow plan (from t=0) is pending
    client.replan_now()
    assert not client.in_flight(0.2)
    assert client.step(0.2) is None and len(planner.calls) == 1  # still the old state
    slot.write(np.zeros(10, np.float32), 0.2)
    assert client.gate.budgets[client.step(0.2)].name == "slow" and len(planner.calls) == 2
    client.deliver(0.2 + 8 * 0.05)
    assert buffer.latest().obs_time == 0.2 and buffer.dropped_pre_reset == 0


def test_client_keeps_deciding_while_a_future_plan_computes(bundle):
    from concurrent.futures import Future

    class Later(ZeroRows):
        """Returns a future; the test resolves it (a planner computing elsewhere)."""

        def __init__(self):
            super().__init__()
            self.futures = []

        def plan(self, budget, observation, now, prefix):
            fut = Future()
            self.futures.append((fut, super().plan(budget, observation, now, prefix)))
            return fut

    planner = Later()
    client, buffer, slot = _client(bundle, planner)
    slot.write(np.zeros(10, np.float32), 0.0)
    assert client.gate.budgets[client.step(0.0)].name == "slow"  # returns at once
    due = 8 * 0.05
    assert client.deliver(due + 0.2) == 0 and client.in_flight(due + 0.2)  # not computed
    slot.write(np.zeros(10, np.float32), 0.1)
    assert client.gate.budgets[client.step(0.1)].name == "keep"  # decided meanwhile
    fut, chunk = planner.futures[0]
    fut.set_result(chunk)
    assert client.deliver(due + 0.2) == 1 and client.counters["late"] == 1
    assert buffer.latest() is chunk and not client.in_flight(due + 0.2)
    slot.write(np.zeros(10, np.float32), 1.0)  # the plan is old now: fast, which fails
    assert client.gate.budgets[client.step(1.0)].name == "fast"
    planner.futures[1][0].set_exception(RuntimeError("planner died"))
    assert client.deliver(1.1) == 0 and client.counters["errors"] == 1


def test_committed_prefix_counts_plans_in_flight_that_arrive_within_the_delay():
    """The sim's ``committed_rows`` rule: at each step the newest plan among the running one
    and those in flight due by then; one older than the running plan never wins."""
    def chunk(value, t0, rows=6):
        return ActionChunk(actions=np.full((rows, 2), value, np.float32) +
                           np.arange(rows, dtype=np.float32)[:, None] / 10, t0=t0, dt=0.1,
                           obs_time=t0)

    now, new, old = chunk(1, 1.0), chunk(2, 1.1), chunk(3, 0.9)
    p = committed_prefix(now, 1.2, 4, 0.1, 0, 2, arriving=[(1.3, new), (1.25, old)])
    # 1.2: the running plan's row 2; from 1.3 the new plan (rows 2, 3, 4 of it)
    np.testing.assert_allclose(p[:, 0], [1.2, 2.2, 2.3, 2.4], atol=1e-6)
    assert committed_prefix(now, 1.2, 4, 0.1, 0, 2).tolist() == \
        committed_prefix(now, 1.2, 4, 0.1, 0, 2, arriving=[(1.25, old)]).tolist()


def test_client_plans_a_compensated_budget_from_a_plan_in_flight(bundle):
    from concurrent.futures import Future

    client, buffer, slot = _client(bundle, ZeroRows())
    names = client.gate.gate.names
    fast, slow = names.index("fast"), names.index("slow")
    slot.write(np.zeros(slot.dim, np.float32), 0.0)
    computing: Future = Future()

    class InFlight(ZeroRows):
        def plan(self, budget, observation, now, prefix):
            if budget.name == "fast":  # the fast plan: 16 rows of 5, computed at once
                return ActionChunk(actions=np.full((16, 2), 5.0, np.float32), t0=now,
                                   dt=0.05, obs_time=now)
            return super().plan(budget, observation, now, prefix)

    client.planner = InFlight()
    client.execute(fast, np.zeros(slot.dim, np.float32), 0.0)  # due at 0.05, not delivered
    client.execute(slow, np.zeros(slot.dim, np.float32), 0.0)
    prefix = client.planner.calls[-1][2]
    assert prefix.shape == (8, 2) and prefix[0].tolist() == [0, 0]  # nothing runs at 0.0
    assert (prefix[1:] == 5.0).all()  # the fast plan from its arrival on
    assert client.counters["prefix_in_flight"] == 1 and client.counters["prefix_waited"] == 0
    # a plan still computing: the prefix is a future, resolved once its rows are known; the
    # slow plan is planned then, from the running chunk and the plans pending at its request
    client2, _, slot2 = _client(bundle, ZeroRows())
    slot2.write(np.zeros(slot2.dim, np.float32), 0.0)
    prefixes: list = []
    planned: list = []

    class Computing(ZeroRows):
        def plan(self, budget, observation, now, prefix):
            if budget.name == "fast":
                return computing  # a future not done yet
            prefixes.append(prefix)
            planned.append(chain(prefix, lambda rows: ActionChunk(
                actions=np.full((budget.horizon, 2), rows.sum(), np.float32), t0=now,
                dt=0.05, obs_time=now)))
            return planned[-1]

    client2.planner = Computing()
    client2.execute(fast, np.zeros(slot2.dim, np.float32), 0.0)
    client2.execute(slow, np.zeros(slot2.dim, np.float32), 0.0)
    (waiting,) = prefixes
    assert isinstance(waiting, Future) and not waiting.done()
    assert client2.counters["prefix_waited"] == 1 and client2.in_flight(10.0)
    assert client2.deliver(10.0) == 0  # neither plan is computed
    computing.set_result(ActionChunk(actions=np.full((16, 2), 5.0, np.float32), t0=0.0,
                                     dt=0.05, obs_time=0.0))
    assert waiting.result(timeout=1)[0].tolist() == [0, 0] and (waiting.result()[1:] == 5).all()
    assert client2.counters["prefix_in_flight"] == 1
    assert planned[0].result(timeout=1).actions[0, 0] == 7 * 2 * 5.0  # planned from it
    assert client2.deliver(10.0) == 2 and client2.counters["delivered"] == 2


def test_a_failed_plan_in_flight_leaves_the_running_chunk_in_the_prefix(bundle):
    from concurrent.futures import Future

    client, buffer, slot = _client(bundle, ZeroRows())
    names = client.gate.gate.names
    slot.write(np.zeros(slot.dim, np.float32), 0.0)
    buffer.push(ActionChunk(actions=np.full((48, 2), 1.0, np.float32), t0=0.0, dt=0.05,
                            obs_time=0.0), now=0.0)
    computing: Future = Future()
    prefixes: list = []

    class Planner(ZeroRows):
        def plan(self, budget, observation, now, prefix):
            if budget.name == "fast":
                return computing
            prefixes.append(prefix)
            return Future()

    client.planner = Planner()
    client.execute(names.index("fast"), np.zeros(slot.dim, np.float32), 0.0)
    client.execute(names.index("slow"), np.zeros(slot.dim, np.float32), 0.0)
    computing.set_exception(RuntimeError("fast planner died"))
    assert (prefixes[0].result(timeout=1) == 1.0).all()
    assert client.counters["prefix_in_flight"] == 0 and client.counters["prefix_waited"] == 1


def test_when_all_resolves_once_every_future_is_done_whatever_its_outcome():
    from concurrent.futures import Future

    assert when_all([]).done()
    first, second = Future(), Future()
    both = when_all([first, second])
    first.set_exception(RuntimeError("failed"))
    assert not both.done()
    second.set_result(1)
    assert both.done() and both.result() is None


def test_chain_follows_values_futures_and_failures():
    from concurrent.futures import Future

    assert chain(3, lambda v: v + 1).result(timeout=1) == 4
    source: Future = Future()
    inner: Future = Future()
    out = chain(source, lambda v: inner)
    assert not out.done()
    source.set_result(1)
    assert not out.done()  # follows the future ``then`` returned
    inner.set_result("chunk")
    assert out.result(timeout=1) == "chunk"
    failed: Future = Future()
    failed.set_exception(ValueError("no rows"))
    with pytest.raises(ValueError, match="no rows"):
        chain(failed, lambda v: v).result(timeout=1)
    with pytest.raises(ZeroDivisionError):
        chain(1, lambda v: v / 0).result(timeout=1)
    cancelled: Future = Future()
    cancelled.cancel()
    assert chain(cancelled, lambda v: v).exception(timeout=1) is not None


