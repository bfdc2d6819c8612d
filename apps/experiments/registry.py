"""The drivers, by the name a config's ``[run] driver`` gives: name -> module."""

from __future__ import annotations

__all__ = ["DRIVERS"]

#: driver name -> the module that implements it (``Params`` and ``run``)
DRIVERS: dict[str, str] = {
    "commands": "edgerl.apps.experiments.drivers.commands",
    "rlif_chain": "edgerl.apps.experiments.drivers.rlif_chain",
    "rlif_reeval": "edgerl.apps.experiments.drivers.rlif_reeval",
    "rlif_screen": "edgerl.apps.experiments.drivers.rlif_screen",
    "gate_paired": "edgerl.apps.experiments.drivers.gate_paired",
    "loop_conditions": "edgerl.apps.experiments.drivers.loop_conditions",
    "code_ab": "edgerl.apps.experiments.drivers.code_ab",
    "deploy_trigger": "edgerl.apps.experiments.drivers.deploy_trigger",
    "probe": "edgerl.apps.experiments.drivers.probe",
    "protocol": "edgerl.apps.experiments.drivers.protocol",
}
