"""The runtime gate's ``sample`` mode: draws from a categorical gate's softmax with a seeded
generator (the stochastic policy PPO trained), refused for a gate whose outputs are not
logits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edgerl.contract.gate_obs import GateSpec, budget_probabilities, sample_budget
from edgerl.contract.serde import SchemaError
from edgerl.contract.spec import PolicySpec, load_bundle_manifest
from edgerl.runtime.gate.budget_gate import BudgetGate, PlanState, make_chooser
from tests.helpers.gate_bundles import write_gate_bundle


@pytest.fixture(scope="module")
def logits_bundle(tmp_path_factory):
    pytest.importorskip("torch")  # the test bundle's gate spec comes from the sim's config
    return write_gate_bundle(tmp_path_factory.mktemp("gate") / "logits", outputs="logits")


def test_probabilities_and_inverse_cdf_draws():
    logits = np.array([2.0, 0.0, -1.0], np.float32)
    p = budget_probabilities(logits)
    e = np.exp([2.0, 0.0, -1.0])
    np.testing.assert_allclose(p, e / e.sum(), rtol=1e-12)
    # u below p0 -> 0, between p0 and p0 + p1 -> 1, above -> 2; u -> 1 stays in range
    assert [sample_budget(logits, u) for u in (0.0, p[0] - 1e-9, p[0] + 1e-9,
                                                p[0] + p[1] + 1e-9, 1.0 - 1e-12)] == [0, 0, 1, 2, 2]
    draws = [sample_budget(logits, u) for u in np.random.default_rng(0).random(20000)]
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / 20000, p, atol=0.012)
    # huge logits (a long-trained gate) do not overflow
    assert budget_probabilities(np.array([900.0, 0.0, -900.0]))[0] == 1.0


def test_sampled_gate_follows_its_softmax_and_is_seeded(logits_bundle):
    spec = load_bundle_manifest(logits_bundle)
    robot = np.zeros(10, np.float32)
    plan = PlanState(age_steps=8, row_offset=8, rows=48)  # a running plan: keep and fast close
    greedy = BudgetGate(logits_bundle, spec)
    j = greedy.decide(robot, plan, False)
    assert j == int(np.argmax(greedy.last_scores)) and greedy.name == "gate"
    sampled = [BudgetGate(logits_bundle, spec, "sample", seed) for seed in (3, 3, 4)]
    runs = [[g.decide(robot, plan, False) for _ in range(3000)] for g in sampled]
    p = sampled[0].last_probabilities
    assert p.min() > 0.02 and p.max() < 0.9, p  # a real mix, not the argmax in disguise
    np.testing.assert_allclose(np.bincount(runs[0], minlength=3) / 3000, p, atol=0.03)
    assert runs[0] == runs[1] and runs[0] != runs[2]  # same seed, same draws
    assert sampled[0].counts == {n: runs[0].count(i) for i, n in enumerate(spec.gate.names)}
    assert make_chooser(logits_bundle, spec, "gate:sample", seed=3).name == "gate:sample"


def test_sampling_is_refused_for_scores_and_unknown_modes(tmp_path, logits_bundle):
    scores = write_gate_bundle(tmp_path / "scores")
    spec = load_bundle_manifest(scores)
    assert spec.gate.outputs == "scores"
    with pytest.raises(ValueError, match="outputs are 'scores', not 'logits'.*cannot be "
                                         "sampled"):
        make_chooser(scores, spec, "gate:sample")
    with pytest.raises(ValueError, match="gate mode 'mean': expected one of greedy, sample"):
        BudgetGate(logits_bundle, load_bundle_manifest(logits_bundle), "mean")


def test_manifest_gate_outputs_round_trip_default_and_errors(logits_bundle):
    spec = load_bundle_manifest(logits_bundle)
    doc = spec.to_dict()
    assert doc["gate"]["outputs"] == "logits"
    assert PolicySpec.from_dict(doc).gate.outputs == "logits"
    del doc["gate"]["outputs"]  # a manifest written before the field
    assert PolicySpec.from_dict(doc).gate.outputs == "scores"
    with pytest.raises(SchemaError, match="gate.outputs: must be one of scores, logits; got "
                                          "'probs'"):
        dataclasses.replace(spec.gate, outputs="probs")
    assert isinstance(spec.gate, GateSpec)
