"""The planning-budget gate in simulation: planning budgets and the env whose action is one."""
