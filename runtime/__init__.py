"""edgerl.runtime: the on-device edit loop beside an asynchronous planner.

Imports only the contract, numpy, onnxruntime and pyserial: never torch or a simulator.

Modules (import them directly; nothing heavy is imported here):
``bundle`` (load_bundle), ``inference`` (onnxruntime / numpy backends), ``chunk_buffer``
(ChunkBuffer, merge policies), ``planners`` (planner clients, served planners, stand-ins),
``safety`` (SafetyFilter), ``edit_loop`` (EditLoop, ObservationSlot, CommandSink),
``metrics`` (LoopMetrics); transports live in their own modules. See docs/runtime.md.
"""

from __future__ import annotations
