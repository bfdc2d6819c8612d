"""The gated planner client: it honours the gate's choices, plans with the committed prefix
(plans in flight included, futures resolved when their rows are known), keeps deciding while
plans compute, and drops requests from before an episode reset."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import VirtualClock
from edgerl.contract.spec import LatencyModel
from edgerl.runtime.gate.client import chain, committed_prefix, draw_delay_steps, when_all
from tests.helpers.gate_clients import ZeroRows, gated_client


def test_client_honours_the_gate_keep_sends_nothing(bundle):
    planner = ZeroRows(0.25)
    clock = VirtualClock()
    client, buffer, slot = gated_client(bundle, planner, clock)
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


def test_client_waits_for_a_post_reset_observation_and_drops_old_requests(bundle):
    planner = ZeroRows()
    client, buffer, slot = gated_client(bundle, planner)
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
    client, buffer, slot = gated_client(bundle, planner)
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

    client, buffer, slot = gated_client(bundle, ZeroRows())
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
    client2, _, slot2 = gated_client(bundle, ZeroRows())
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

    client, buffer, slot = gated_client(bundle, ZeroRows())
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
