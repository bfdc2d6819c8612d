"""The escalation ladder (hold -> decay -> e-stop), alone and inside the EditLoop, on a
virtual clock (no sleeps)."""

from __future__ import annotations

import numpy as np
import pytest
from test_rt_edit_loop import planner_loop, ramp_chunk

from edgerl.contract.spec import ActionSpec
from edgerl.runtime.escalation import Escalation, EscalationConfig
from edgerl.runtime.safety import SafetyConfig, SafetyFilter
from tests.helpers.specs import make_spec


def _ladder(hold_s=0.2, decay_s=0.4):
    return Escalation(EscalationConfig(hold_s=hold_s, decay_s=decay_s))


class TestLadderAlone:
    def test_each_step_with_exact_commands(self):
        esc = _ladder()
        start = np.array([1.0, -2.0], np.float32)
        last, safe = start.copy(), np.zeros(2, np.float32)
        out = np.zeros(2, np.float32)
        steps = []
        for k in range(9):  # ticks every 0.1 s: bad_s = 0, .1, ..., .8
            steps.append(esc.advance(0.1, last, safe, out))
            if k <= 1:  # hold: the command the ladder started from
                np.testing.assert_allclose(out, start)
            elif k <= 5:  # decay: linear from it to safe over 0.4 s
                frac = (k * 0.1 - 0.2) / 0.4
                np.testing.assert_allclose(out, start * (1 - frac), rtol=1e-5, atol=1e-6)
            else:
                np.testing.assert_allclose(out, safe)
            last = out.copy()  # what the caller sent
        assert steps == ["hold"] * 2 + ["decay"] * 4 + ["estop"] * 3
        assert esc.entered == {"hold": 1, "decay": 1, "estop": 1}

    def test_good_input_resets_before_estop(self):
        esc = _ladder()
        last, safe, out = np.ones(1, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32)
        for _ in range(4):
            esc.advance(0.1, last, safe, out)
        assert esc.step == "decay"
        esc.clear()
        assert esc.advance(0.1, last, safe, out) == "hold" and esc.bad_s == 0.0

    def test_without_stop_the_ladder_ends_at_safe(self):
        esc = _ladder()
        last, safe, out = np.ones(1, np.float32), np.full(1, 0.5, np.float32), np.zeros(1,
                                                                                     np.float32)
        for _ in range(50):
            step = esc.advance(0.1, last, safe, out, stop=False)
        assert step == "decay" and out[0] == pytest.approx(0.5)

    @pytest.mark.parametrize("kw", [{"hold_s": -1.0}, {"decay_s": 0.0},
                                    {"decay_s": float("inf")}])
    def test_bad_bounds_named(self, kw):
        with pytest.raises(ValueError, match="escalation"):
            EscalationConfig(**kw)


class TestSafetyDefault:
    def test_escalate_is_the_default_and_latches_estop(self):
        """main defaulted stale_policy/nonfinite_policy to ``hold``: repeated forever."""
        cfg = SafetyConfig()
        assert cfg.stale_policy == "escalate" and cfg.nonfinite_policy == "escalate"
        f = SafetyFilter(ActionSpec(names=["a"], units=["1"], low=[-1.0], high=[1.0]), cfg,
                         EscalationConfig(hold_s=0.1, decay_s=0.1))
        out = np.zeros(1, np.float32)
        f.filter(np.array([0.8], np.float32), 0.05, out)
        for _ in range(5):
            f.fallback("escalate", 0.05, out, nonfinite=True, reason="nonfinite_obs")
        assert f.estopped and "escalation" in f.estop_reason and out[0] == 0.0


class TestLoopEscalates:
    def test_planner_dies_hold_decay_estop(self):
        """main held the last command forever after the planner died (stale_policy hold)."""
        loop = planner_loop()  # 100 Hz, H 10, stale after 15 steps; manifest hold .2, decay 1
        spec = loop.spec
        assert (spec.timing.hold_s, spec.timing.decay_s) == (0.2, 1.0)
        loop.buffer.push(ramp_chunk(t0=0.0, start=50))
        t = 0.0
        for _ in range(15):
            loop.tick(t)
            t = round(t + 0.01, 6)
        held = float(loop.command[0])
        assert held == pytest.approx(0.59)
        seen = {}
        while t < 3.0:
            cmd = float(loop.tick(t)[0])
            step = loop.safety.escalation.step
            seen.setdefault(step, (t, cmd))
            if loop.state == "estop":
                break
            t = round(t + 0.01, 6)
        # stale from t = .15: hold until .35, decay to 0 over 1 s, e-stop at 1.35
        assert seen["hold"] == (pytest.approx(0.15), pytest.approx(held))
        assert seen["decay"][0] == pytest.approx(0.35)
        assert seen["estop"][0] == pytest.approx(1.35, abs=0.011)
        assert loop.state == "estop" and loop.safety.estopped
        mid = float(loop.command[0])
        assert mid == 0.0
        # a new chunk does not release the latch (operator decision)
        loop.buffer.push(ramp_chunk(t0=t, start=10))
        assert float(loop.tick(t + 0.01)[0]) == 0.0 and loop.state == "estop"

    def test_decay_is_linear_in_loop_time(self):
        loop = planner_loop()
        loop.buffer.push(ramp_chunk(t0=0.0, start=50))
        for k in range(15):
            loop.tick(k * 0.01)
        for k in range(15, 36):
            loop.tick(k * 0.01)  # hold through 0.35
        loop.tick(0.85)  # half-way through the decay: 0.59 * (1 - 0.5)
        assert float(loop.command[0]) == pytest.approx(0.59 * 0.5, rel=1e-4)

    def test_no_chunk_at_start_never_estops(self):
        loop = planner_loop()
        for k in range(500):
            loop.tick(k * 0.01)
        assert loop.state == "no_chunk" and not loop.safety.estopped

    def test_nonfinite_observation_escalates_to_estop(self):
        loop = planner_loop()
        loop.buffer.push(ramp_chunk(t0=0.0, n=10))
        loop.obs.write(np.full(loop.spec.observation.dim, np.nan, np.float32), 0.0)
        for k in range(200):
            loop.buffer.push(ramp_chunk(t0=(k + 1) * 0.01, n=10))  # planner alive
            loop.tick((k + 1) * 0.01)
        assert loop.safety.estopped and loop.state == "estop"


    def test_no_state_yet_never_estops_and_the_first_state_drives(self):
        """A robot still booting when the edit node activates: before the first state the
        slot holds NaN and the ladder latched the e-stop after hold + decay (1.2 s), so
        `make demo`'s deploy stage ran every episode e-stopped (0/16). Before any state the
        ladder ends at the safe action without latching; the first state then drives."""
        from edgerl.contract.clock import VirtualClock
        from edgerl.runtime.chunk_buffer import ChunkBuffer
        from edgerl.runtime.edit_loop import EditLoop

        loop = EditLoop(make_spec(method="planner"), None, ChunkBuffer(), clock=VirtualClock(0.0))
        t = 0.0
        for _ in range(300):  # 3 s > hold_s + decay_s without any state, planner alive
            t = round(t + 0.01, 6)
            loop.buffer.push(ramp_chunk(t0=t, n=10))
            loop.tick(t)
        assert loop.state == "nonfinite_obs" and not loop.safety.estopped
        assert float(loop.command[0]) == 0.0  # the safe action
        loop.obs.write(np.zeros(loop.spec.observation.dim, np.float32), t)
        t = round(t + 0.01, 6)
        loop.buffer.push(ramp_chunk(t0=t, n=10))
        loop.tick(t)
        assert loop.state == "ok"


def test_manifest_bounds_reach_the_loop():
    spec = make_spec(method="planner")
    spec.timing.hold_s, spec.timing.decay_s = 0.05, 0.05
    loop = planner_loop()
    assert loop.safety.escalation.cfg.hold_s == 0.2  # defaults of an old manifest
    from edgerl.contract.clock import VirtualClock
    from edgerl.runtime.chunk_buffer import ChunkBuffer
    from edgerl.runtime.edit_loop import EditLoop

    loop = EditLoop(spec, None, ChunkBuffer(), clock=VirtualClock(0.0))
    assert loop.safety.escalation.cfg.hold_s == 0.05
