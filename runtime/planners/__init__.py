"""edgerl.runtime.planners: planners beside the edit loop, local or served over TCP.

Import the modules directly (nothing is imported here):

- ``client``: ``PlannerClient`` feeds a planner the newest observation at its period and
  pushes its chunks into the loop's buffer (thread or process mode).
- ``process``: the planner subprocess of the client's process mode (pipe protocol, restarts).
- ``onnx``: ``OnnxChunkPlanner``, a bundle's ``planner.onnx``, and its factory ``onnx_planner``.
- ``language``: ``OnnxLanguagePlanner``, the language-conditioned planner bundle (tokenizer,
  encoder, chunk head).
- ``delayed``: ``DelayedPlanner``, any planner slowed by a fixed latency per call.
- ``fakes``: stand-in planners for benchmarks and tests (``BurnPlanner``, ``SyntheticPlanner``,
  factory ``burn_planner``).
- ``wire``: the serving protocol's frames, arrays and error codes; ``wire_auth``: HMAC frame
  tags and the shared secret; ``wire_messages``: request parsers and reply builders.
- ``server``: ``PlannerServer`` (``edgerl serve-planner``), ``ServerConfig``, life cycle and
  metrics; ``server_connections``: reading and checking frames
  (timeouts, limits, authentication); ``server_batching``: admission, batching, the worker.
- ``remote``: ``RemotePlanner``, the robot-side client of a served planner;
  ``remote_config``: its settings and errors; ``remote_io``: its I/O threads and reply
  checks; ``remote_batch``: its ``plan_batch`` / ``plan_many``.
- ``call``: ``DirectPlanner``, a thread-free blocking client for training.
- ``load``: load generator with hostile clients; ``load_sweep``: open-loop offered-load sweep.
- ``latency_model``: fit a ``LatencyModel`` from measured latency, save and load it;
  ``latency_record``: measured latency files (from recordings, for training).

The wire protocol is described in docs/planner.md.
"""

from __future__ import annotations
