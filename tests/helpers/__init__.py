"""Builders shared by the tests (import as ``tests.helpers.<module>``; pytest puts the repo root
on ``sys.path``, see ``pythonpath`` in pyproject.toml).

* :mod:`tests.helpers.specs`         ``make_spec``: a valid :class:`edgerl.PolicySpec`
* :mod:`tests.helpers.bundles`       real tiny ONNX/npz bundles (``write_mlp_bundle``)
* :mod:`tests.helpers.task_bundles`  a bundle whose manifest matches a sim task
* :mod:`tests.helpers.export_models` tiny actors (MLP, GRU, LSTM) for the exporter
* :mod:`tests.helpers.planners`      tiny planners, served planners, raw sockets, a scripted fake
                                     server
* :mod:`tests.helpers.gate_clients`  a budgeted stand-in planner and a gated planner client
* :mod:`tests.helpers.ort_gpu_stub`  a stub ``onnxruntime-gpu`` for machines without a GPU
* :mod:`tests.helpers.sim_checks`    a seeded sim rollout repeats bit for bit; instructions
  reach the critic only
* :mod:`tests.helpers.planner_node_graph` a planner node beside a probe node (ROS tests)
"""
