"""``edgerl.contract.timing``: the one place chunk timing rules are computed.

A source scan fails when a horizon, stale or blend rule is computed anywhere else; the
behavioural tests check that training config, sim wrapper, manifest and runtime agree.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from edgerl.contract.serde import SchemaError
from edgerl.contract.spec import PolicySpec
from edgerl.contract.timing import (
    LatencyModel,
    TimingSpec,
)
from tests.helpers.specs import make_spec

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("contract", "runtime", "sim", "policies", "export", "hil", "bench", "apps",
           "ros2_ws/src")
#: The timing contract: the spec (timing.py) and its rules (timing_rules.py).
TIMING = (ROOT / "contract" / "timing.py", ROOT / "contract" / "timing_rules.py")
#: Functions that are timing rules: defined only in the timing modules.
RULE_FUNCTIONS = {"max_planner_delay", "required_horizon", "default_horizon",
                  "resolve_stale_steps", "resolve_blend_steps", "resolve_period",
                  "blend_weight", "blend_active", "merge_weights", "chunk_usable", "chunk_row",
                  "is_newer", "default_merge", "step_offset", "has_planned_row",
                  "inflight_slots", "oldest_chunk_age"}
#: Properties/methods outside the module that must delegate to it (name -> timing call).
DELEGATES = {"resolved_horizon": "default_horizon", "resolved_period": "resolve_period"}


def _names(node: ast.AST) -> set[str]:
    """Lower-case identifiers and attribute names under ``node``."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id.lower())
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr.lower())
    return out


def _mentions(names: set[str], word: str) -> bool:
    return any(word in n for n in names)


def _is_plus_one(node: ast.AST) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
            and isinstance(node.right, ast.Constant) and node.right.value == 1)


def rule_violations(source: str, where: str) -> list[str]:
    """Timing rules computed in ``source`` (empty list = clean)."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in RULE_FUNCTIONS:
                found.append(f"{line}: defines timing rule {node.name}()")
            if node.name in DELEGATES and DELEGATES[node.name] not in _names(node):
                found.append(f"{line}: {node.name} does not call timing.{DELEGATES[node.name]}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            # blend weights: (k + 1) / (n + 1), arange(1, n + 1) / (n + 1)
            if any(_is_plus_one(n) for n in ast.walk(node.right)):
                found.append(f"{line}: blend weight (... / (n + 1))")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            names = _names(node)
            if _mentions(names, "horizon") and _mentions(names, "stale"):
                found.append(f"{line}: stale rule (horizon + stale)")
            if _mentions(names, "period") and _mentions(names, "delay"):
                found.append(f"{line}: horizon rule (period + delay)")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("index_at", "is_stale") and where != "contract/chunk.py":
                found.append(f"{line}: chunk stale rule via ActionChunk.{name}() (use "
                             "TimingSpec.row_at)")
    return list(dict.fromkeys(found))  # nested sums report once


def _sources():
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path not in TIMING and ".venv" not in path.parts:
                yield path


class TestNoRuleOutsideTimingModule:
    def test_sources_compute_no_timing_rule(self):
        bad = []
        for path in _sources():
            bad += rule_violations(path.read_text(), str(path.relative_to(ROOT)))
        assert not bad, ("timing rules computed outside edgerl/timing{,_rules}.py:\n"
                         + "\n".join(bad))

    @pytest.mark.parametrize("snippet, what", [
        ("w = (since + 1) / (blend + 1)", "blend weight"),
        ("w = np.arange(1, n + 1) / np.float32(n + 1)", "blend weight"),
        ("ok = t - step0 < self.horizon + self.stale_steps", "stale rule"),
        ("h = max(8, cfg.delay_steps + cfg.period + 4)", "horizon rule"),
        ("def required_horizon(lat):\n    return 3", "defines timing rule"),
        ("class C:\n    def resolved_horizon(self):\n        return 8", "does not call"),
        ("row = chunk.index_at(t)", "ActionChunk.index_at"),
    ])
    def test_scanner_catches_each_kind(self, snippet, what):
        found = rule_violations(snippet, "x.py")
        assert len(found) == 1 and what in found[0]

    def test_scanner_scans_the_consumers(self):
        scanned = {p.relative_to(ROOT).as_posix() for p in _sources()}
        for consumer in ("sim/wrappers/chunk.py", "sim/wrappers/latency.py",
                         "runtime/chunk_buffer.py", "runtime/edit_loop.py",
                         "policies/config.py", "contract/spec.py"):
            assert consumer in scanned


class TestTimingSpec:
    def test_row_at_holds_the_last_row_until_stale(self):
        t = TimingSpec(control_hz=100.0, horizon=4, stale_steps=2)
        rows = [t.row_at(k * 0.01, 0.0, 0.01, 4) for k in range(7)]
        assert rows == [0, 1, 2, 3, 3, 3, None]

    def test_build_resolves_defaults_and_validates(self):
        lat = LatencyModel(planner_delay_steps=3, planner_period_steps=4)
        t = TimingSpec.build(50.0, lat, "blend", lookahead=2, extra_delay_steps=[0, 2])
        assert (t.stale_steps, t.blend_steps, t.merge) == (4, 4, "blend")
        assert t.horizon == 4 + 5 + 4 + 2 and t.max_delay_steps == 5
        assert "merge blend over 4" in t.describe() and "U{0..2}" in t.describe()
        with pytest.raises(SchemaError, match="timing.trigger: must be one of clock, state"):
            TimingSpec(control_hz=50.0, horizon=4, trigger="tick")
        with pytest.raises(SchemaError, match="timing.extra_delay_steps"):
            TimingSpec(control_hz=50.0, horizon=4, extra_delay_steps=[3, 1])


class TestAgreement:
    def test_train_config_wrapper_and_manifest_agree_on_the_horizon(self):
        pytest.importorskip("torch")
        from edgerl.policies.config import TrainConfig
        from edgerl.sim.registry import make_task
        from edgerl.sim.wrappers import LatencyCfg, make_latency_env

        kwargs = {"randomization": {"latency_steps": [0, 4]}}
        cfg = TrainConfig(task="cartpole", method="edit", delay_steps=10, task_kwargs=kwargs)
        env = make_task("cartpole", num_envs=2, seed=0, **kwargs)
        lat = LatencyModel(planner_delay_steps=10, planner_period_steps=cfg.resolved_period)
        wrapped = make_latency_env(env, LatencyCfg(method="edit", latency=lat, lookahead=2))
        assert cfg.resolved_horizon == wrapped.horizon == 10 + 14 + 2 + 2
        assert wrapped.timing.extra_delay_steps == [0, 4]
        assert wrapped.timing.max_delay_steps == wrapped.scheduler.max_delay == 14

    def test_training_models_the_trigger_sampling_delay(self):
        pytest.importorskip("torch")
        from edgerl.policies.config import TrainConfig

        state = TrainConfig(task="cartpole", method="edit", delay_steps=2)
        clock = TrainConfig(task="cartpole", method="edit", delay_steps=2, trigger="clock")
        assert state.trigger == "state" and state.resolved_latency.obs_delay_steps == 0
        assert clock.resolved_latency.obs_delay_steps == 1  # a clock tick reads an old state
        assert clock.resolved_latency.planner_delay_steps == 2
        with pytest.raises(SchemaError, match="trigger: must be one of clock, state"):
            TrainConfig(task="cartpole", method="edit", trigger="event")

    def test_manifest_records_the_randomizer_jitter_training_used(self):
        pytest.importorskip("torch")
        from edgerl.policies.config import TrainConfig
        from edgerl.policies.runs import build_spec

        cfg = TrainConfig(task="cartpole", method="edit", delay_steps=10,
                          task_kwargs={"randomization": {"latency_steps": [0, 4]}})
        ts = {"obs_names": ["x", "v", "th", "w"], "obs_units": ["1"] * 4,
              "action_names": ["f"], "action_units": ["N"], "action_low": [-1.0],
              "action_high": [1.0], "control_hz": 50.0}
        res = {"horizon": cfg.resolved_horizon, "period_steps": cfg.resolved_period,
               "residual_bound": 0.5}
        spec = build_spec(cfg, {"task_spec": ts, "resolved": res}, None, None)
        assert spec.timing.extra_delay_steps == [0, 4] and spec.timing.max_delay_steps == 14
        assert spec.timing.trigger == "state"
        assert "+ U{0..4}" in spec.timing.describe()


def _v1_manifest(spec: PolicySpec) -> dict:
    data = json.loads(spec.to_json())
    data.pop("timing")
    data["schema_version"] = 1
    return data


class TestManifest:
    def test_manifest_carries_timing_whole_and_old_manifests_derive_it(self):
        spec = make_spec(method="blend", control_hz=100.0, horizon=12, period_s=0.05)
        data = json.loads(spec.to_json())
        assert data["timing"]["stale_steps"] == 5 and data["timing"]["merge"] == "blend"
        assert PolicySpec.from_dict(data).timing == spec.timing
        old = PolicySpec.from_dict(_v1_manifest(spec))
        assert old.timing == spec.timing  # schema 1: the rules training used

    def test_inconsistent_timing_is_refused(self):
        data = json.loads(make_spec(horizon=12).to_json())
        data["timing"]["horizon"] = 10
        with pytest.raises(SchemaError, match=r"timing.horizon: 10 does not match chunk"):
            PolicySpec.from_dict(data)
        data = json.loads(make_spec(horizon=12).to_json())
        data["timing"]["latency"]["delay_jitter_steps"] = 2.0
        with pytest.raises(SchemaError, match="latency: does not match timing.latency"):
            PolicySpec.from_dict(data)
