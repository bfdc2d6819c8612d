"""InputGuard: stamp, size and value bounds from the manifest, drops counted by reason."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.spec import PolicySpec
from edgerl.contract.timing import TimingSpec
from edgerl.runtime.input_guard import InputGuard
from tests.helpers.specs import make_spec

NOW = 1000.0


def guard(**timing):
    spec = make_spec(method="planner")  # 100 Hz, H 10, 2 actions in [-1, 1]
    for k, v in timing.items():
        setattr(spec.timing, k, v)
    return InputGuard(spec)


def chunk(t0=NOW, n=10, dt=0.01, value=0.1, obs_time=None):
    return ActionChunk(np.full((n, 2), value, np.float32), t0=t0, dt=dt,
                       obs_time=t0 if obs_time is None else obs_time)


class TestState:
    def test_ten_second_old_state_dropped(self):
        """main let a state stamped 10 s old drive the loop."""
        g = guard()
        assert g.bounds.state_max_age_s == pytest.approx(0.25)  # 25 periods at 100 Hz
        assert g.check_state(NOW - 10.0, NOW).startswith("stale:")
        assert g.check_state(NOW - 0.2, NOW) is None
        assert g.check_state(NOW + 0.5, NOW).startswith("future:")
        assert g.check_state(None, NOW).startswith("no_stamp:")
        assert g.counts() == {"state stale": 1, "state future": 1, "state no_stamp": 1}


class TestChunk:
    def test_fresh_chunk_ok(self):
        assert guard().check_chunk(chunk(t0=NOW - 0.03), NOW) is None

    def test_hour_ahead_refused(self):
        """main accepted a chunk stamped 1 h ahead."""
        g = guard()
        assert g.check_chunk(chunk(t0=NOW + 3600.0), NOW).startswith("future:")
        # the stamp (obs_time) alone ahead is refused too
        c = ActionChunk(np.zeros((10, 2), np.float32), t0=NOW, dt=0.01, obs_time=NOW + 0.05)
        assert g.check_chunk(c, NOW - 0.2).startswith("future:")

    def test_future_within_skew_is_not_fresh_forever(self):
        """main treated a chunk in the future as usable for as long as it stayed ahead;
        within the skew allowance it is stale (H + stale_steps) * dt after t0."""
        g = guard()
        c = chunk(t0=NOW + 0.05)
        assert g.check_chunk(c, NOW) is None
        assert g.bounds.chunk_max_age_s == pytest.approx(0.15)
        assert g.check_chunk(c, NOW + 0.05 + 0.1501).startswith("stale:")
        assert g.check_chunk(c, NOW + 0.05 + 0.149) is None
        # a huge row spacing would make it usable for days: refused
        assert g.check_chunk(chunk(dt=3600.0), NOW).startswith("bad_dt:")

    def test_oversized_chunk_refused(self):
        """main accepted a well-formed 20,000-point chunk with horizon 10."""
        g = guard()
        assert g.check_chunk_rows(20_000).startswith("too_long: 20000 rows")
        assert g.check_chunk(chunk(n=20_000), NOW).startswith("too_long")
        assert g.check_chunk_rows(10) is None

    def test_intent_of_the_wrong_size_dropped_and_counted(self):
        spec = make_spec(method="edit", intent_dim=2)
        g = InputGuard(spec)
        assert g.bounds.intent_dim == 2

        def with_intent(intent):
            return ActionChunk(np.zeros((10, 2), np.float32), t0=NOW, dt=0.01, obs_time=NOW,
                               intent=intent)

        assert g.check_chunk(with_intent([0.1, -0.2]), NOW) is None
        assert g.check_chunk(chunk(), NOW) is None  # no intent: the loop reads zeros
        assert g.check_chunk(with_intent([0.1, 0.2, 0.3]), NOW).startswith(
            "wrong_dim: an intent of 3 values, the manifest's edit_obs.intent_dim is 2")
        # a manifest without an intent refuses one too
        assert guard().check_chunk(with_intent([0.5]), NOW).startswith("wrong_dim")
        assert g.counts() == {"chunk wrong_dim": 1}

    def test_values(self):
        g = guard()
        assert g.check_chunk(chunk(value=1e6), NOW).startswith("out_of_limits")
        assert g.check_chunk(chunk(value=5.0), NOW) is None  # overshoot: clipped later
        assert g.check_chunk(chunk(value=-21.5), NOW).startswith("out_of_limits")  # > 10 spans
        assert g.counts() == {"chunk out_of_limits": 2}  # ActionChunk refuses non-finite


class TestCommand:
    def test_stale_unstamped_and_huge_commands_refused(self):
        """main's robot side executed commands 10 s old, zero-stamped or with effort 1e6."""
        g = guard()
        ok = np.array([0.5, -0.5], np.float32)
        assert g.check_command(ok, NOW - 0.01, NOW) is None
        assert g.check_command(ok, NOW - 10.0, NOW).startswith("stale:")
        assert g.check_command(ok, None, NOW).startswith("no_stamp:")
        assert g.check_command(np.array([1e6, 0.0]), NOW, NOW).startswith("out_of_limits")
        assert g.check_command(np.array([np.nan, 0.0]), NOW, NOW).startswith("nonfinite")
        assert g.check_command(np.zeros(3), NOW, NOW).startswith("wrong_dim")
        assert g.check_command(np.float32([1.0, -1.0]), NOW, NOW) is None  # limits exactly
        assert g.total == 5


class TestManifest:
    def test_bounds_round_trip_and_old_manifests_load(self, tmp_path):
        spec = make_spec()
        spec.timing.hold_s, spec.timing.future_skew_s = 0.3, 0.02
        spec.save(tmp_path)
        back = PolicySpec.load(tmp_path)
        assert (back.timing.hold_s, back.timing.future_skew_s) == (0.3, 0.02)
        doc = json.loads((tmp_path / "manifest.json").read_text())
        for key in ("state_max_age_periods", "future_skew_s", "command_max_age_s", "hold_s",
                    "decay_s"):
            del doc["timing"][key]  # a manifest written before these bounds existed
        old = PolicySpec.from_json(json.dumps(doc))
        t = old.timing
        assert (t.hold_s, t.decay_s, t.command_max_age_s, t.future_skew_s) == (0.2, 1.0, 0.5,
                                                                               0.1)

    @pytest.mark.parametrize("key,value", [("hold_s", -1.0), ("decay_s", 0.0),
                                           ("future_skew_s", float("nan")),
                                           ("state_max_age_periods", 0.0)])
    def test_bad_bounds_named(self, key, value):
        from edgerl.contract.serde import SchemaError

        with pytest.raises(SchemaError, match=f"timing.{key}"):
            TimingSpec(control_hz=100.0, horizon=10, **{key: value})


    @pytest.mark.parametrize("key,value", [("hold_s", 1e6), ("decay_s", 1e6),
                                           ("state_max_age_periods", 1e9),
                                           ("future_skew_s", 1e9), ("command_max_age_s", 1e9),
                                           ("trigger_timeout_periods", 1e9)])
    def test_bounds_that_would_turn_a_guard_off_are_refused_at_load(self, tmp_path, key,
                                                                    value):
        """A manifest with a huge hold, decay or stamp bound loaded before and held the last
        command forever after a planner stall or accepted any stale command."""
        from edgerl.contract.serde import SchemaError
        from edgerl.contract.timing import TIMING_MAX

        spec = make_spec()
        spec.save(tmp_path)
        doc = json.loads((tmp_path / "manifest.json").read_text())
        doc["timing"][key] = value
        with pytest.raises(SchemaError, match=f"timing.{key}: at most {TIMING_MAX[key]:g}"):
            PolicySpec.from_json(json.dumps(doc))
        doc["timing"][key] = TIMING_MAX[key]  # the bound itself loads
        assert getattr(PolicySpec.from_json(json.dumps(doc)).timing, key) == TIMING_MAX[key]


def test_chunk_buffer_with_guard_refuses_what_the_guard_refuses():
    """main's ChunkBuffer stored a 20,000-row chunk and one stamped 1 h ahead."""
    from edgerl.runtime.chunk_buffer import ChunkBuffer

    g = guard()
    buf = ChunkBuffer("replace", 2, guard=g)
    buf.push(chunk(n=20_000), NOW)
    buf.push(chunk(t0=NOW + 3600.0), NOW)
    assert buf.latest() is None and buf.pushes == 0
    assert buf.last_refusal.startswith("future")
    good = chunk(t0=NOW - 0.01)
    buf.push(good, NOW)
    assert buf.latest() is good
    assert g.counts() == {"chunk too_long": 1, "chunk future": 1}


def test_deployment_checks_planner_chunks(tmp_path):
    from edgerl.runtime.deployment import Deployment
    from tests.helpers.bundles import write_mlp_bundle

    bundle = write_mlp_bundle(tmp_path / "b", planner=True, hidden=(8,))
    dep = Deployment.from_bundle(bundle, planner="onnx")
    assert isinstance(dep.buffer.guard, InputGuard)
    assert Deployment.from_bundle(bundle, planner="none").buffer.guard is None
