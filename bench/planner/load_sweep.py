"""Open-loop offered-load sweep of the planner server (``edgerl bench planner --load-sweep``).

Poisson arrivals from many robot clients, each request with a deadline; counts the answers
that met it. Run in a child process by default: ``python -m
edgerl.bench.planner.load_sweep HOST PORT ARGS_JSON`` prints :func:`run_open_loop`'s
result as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import numpy as np

from edgerl.bench.planner.frames import plan_frame, read_frame

__all__ = ["plot_sweep", "run_open_loop", "sweep"]


async def _open_loop_client(address: tuple[str, int], rate_hz: float, deadline_s: float,
                            obs_dim: int, end: float, rng: random.Random,
                            out: dict[str, Any]) -> None:
    reader, writer = await asyncio.open_connection(*address)
    sent: dict[int, float] = {}

    async def receive() -> None:
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            while (reply := await read_frame(reader, deadline_s + 5.0)) is not None:
                t0 = sent.pop(reply.get("id"), None)
                if t0 is None:
                    continue
                took = time.monotonic() - t0
                outcome = "chunk" if reply.get("type") == "chunk" else str(reply.get("code"))
                out["outcomes"][outcome] += 1
                if outcome == "chunk" or outcome == "deadline_exceeded":
                    out["ran_s"].append(took)
                if outcome == "chunk" and took <= deadline_s:
                    out["met"] += 1

    rx = asyncio.ensure_future(receive())
    ids = itertools.count(1)
    await asyncio.sleep(rng.expovariate(rate_hz))
    while time.monotonic() < end:
        req_id = next(ids)
        now = time.monotonic()
        sent[req_id] = now
        out["offered"] += 1
        writer.write(plan_frame(req_id, obs_dim, now, deadline_s))
        await asyncio.sleep(rng.expovariate(rate_hz))
    await asyncio.sleep(min(2.0, deadline_s * 4 + 0.2))  # the last answers
    rx.cancel()
    with contextlib.suppress(BaseException):
        await rx
    writer.close()


def run_open_loop(address: tuple[str, int], rate_hz: float, clients: int = 32,
                  duration_s: float = 5.0, deadline_s: float = 0.05, obs_dim: int = 8,
                  seed: int = 0, separate: bool = True) -> dict[str, Any]:
    """Poisson arrivals at ``rate_hz`` in total from ``clients`` robots, each request with
    ``deadline_s``. Returns ``offered``, ``met`` (chunks within the deadline), ``miss_rate``,
    ``p50_ms``/``p99_ms`` over the requests that ran (chunk or late) and ``outcomes``.
    With ``separate`` the clients run in a child Python process (their CPU and GIL apart
    from an in-process server's)."""
    if separate:
        args = {"rate_hz": rate_hz, "clients": clients, "duration_s": duration_s,
                "deadline_s": deadline_s, "obs_dim": obs_dim, "seed": seed}
        res = subprocess.run([sys.executable, "-m", "edgerl.bench.planner.load_sweep",
                              address[0], str(address[1]), json.dumps(args)],
                             capture_output=True, text=True, timeout=duration_s + 60)
        if res.returncode != 0:
            raise RuntimeError(f"the open-loop load process failed: {res.stderr[-2000:]}")
        return json.loads(res.stdout.strip().splitlines()[-1])
    out: dict[str, Any] = {"offered": 0, "met": 0, "ran_s": [], "outcomes": Counter()}
    rng = random.Random(seed)
    end = time.monotonic() + duration_s

    async def main() -> None:
        await asyncio.gather(*(_open_loop_client(address, rate_hz / clients, deadline_s,
                                                 obs_dim, end, random.Random(rng.random()),
                                                 out) for _ in range(clients)))

    asyncio.run(main())
    ran = np.asarray(out.pop("ran_s"), dtype=np.float64) * 1e3
    out["outcomes"] = dict(out["outcomes"])
    out["miss_rate"] = 1.0 - out["met"] / max(1, out["offered"])
    out["p50_ms"] = float(np.percentile(ran, 50)) if ran.size else float("nan")
    out["p99_ms"] = float(np.percentile(ran, 99)) if ran.size else float("nan")
    out["offered_hz"] = out["offered"] / duration_s
    return out


def sweep(rates: list[float], point_s: float) -> dict[str, Any]:
    """Offered load vs p99 and deadline-miss rate, with deadline-aware admission and without:
    for each mode and each rate in ``rates`` (requests/s), a fresh :class:`PlannerServer`
    (synthetic planner, 5 ms a request, no batching) on 127.0.0.1 and ``point_s`` seconds of
    :func:`run_open_loop` from 32 robots with a 50 ms deadline."""
    from edgerl.contract.logs import progress
    from edgerl.runtime.planners.local.synthetic import SyntheticPlanner
    from edgerl.runtime.planners.server.config import ServerConfig, WorkQuotas
    from edgerl.runtime.planners.server.server import PlannerServer

    points = []
    for admission, rate in progress([(a, r) for a in (True, False) for r in rates],
                                    total=2 * len(rates), desc="load sweep"):
        server = PlannerServer(SyntheticPlanner(base_s=0.005, row_s=0.0, batch=False),
                               ServerConfig(port=0, obs_dim=8,
                                            quotas=WorkQuotas(admission=admission)))
        try:
            point = run_open_loop(server.start(), rate, clients=32, duration_s=point_s,
                                  deadline_s=0.05)
        finally:
            server.stop()
        points.append({"admission": admission, "rate_hz": rate, **point})
    return {"planner_ms": 5.0, "deadline_ms": 50.0, "clients": 32, "points": points}


def plot_sweep(result: dict[str, Any], path: str) -> None:
    """Two panels of a :func:`sweep` result: p99 (ms) and deadline-miss rate against offered
    load (requests/s), one line per admission mode; a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for admission, style in ((True, "o-"), (False, "s--")):
        pts = [p for p in result["points"] if p["admission"] is admission]
        label = "deadline-aware admission" if admission else "unbounded admission"
        ax1.plot([p["offered_hz"] for p in pts], [p["p99_ms"] for p in pts], style, label=label)
        ax2.plot([p["offered_hz"] for p in pts], [100 * p["miss_rate"] for p in pts], style,
                 label=label)
    ax1.axhline(result["deadline_ms"], color="grey", lw=0.8, ls=":", label="deadline")
    ax1.set(xlabel="offered load (requests/s)", ylabel="p99 latency of requests run (ms)",
            yscale="log", title=f"planner {result['planner_ms']:g} ms, capacity "
                                f"{1000 / result['planner_ms']:.0f}/s")
    ax2.set(xlabel="offered load (requests/s)", ylabel="deadline-miss rate (%)",
            title=f"{result['clients']} robots, deadline {result['deadline_ms']:g} ms")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _main(argv: list[str]) -> int:
    """``HOST PORT ARGS_JSON``: run :func:`run_open_loop` here, print its result."""
    host, port, raw = argv
    out = run_open_loop((host, int(port)), **json.loads(raw), separate=False)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
