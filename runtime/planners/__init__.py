"""edgerl.runtime.planners: planners beside the edit loop, local or served over TCP.

Import the modules directly (nothing is imported here). One sub-package per role:

- ``client``: ``PlannerClient`` feeds any planner the newest observation at its period and
  pushes its chunks into the loop's buffer (thread mode, or the ``process`` subprocess with
  its pipe protocol and restarts); ``config``: its settings; ``worker``: the thread it runs
  in.
- ``local``: planners computing in this process: ``onnx`` (a bundle's ``planner.onnx``),
  ``language`` (the language-conditioned planner bundle), ``delayed`` (any planner slowed by a
  fixed latency per call), ``synthetic`` (CPU-burning and deterministic stand-in planners).
- ``protocol``: the planner-serving network protocol: ``framing`` (frames, arrays, error
  codes), ``auth`` (HMAC frame tags, the shared secret), ``messages`` (request parsers and
  reply builders).
- ``server``: ``PlannerServer`` (``edgerl serve-planner``); ``connections`` (reading and
  checking frames: timeouts, limits, authentication); ``batching`` (admission, the worker);
  ``state`` (the connection and request records both share).
- ``remote``: the robot side of a served planner: ``planner`` (``RemotePlanner``), ``config``,
  ``io`` (its I/O threads and reply checks), ``batch`` (``plan_batch`` / ``plan_many``),
  ``direct`` (``DirectPlanner``, a thread-free blocking client for training).
- ``latency_model``: fit a ``LatencyModel`` from measured latency, save and load it;
  ``latency_record``: measured latency files (from recordings, for training).

The protocol is described in docs/planner.md; load tests of the server live in
``edgerl.bench.planner``.
"""

from __future__ import annotations
