"""Load generator for the planner server: well-behaved robots beside hostile clients (the load
tests and ``edgerl bench planner``; the open-loop offered-load sweep is :mod:`.load_sweep`, the
frames both send are :mod:`.frames`).

Everything is asyncio in the calling thread (one coroutine per simulated client), bounded in
time (``duration_s``) and meant for loopback (127.0.0.1): it opens many connections.

Hostile kinds (each reconnects whenever the server closes it, until the end):

* ``idle``: connects and sends nothing.
* ``slowloris``: sends a valid frame one byte at a time, ``slow_byte_s`` apart.
* ``oversized``: announces a 100 MB frame, or sends a ``plan_batch`` of 4,096 new
  instructions (alternately).
* ``malformed``: sends broken arrays (dtype as a list, ``shape: [True]``, ``[2**32, 2**32]``...)
  and garbage, back to back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgerl.bench.planner.frames import hostile_frame, plan_frame, read_frame

__all__ = ["HOSTILE_KINDS", "LoadConfig", "LoadResult", "run_load"]

#: The kinds of hostile client :func:`run_load` can start.
HOSTILE_KINDS = ("idle", "slowloris", "oversized", "malformed")


@dataclass
class LoadConfig:
    """A closed-loop load test: ``good`` robots, each requesting a chunk every ``period_s``
    (waiting for the answer first), beside ``hostile[kind]`` clients of each kind.

    Attributes:
        good: Well-behaved clients.
        hostile: Clients per hostile kind (see :data:`HOSTILE_KINDS`).
        duration_s: Wall seconds the load runs.
        period_s: A good client's request period (s).
        deadline_s: Deadline sent with each good request (s).
        obs_dim: Observation size.
        slow_byte_s: Pause between a slowloris client's bytes (s).
        reply_timeout_s: A good client gives up on an answer after this long.
        seed: Random start offsets.
        hostile_on_s: With ``hostile_off_s``, the hostile clients alternate: active for
            ``hostile_on_s``, then gone for ``hostile_off_s`` (from ``start_at``), so
            the good clients' latency with and without them is measured side by side under
            the same background load (:meth:`LoadResult.split`). ``0``: always active.
        hostile_off_s: See ``hostile_on_s``.
        start_at: Monotonic time (s, system-wide clock) at which every client starts;
            ``0`` = now.
        hostile_gap_s: Pause between an ``oversized`` or ``malformed`` client's frames.
    """

    good: int = 48
    hostile: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HOSTILE_KINDS, 4))
    duration_s: float = 10.0
    period_s: float = 0.05
    deadline_s: float = 0.2
    obs_dim: int = 8
    slow_byte_s: float = 0.2
    reply_timeout_s: float = 2.0
    seed: int = 0
    hostile_on_s: float = 0.0
    hostile_off_s: float = 0.0
    start_at: float = 0.0
    hostile_gap_s: float = 0.05

    def hostile_active(self, t: float) -> bool:
        """Whether the hostile clients are active at monotonic time ``t``."""
        if self.hostile_on_s <= 0 or self.hostile_off_s <= 0:
            return True
        return (t - self.start_at) % (self.hostile_on_s + self.hostile_off_s) < \
            self.hostile_on_s

    def next_hostile_start(self, t: float) -> float:
        """The start of the next active window at or after ``t``."""
        if self.hostile_active(t):
            return t
        cycle = self.hostile_on_s + self.hostile_off_s
        return self.start_at + ((t - self.start_at) // cycle + 1) * cycle


@dataclass
class LoadResult:
    """What the good clients saw, and what the hostile ones did.

    Attributes:
        latencies_s: Round trip (s) of every good request answered with a chunk.
        replies: Good requests by outcome (``chunk``, an error code, ``timeout``,
            ``disconnected``).
        hostile: Hostile actions and the server's answers (``<kind>:<event>``).
        wall_s: Seconds the run took.
        started_at: Monotonic time (s) the clients started, from which the hostile windows
            count (:meth:`LoadConfig.hostile_active`).
    """

    latencies_s: list[float] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)  # monotonic send time of each latency
    replies: Counter = field(default_factory=Counter)
    hostile: Counter = field(default_factory=Counter)
    wall_s: float = 0.0
    started_at: float = 0.0

    def _phase(self, cfg: LoadConfig) -> LoadConfig:
        """``cfg`` with the windows counted from when this run started (the caller's config
        says ``start_at=0``, "now", which :func:`run_load` fixes only when it starts)."""
        return dataclasses.replace(cfg, start_at=self.started_at)

    def percentile_ms(self, q: float) -> float:
        """``q``-th percentile of :attr:`latencies_s` in ms (nan when empty)."""
        if not self.latencies_s:
            return float("nan")
        return float(np.percentile(np.asarray(self.latencies_s) * 1e3, q))

    def split(self, cfg: LoadConfig) -> tuple[LoadResult, LoadResult]:
        """``(while hostile clients were active, while they were not)`` by send time."""
        cfg = self._phase(cfg)
        on, off = LoadResult(started_at=self.started_at), LoadResult(started_at=self.started_at)
        for t, lat in zip(self.sent_at, self.latencies_s):
            part = on if cfg.hostile_active(t) else off
            part.latencies_s.append(lat)
            part.sent_at.append(t)
        return on, off

    def window_percentiles_ms(self, cfg: LoadConfig, q: float) -> tuple[list[float], list[float]]:
        """The ``q``-th percentile (ms) of each hostile window: ``(active windows, quiet
        windows)``, in time order; windows with fewer than 50 answers are left out.

        One burst from a neighbour on a shared machine lands in one window and moves a pooled
        p99 of that half; the median over windows of each window's p99 does not move with
        one window, while a server that the hostile clients slow down raises every active
        window's.
        """
        if cfg.hostile_on_s <= 0 or cfg.hostile_off_s <= 0:
            raise ValueError("window percentiles need hostile_on_s and hostile_off_s > 0")
        cfg = self._phase(cfg)
        cycle = cfg.hostile_on_s + cfg.hostile_off_s
        windows: dict[tuple[int, bool], list[float]] = {}
        for t, lat in zip(self.sent_at, self.latencies_s):
            active = cfg.hostile_active(t)
            windows.setdefault((int((t - cfg.start_at) // cycle), active), []).append(lat)
        on, off = [], []
        for (_, active), lats in sorted(windows.items()):
            if len(lats) >= 50:
                (on if active else off).append(float(np.percentile(np.asarray(lats) * 1e3, q)))
        return on, off

    def summary(self) -> dict[str, Any]:
        return {"requests": sum(self.replies.values()), "replies": dict(self.replies),
                "p50_ms": self.percentile_ms(50), "p99_ms": self.percentile_ms(99),
                "hostile": dict(self.hostile), "wall_s": self.wall_s}


async def _good_client(address: tuple[str, int], cfg: LoadConfig, end: float,
                       result: LoadResult, rng: random.Random) -> None:
    await asyncio.sleep(rng.uniform(0, cfg.period_s))
    ids = itertools.count(1)
    while time.monotonic() < end:
        try:
            reader, writer = await asyncio.open_connection(*address)
        except OSError:
            result.replies["connect_failed"] += 1
            await asyncio.sleep(0.1)
            continue
        try:
            while time.monotonic() < end:
                start = time.monotonic()
                req_id = next(ids)
                writer.write(plan_frame(req_id, cfg.obs_dim, start, cfg.deadline_s))
                reply = await read_frame(reader, cfg.reply_timeout_s)
                if reply is None:
                    result.replies["disconnected"] += 1
                    break
                took = time.monotonic() - start
                if reply.get("type") == "chunk" and reply.get("id") == req_id:
                    result.latencies_s.append(took)
                    result.sent_at.append(start)
                    result.replies["chunk"] += 1
                else:
                    result.replies[str(reply.get("code", reply.get("type")))] += 1
                await asyncio.sleep(max(0.0, cfg.period_s - took))
        except asyncio.TimeoutError:
            result.replies["timeout"] += 1
        except OSError:
            result.replies["disconnected"] += 1
        finally:
            writer.close()


async def _hostile_client(kind: str, address: tuple[str, int], cfg: LoadConfig, end: float,
                          result: LoadResult) -> None:
    k = 0
    while time.monotonic() < end:
        wake = cfg.next_hostile_start(time.monotonic())
        if wake > time.monotonic():
            await asyncio.sleep(min(wake, end) - time.monotonic())
            continue
        try:
            reader, writer = await asyncio.open_connection(*address)
        except OSError:
            result.hostile[f"{kind}:connect_failed"] += 1
            await asyncio.sleep(0.1)
            continue
        result.hostile[f"{kind}:connections"] += 1
        drain = asyncio.ensure_future(_drain_replies(kind, reader, result))
        try:
            while (time.monotonic() < end and not drain.done()
                   and cfg.hostile_active(time.monotonic())):
                if kind == "idle":
                    await asyncio.sleep(0.05)
                elif kind == "slowloris":
                    for byte in plan_frame(k, cfg.obs_dim, 0.0, 0.0):
                        if (time.monotonic() >= end or drain.done()
                                or not cfg.hostile_active(time.monotonic())):
                            break
                        writer.write(bytes([byte]))
                        await asyncio.sleep(cfg.slow_byte_s)
                    k += 1
                else:
                    writer.write(hostile_frame(kind, k % 12, cfg.obs_dim))
                    k += 1
                    await asyncio.sleep(cfg.hostile_gap_s)
        except OSError:
            pass
        finally:
            writer.close()
            drain.cancel()
            with contextlib.suppress(BaseException):
                await drain
        await asyncio.sleep(0.02)


async def _drain_replies(kind: str, reader: asyncio.StreamReader, result: LoadResult) -> None:
    """Count the server's answers to a hostile client until it closes the connection."""
    with contextlib.suppress(OSError, asyncio.TimeoutError, ValueError):
        while (reply := await read_frame(reader, 3600.0)) is not None:
            result.hostile[f"{kind}:{reply.get('code', reply.get('type'))}"] += 1
    result.hostile[f"{kind}:closed_by_server"] += 1


async def _run_clients(address: tuple[str, int], cfg: LoadConfig, good: bool,
                       hostile: bool) -> LoadResult:
    result = LoadResult()
    rng = random.Random(cfg.seed)
    start = cfg.start_at or time.monotonic()
    cfg = dataclasses.replace(cfg, start_at=start)
    result.started_at = start
    await asyncio.sleep(max(0.0, start - time.monotonic()))
    end = start + cfg.duration_s
    tasks = []
    if good:
        tasks += [_good_client(address, cfg, end, result, random.Random(rng.random()))
                  for _ in range(cfg.good)]
    for kind, n in cfg.hostile.items() if hostile else ():
        if kind not in HOSTILE_KINDS:
            raise ValueError(f"unknown hostile kind {kind!r}; choose from {HOSTILE_KINDS}")
        tasks += [_hostile_client(kind, address, cfg, end, result) for _ in range(n)]
    await asyncio.wait_for(asyncio.gather(*tasks), cfg.duration_s + cfg.reply_timeout_s + 10)
    result.wall_s = time.monotonic() - start
    return result


def run_load(address: tuple[str, int], cfg: LoadConfig, separate: bool = True) -> LoadResult:
    """Run :class:`LoadConfig`'s clients against ``address`` (blocks ``duration_s``).

    With ``separate`` the robots and the hostile clients each run in a child Python process
    (as they would on other machines: ``python -m edgerl.bench.planner.load ROLE HOST PORT
    CONFIG_JSON``), so neither shares the server's interpreter lock, and the hostile one runs
    at a lower priority: what the robots measure is the server's answer, not the load
    generator's CPU time. The server still answers all of them.
    """
    if not separate:
        return asyncio.run(_run_clients(address, cfg, good=True, hostile=True))
    roles = ["good"] + (["hostile"] if any(cfg.hostile.values()) else [])
    procs = {role: subprocess.Popen(
        [sys.executable, "-m", "edgerl.bench.planner.load", role, address[0],
         str(address[1]), json.dumps(dataclasses.asdict(cfg))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for role in roles}
    outs: dict[str, str] = {}
    try:
        for role, proc in procs.items():
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":  # its imports are done
                raise RuntimeError(f"the {role} load process did not start")
        start_at = time.monotonic() + 0.2
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.write(f"{start_at!r}\n")
            proc.stdin.flush()
        for role, proc in procs.items():
            outs[role], _ = proc.communicate(timeout=cfg.duration_s + cfg.reply_timeout_s + 30)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(5.0)
    for role, proc in procs.items():
        if proc.returncode != 0:
            raise RuntimeError(f"the {role} load process failed (exit {proc.returncode})")
    result = _result_from_json(json.loads(outs["good"].strip().splitlines()[-1]))
    if "hostile" in outs:
        result.hostile.update(json.loads(outs["hostile"].strip().splitlines()[-1])["hostile"])
    return result


def _result_to_json(result: LoadResult) -> dict[str, Any]:
    """Every :class:`LoadResult` field (``dataclasses.asdict`` would rebuild the counters
    from their items, which a ``Counter`` counts as keys)."""
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}


def _result_from_json(raw: dict[str, Any]) -> LoadResult:
    return LoadResult(**{**raw, "replies": Counter(raw["replies"]),
                         "hostile": Counter(raw["hostile"])})


def _client_main(argv: list[str]) -> int:
    """``ROLE HOST PORT CONFIG_JSON`` (``ROLE``: ``good`` or ``hostile``; a hostile process
    lowers its priority to nice 10): say ``ready``, read the start time (monotonic seconds,
    system-wide) from stdin, run that role's clients, print their :class:`LoadResult` as
    one JSON line."""
    role, host, port, raw = argv
    if role not in ("good", "hostile"):
        raise ValueError(f"role must be 'good' or 'hostile', got {role!r}")
    if role == "hostile":
        os.nice(10)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    cfg = LoadConfig(**{**json.loads(raw), "start_at": float(sys.stdin.readline())})
    result = asyncio.run(_run_clients((host, int(port)), cfg, good=role == "good",
                                      hostile=role == "hostile"))
    sys.stdout.write(json.dumps(_result_to_json(result)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(_client_main(sys.argv[1:]))
