"""What one ``plan_batch`` request costs the planner service, with and without torch's thread
count set in the server's own thread.

torch's intra-op thread count is an OpenMP setting of each OS thread: ``serve-planner`` sets
1 in its main thread, but the server's loop thread (``--inline``) runs the BC network with
OpenMP's default (one thread per core) unless :class:`BCServedPlanner` sets it there too.
This starts a :class:`PlannerServer` in this process with the cartpole-sized BC network
(obs 4, 10 x 1 chunks, 256 x 256), sends ``--requests`` ``plan_batch`` requests of ``--rows``
rows from a client subprocess (``DirectPlanner.send_many`` / ``receive``, one at a time), and
prints, per variant, the client's round trip (p50/p90 ms) and this process's CPU per request
(the server; ms). Control: the same forward in this process's main thread (what the
in-process trainer pays per query).

    python -m edgerl.apps.experiments.probes.served_request_cost --rows 62 --requests 400
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np
import torch

from edgerl.policies.bc_planner import BCChunkPlanner
from edgerl.policies.remote_planner import BCServedPlanner
from edgerl.runtime.planners.server.config import Batching, ServerConfig
from edgerl.runtime.planners.server.server import PlannerServer

CLIENT = """
import json, sys, time
import numpy as np
from edgerl.runtime.planners.remote.direct import DirectPlanner
host, port, rows, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
c = DirectPlanner(host, port).connect()
x = np.random.default_rng(0).normal(size=(rows, 4)).astype(np.float32)
for _ in range(20):
    c.receive(c.send_many([x]))
ts = []
for _ in range(n):
    s = time.perf_counter()
    c.receive(c.send_many([x]))
    ts.append(time.perf_counter() - s)
print(json.dumps(ts))
"""


class MainThreadOnly(BCServedPlanner):
    """The control: torch's thread count set only where the planner was built (the old
    behaviour): the server thread keeps OpenMP's default."""

    def _use_own_threads(self) -> None:
        pass


def measure(planner: BCServedPlanner, rows: int, requests: int) -> dict:
    server = PlannerServer(planner, ServerConfig(port=0, obs_dim=4, batching=Batching(inline=True)))
    host, port = server.start()
    try:
        cpu0 = time.process_time()
        out = subprocess.run([sys.executable, "-c", CLIENT, host, str(port), str(rows),
                              str(requests)], check=True, capture_output=True, text=True)
        cpu = time.process_time() - cpu0
    finally:
        server.stop()
    ts = np.array(json.loads(out.stdout)) * 1e3
    return {"rt_p50_ms": round(float(np.percentile(ts, 50)), 3),
            "rt_p90_ms": round(float(np.percentile(ts, 90)), 3),
            "server_cpu_ms_per_request": round(1e3 * cpu / (requests + 20), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=62)
    ap.add_argument("--requests", type=int, default=400)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = BCChunkPlanner(4, 1, 10, [-1.0], [1.0])
    x = torch.randn(args.rows, 4)
    with torch.no_grad():
        for _ in range(20):
            net.plan(x)
        cpu0 = time.process_time()
        for _ in range(args.requests):
            net.plan(x)
    row = {"rows": args.rows, "in_process_forward_cpu_ms": round(
        1e3 * (time.process_time() - cpu0) / args.requests, 3)}
    for name, cls in (("per_thread", BCServedPlanner), ("main_thread_only", MainThreadOnly)):
        row[name] = measure(cls(net, dt_s=0.02, period_s=0.06), args.rows, args.requests)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
