"""``edgerl.apps.demo.config``: what the demo runs, checked field by field."""

from __future__ import annotations

import pytest

from edgerl.apps.demo.config import DemoChecks, DemoConfig, DemoError, DemoTraining


def test_config_validation_names_the_field() -> None:
    with pytest.raises(DemoError, match="hil_episodes"):
        DemoConfig(checks=DemoChecks(hil_episodes=0)).validate()
    with pytest.raises(DemoError, match="stop_at_success"):
        DemoConfig(training=DemoTraining(stop_at_success=1.5)).validate()
    fast = DemoConfig.preset(True, iterations=7)
    assert (fast.training.iterations, fast.checks.hil_episodes, fast.checks.deploy_s) == (7, 1, 8.0)
    assert DemoConfig.preset(False).training.iterations == 400
    # the default task is one where the planner matters: its goal is hidden from the fast loop
    assert DemoConfig().task == "cartpole_goal"
