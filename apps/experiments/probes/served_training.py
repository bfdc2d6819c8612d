"""Training throughput with a served planner vs the in-process one, measured in pairs.

For each delay D: ``edgerl train TASK --planner bc`` (in process) and ``edgerl train TASK
--planner remote:127.0.0.1:PORT`` against ``edgerl serve-planner --bc TASK`` (the same BC
network), one after the other, ``--pairs`` times. Throughput = env steps / training-loop
seconds (the last iteration's ``time_s`` in metrics.jsonl; the BC fit before the loop is not
counted: it happens in the server for the served run). The order alternates (in-process
first in even pairs, served first in odd ones), so a drift of the machine's load does not
favour one side. Prints one JSON line per pair with the ratio, the load average, the
trainer's CPU seconds in the loop (``cpu_s``) and the server process's CPU seconds during the
served run (``server_cpu_s``, Linux), and a summary.

    python -m edgerl.apps.experiments.probes.served_training --task cartpole --delays 3,10 \
        --iterations 30 --pairs 4
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

EDGERL = [sys.executable, "-m", "edgerl.apps"]


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
    return {"loop_s": last["time_s"], "cpu_s": last["cpu_s"], "env_steps": last["env_steps"],
            "sps": last["env_steps"] / last["time_s"], "success": last["success_rate"]}


def _cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far; None where /proc is missing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _served(task: str, d: int, port: int, pid: int, iterations: int, out: Path) -> dict:
    before = _cpu_s(pid)
    row = _train(task, d, f"remote:127.0.0.1:{port}", iterations, out)
    after = _cpu_s(pid)
    row["server_cpu_s"] = None if before is None or after is None else round(after - before, 2)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="cartpole")
    ap.add_argument("--delays", default="3,10")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--pairs", type=int, default=4)
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
                    order = ["in_process", "served"] if k % 2 == 0 else ["served", "in_process"]
                    got = {}
                    for name in order:
                        got[name] = _train(args.task, d, "bc", args.iterations,
                                           root / f"l{d}_{k}") if name == "in_process" else \
                            _served(args.task, d, port, server.pid, args.iterations,
                                    root / f"r{d}_{k}")
                    local, served = got["in_process"], got["served"]
                    row = {"delay_steps": d, "pair": k, "first": order[0],
                           "in_process": local, "served": served,
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
                      "pairs": len(ratios), "pairs_at_least_half": sum(r >= 0.5 for r in ratios)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
