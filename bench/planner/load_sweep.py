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

from edgerl.bench.planner.load import _plan, _read_frame

__all__ = ["run_open_loop"]


async def _open_loop_client(address: tuple[str, int], rate_hz: float, deadline_s: float,
                            obs_dim: int, end: float, rng: random.Random,
                            out: dict[str, Any]) -> None:
    reader, writer = await asyncio.open_connection(*address)
    sent: dict[int, float] = {}

    async def receive() -> None:
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            while (reply := await _read_frame(reader, deadline_s + 5.0)) is not None:
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
        writer.write(_plan(req_id, obs_dim, now, deadline_s))
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


def _main(argv: list[str]) -> int:
    """``HOST PORT ARGS_JSON``: run :func:`run_open_loop` here, print its result."""
    host, port, raw = argv
    out = run_open_loop((host, int(port)), **json.loads(raw), separate=False)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
