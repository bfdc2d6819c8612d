"""The kick-response diagnostic (edgerl.apps.experiments.probes.gate_kick_response) on the stamping
task."""

from __future__ import annotations

import pytest

from edgerl.apps.experiments.probes.gate_kick_response import kick_response
from edgerl.policies.gate.baselines import fixed_policy
from edgerl.sim.gate.env import GateCfg, GatedEnv
from tests.helpers.gate_env import BUDGETS, StampTask


def _env() -> GatedEnv:
    # a kick every 3 steps (rate 1: a new one as soon as the last ended)
    cfg = GateCfg(budgets=BUDGETS, kick_rate=1.0, kick_size=0.5, kick_steps=3)
    return GatedEnv(StampTask(2, 1000), cfg)


def test_kick_response_counts_kicks_answers_and_planless_decisions():
    row = kick_response(_env(), fixed_policy(1), decisions=9, within=2, fail_within=5)
    assert row["kicks"] == 2 * 3  # kicks start at steps 0, 3, 6 in both envs
    assert row["answered"] == 1.0 and row["answer_fast"] == 1.0  # fast asked every step
    assert row["failures"] == 0 and row["failures_after_kick"] == 0
    assert row["no_plan_share"] == pytest.approx(1 / 9, abs=1e-4)  # before the 1st arrives
    idle = kick_response(_env(), fixed_policy(0), decisions=9, within=2, fail_within=5)
    assert idle["kicks"] == 6 and idle["answered"] == 0.0 and idle["no_plan_share"] == 1.0
