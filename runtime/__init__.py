"""edgerl.runtime: the on-device edit loop beside an asynchronous planner.

Imports only the contract, numpy, onnxruntime and pyserial: never torch or a simulator.
"""

from __future__ import annotations
