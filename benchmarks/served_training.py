"""Training throughput with a served planner vs the in-process one, measured in pairs.

For each delay D: ``edgerl train TASK --planner bc`` (in process) and ``edgerl train TASK
--planner remote:127.0.0.1:PORT`` against ``edgerl serve-planner --bc TASK`` (the same BC
network), one after the other, ``--pairs`` times. Throughput = env steps / training-loop
seconds (the last iteration's ``time_s`` in metrics.jsonl; the BC fit before the loop is not
counted: it happens in the server for the served run). Prints one JSON line per pair with
the ratio and the load average, and a summary.

    python benchmarks/served_training.py --task cartpole --delays 3,10 --iterations 30
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EDGERL = [sys.executable, "-m", "edgerl"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"serve-planner exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"serve-planner did not listen on {port} within {timeout} s")


def _train(task: str, d: int, planner: str, iterations: int, out: Path) -> dict:
    cmd = [*EDGERL, "train", task, "--method", "edit", "--delay-steps", str(d),
           "--iterations", str(iterations), "--planner", planner, "--out", str(out),
           "--no-progress"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    return {"loop_s": last["time_s"], "env_steps": last["env_steps"],
            "sps": last["env_steps"] / last["time_s"], "success": last["success_rate"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="cartpole")
    ap.add_argument("--delays", default="3,10")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="served_training_"))
    results = []
    try:
        for d in [int(x) for x in args.delays.split(",")]:
            port = _free_port()
            server = subprocess.Popen([*EDGERL, "serve-planner", "--bc", args.task,
                                       "--delay-steps", str(d), "--port", str(port), "--inline"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                _wait_port(port, server)
                for k in range(args.pairs):
                    load0 = os.getloadavg()[0]
                    local = _train(args.task, d, "bc", args.iterations, root / f"l{d}_{k}")
                    served = _train(args.task, d, f"remote:127.0.0.1:{port}", args.iterations,
                                    root / f"r{d}_{k}")
                    row = {"delay_steps": d, "pair": k, "in_process": local, "served": served,
                           "ratio": served["sps"] / local["sps"],
                           "load": [round(load0, 1), round(os.getloadavg()[0], 1)]}
                    results.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                server.terminate()
                server.wait(timeout=30)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratios = [r["ratio"] for r in results]
    print(json.dumps({"ratio_min": min(ratios), "ratio_median": sorted(ratios)[len(ratios) // 2],
                      "pairs": len(ratios)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
