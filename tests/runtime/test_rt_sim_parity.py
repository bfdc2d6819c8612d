"""Sim-in-the-loop parity driven by one recorded arrival trace.

The training ``LatencyWrapper`` (its ``ChunkScheduler`` fed the trace's planner delays) and
the runtime (``EditLoop`` + ``ChunkBuffer`` on a virtual clock, chunks pushed at the trace's
arrival times) run the same cartpole episode with the same bundle timing. The trace has
jitter, a chunk overtaken by a newer one, a stretch without arrivals long enough for the
chunk to go stale, blends (``blend``) and an episode reset with a chunk in flight across it;
both sides must send the same commands to 1e-6. With a planner that exports an intent (a BC
planner's encoder), both build the same edit observation, byte for byte, at every step.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensordict")

from edgerl.contract.chunk import ActionChunk  # noqa: E402
from edgerl.contract.clock import VirtualClock  # noqa: E402
from edgerl.contract.spec import PolicySpec  # noqa: E402
from edgerl.contract.timing import LatencyModel, TimingSpec  # noqa: E402
from edgerl.runtime.bundle import load_bundle  # noqa: E402
from edgerl.runtime.chunk_buffer import ChunkBuffer  # noqa: E402
from edgerl.runtime.edit_loop import EditLoop, LoopConfig  # noqa: E402
from edgerl.runtime.safety import SafetyConfig  # noqa: E402
from tests.helpers.bundles import write_mlp_bundle  # noqa: E402

P, H, STEPS, BOUND, DT = 3, 8, 100, 0.3, 0.02
INTENT = 2
D_MAX = 15
RESET_AT = 75  # the runtime and the wrapper both restart the episode before this step


def _delays() -> dict[int, int]:
    """Planner delay (steps) of the query at each global step (queries every P steps of an
    episode): jitter 1..3; query 27's chunk (arrives 33) overtaken by query 30's (arrives
    31); queries 36, 39, 42 take D_max = 15 steps, so query 33's chunk (arrived 34) goes
    stale at 33 + H + P = 44 until query 45's arrives at 49, and the three late ones are
    dropped when they come (51, 54, 57); query 72's chunk is in flight across the reset at
    75 (arrives 77) and is refused."""
    rng = np.random.default_rng(7)
    delays = {k: int(rng.integers(1, 4)) for k in range(0, STEPS, P)}
    delays.update({27: 6, 30: 1, 33: 1, 36: D_MAX, 39: D_MAX, 42: D_MAX, 45: 4, 48: 2, 51: 2,
                   72: 5, 75: 3})
    return delays


def _delay_at(delays: dict[int, int], k: int) -> int:
    """The trace's delay for a query at global step ``k`` (a query off the first episode's
    grid, after an episode ended early, gets ``1 + k % 3``)."""
    return delays.get(k, 1 + k % 3)


def _timing(method: str) -> TimingSpec:
    lat = LatencyModel(planner_period_steps=P,
                       delay_distribution=[1.0] + [0.0] * D_MAX)  # D_max = 15: the bound
    return TimingSpec.build(1.0 / DT, lat, method, horizon=H, lookahead=2)


def _planner(lqr: torch.Tensor):
    def plan(obs: torch.Tensor, env_ids=None) -> torch.Tensor:
        decay = 0.9 ** torch.arange(H, dtype=torch.float32)
        a = (-(obs @ lqr)).clamp(-1.0, 1.0)
        ramp = 0.05 * torch.arange(H, dtype=torch.float32)  # rows differ: blends show
        return (a[:, None] * decay[None, :] + ramp[None, :])[..., None]  # (n, H, 1)
    return plan


def _make_env():
    from edgerl.sim.registry import make_task

    return make_task("cartpole", num_envs=1, seed=3)


class _IntentPlanner:
    """The LQR chunks of :func:`_planner` (they keep the pole up, so the trace's stale stretch
    happens) with a BC planner's intent head (random weights) as the intent:
    ``(chunks (n, H, 1), intent (n, I))``, as an intent planner answers the wrapper."""

    intent_dim = INTENT

    def __init__(self, lqr: torch.Tensor) -> None:
        from edgerl.policies.bc_planner import BCChunkPlanner

        torch.manual_seed(11)
        self.rows = _planner(lqr)
        self.bc = BCChunkPlanner(4, 1, H, [-1.0], [1.0], hidden_dims=(16, 16),
                                 intent_dim=INTENT, fast_indices=[0, 1])

    def __call__(self, obs: torch.Tensor, env_ids=None) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            return self.rows(obs), self.bc.encode(obs)


def _bundle(tmp_path, method: str, intent_dim: int = 0, seed: int = 5
            ) -> tuple[PolicySpec, object, object]:
    """``(spec with the trace's timing, runtime backend, onnxruntime session for training)``."""
    path = write_mlp_bundle(tmp_path / method, obs_dim=4, action_dim=1, control_hz=1 / DT,
                            horizon=H, chunk_dt=DT, period_s=P * DT, residual_bound=BOUND,
                            hidden=(16, 16), seed=seed, method=method, intent_dim=intent_dim)
    spec, net = load_bundle(path, warmup=1)
    timing = _timing(method)
    sess = ort.InferenceSession(str(path / "policy.onnx"), providers=["CPUExecutionProvider"])
    return dataclasses.replace(spec, latency=timing.latency, timing=timing), net, sess


def _run_wrapper(spec: PolicySpec, sess, method: str, delays: dict[int, int], plan=None,
                 seen: list | None = None) -> list[float]:
    """Commands of the training wrapper (``plan``: the planner, default the LQR one; ``seen``
    collects each step's policy observation)."""
    from edgerl.sim.wrappers.latency import LatencyWrapper
    from edgerl.sim.wrappers.latency_config import LatencyCfg

    env = _make_env()
    step = [0]

    def recorded(ids: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return torch.tensor([_delay_at(delays, step[0])] * int(ids.numel()), dtype=torch.int64)

    cfg = LatencyCfg.from_timing(spec.timing, method, edit_bound=BOUND,
                                 lookahead=spec.edit_obs.lookahead,
                                 n_committed=spec.edit_obs.n_committed,
                                 intent_dim=spec.edit_obs.intent_dim)
    wrapped = LatencyWrapper(env, cfg, planner=plan or _planner(env._lqr), delays=recorded)
    assert wrapped.horizon == H and wrapped.scheduler.stale_steps == spec.timing.stale_steps
    obs = wrapped.get_observations()
    cmds = []
    for k in range(STEPS):
        x = obs["policy"].numpy().astype(np.float32)
        if seen is not None:
            seen.append(x[0].copy())
        residual = (torch.from_numpy(sess.run(None, {"obs": x})[0]) if method == "edit"
                    else torch.zeros(1, 1))
        step[0] = k + 1  # the step at which step() queries the planner (on its new obs)
        obs, _, dones, _ = wrapped.step(residual)  # a done env restarts inside step()
        cmds.append(float(wrapped.last_command[0, 0]))
        if k + 1 == RESET_AT:
            obs = wrapped.reset()
    return cmds


def _run_runtime(spec: PolicySpec, net, delays: dict[int, int], plan=None,
                 seen: list | None = None) -> tuple[list[float], EditLoop, int]:
    """Commands, the loop, and how many pushes blended rows of the previous chunk (``plan``
    and ``seen`` as :func:`_run_wrapper`'s: here the edit observation each tick built)."""
    env = _make_env()
    plan = plan or _planner(env._lqr)
    buf = ChunkBuffer(spec.timing, spec.action.dim, intent_dim=spec.edit_obs.intent_dim)
    loop = EditLoop(spec, net, buf, clock=VirtualClock(0.0),
                    cfg=LoopConfig(safety=SafetyConfig(stale_policy="policy")))
    in_flight: dict[int, ActionChunk] = {}
    robot = env.get_observations()["policy"]
    episode_start, cmds, blends = 0, [], 0
    for k in range(STEPS):
        t = k * DT
        loop.obs.write(robot[0].numpy(), t)
        if (k - episode_start) % P == 0:  # query on the newest observation
            answer = plan(robot)
            rows, intent = answer if isinstance(answer, tuple) else (answer, None)
            arrive = k + _delay_at(delays, k)
            assert arrive not in in_flight, "two arrivals on one step: parity is per push"
            in_flight[arrive] = ActionChunk(actions=rows.numpy()[0], t0=t, dt=DT, obs_time=t,
                                            intent=None if intent is None else
                                            intent.numpy()[0])
        if k in in_flight:
            blends += buf.push(in_flight.pop(k), now=t).meta.get("overlap_rows", 0) > 0
        cmd = loop.tick(t)
        cmds.append(float(cmd[0]))
        if seen is not None:
            seen.append(loop.backend.input[0].copy())  # the edit observation the net read
        out, _, dones, _ = env.step(torch.from_numpy(cmd.copy())[None])
        robot = out["policy"]  # the task restarts a done episode inside step()
        if k + 1 == RESET_AT:
            robot = env.reset(torch.tensor([0]))["policy"]
        if k + 1 == RESET_AT or bool(dones[0]):  # a new episode starts at the next tick
            buf.reset((k + 1) * DT)
            loop.reset()
            episode_start = k + 1
    return cmds, loop, blends


@pytest.mark.parametrize("method", ["edit", "blend"])
def test_wrapper_and_runtime_agree_on_a_recorded_arrival_trace(tmp_path, method):
    spec, net, sess = _bundle(tmp_path, method)
    if method == "blend":
        net = None  # the command is the (blended) chunk row
    delays = _delays()
    train = _run_wrapper(spec, sess, method, delays)
    runtime, loop, blends = _run_runtime(spec, net, delays)
    np.testing.assert_allclose(runtime, train, atol=1e-6)

    # the trace exercised every case on the runtime side too
    assert loop.buffer.dropped_old >= 1 and loop.buffer.dropped_pre_reset >= 1
    assert blends >= 10 if method == "blend" else blends == 0
    if method == "blend":
        return  # open loop: the cart leaves the track during the stale stretch (a done)
    states = dict(zip(("ok", "no_chunk", "stale_chunk"), loop.metrics.state_counts[:3]))
    assert states["no_chunk"] == delays[0] + delays[RESET_AT]  # before each episode's first
    stale_from, next_arrival = 33 + H + spec.timing.stale_steps, 45 + 4
    assert states["stale_chunk"] == next_arrival - stale_from == 5
    assert loop.buffer.dropped_old == 4 and loop.buffer.dropped_pre_reset == 1


def test_edit_observations_agree_byte_for_byte_with_an_intent_planner(tmp_path):
    """The same recorded trace with a planner exporting an intent: the runtime's edit
    observation (intent segment included) is the training wrapper's, byte for byte, at every
    step (no chunk, fresh chunks, the stale stretch, the reset)."""
    # seed 1: a random policy that, on these chunks, keeps the pole up for the whole trace
    spec, net, sess = _bundle(tmp_path, "edit", intent_dim=INTENT, seed=1)
    assert spec.edit_obs.intent_dim == INTENT and net.input.shape[-1] == spec.edit_obs.dim
    planner = _IntentPlanner(_make_env()._lqr)
    delays = _delays()
    train_seen, runtime_seen = [], []
    train = _run_wrapper(spec, sess, "edit", delays, planner, train_seen)
    runtime, loop, _ = _run_runtime(spec, net, delays, planner, runtime_seen)
    np.testing.assert_allclose(runtime, train, atol=1e-6)
    a, b = np.stack(train_seen), np.stack(runtime_seen)
    assert a.shape == b.shape == (STEPS, spec.edit_obs.dim) and a.dtype == b.dtype
    for k in range(STEPS):
        assert a[k].tobytes() == b[k].tobytes(), (k, a[k], b[k])
    # the intent segment was really read: the planner's values while a chunk is used, zeros
    # before the first chunk and in the stale stretch
    seg = {name: (i0, i1) for name, i0, i1 in spec.edit_obs.layout()}
    i0, i1 = seg["intent"]
    has = a[:, seg["has_chunk"][0]] == 1.0
    assert has.sum() > 60 and (~has).sum() >= 9
    assert np.all(a[~has, i0:i1] == 0.0) and np.all(np.abs(a[has, i0:i1]) > 1e-4)
    assert len({a[k, i0:i1].tobytes() for k in np.flatnonzero(has)}) > 10  # it changes
    states = dict(zip(("ok", "no_chunk", "stale_chunk"), loop.metrics.state_counts[:3]))
    assert states["stale_chunk"] == 5 and states["no_chunk"] == delays[0] + delays[RESET_AT]
    assert loop.buffer.dropped_old == 4 and loop.buffer.dropped_pre_reset == 1
