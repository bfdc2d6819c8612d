"""The planning-budget gate: the learned gate policy, its fixed baselines and privileged oracles."""
