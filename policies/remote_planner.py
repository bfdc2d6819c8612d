"""Training against a served planner (``edgerl train TASK --planner remote:HOST:PORT``).

Found-RL's training-time planner service: the planner runs in its own process (here, or on a
GPU machine: ``edgerl serve-planner``) and the simulated envs query it in batches.

* :class:`ServedPlanFn` is the sim wrappers' batched planner callable
  (``plan(obs (n, O), env_ids (n,)) -> (n, H, A)``) over a thread-free
  :class:`~edgerl.runtime.planners.remote.direct.DirectPlanner` (the shared secret, if any, from
  ``EDGERL_PLANNER_SECRET``): every query of the wrapper's envs is sent as ``plan_batch``
  requests (``training`` priority, so robots on the same service go
  first) of at most ``max_rows`` rows, all in flight at once. The wrapper applies its latency
  model (the delay in control steps, e.g. measured with ``edgerl bench planner
  --write-latency-model``) to the chunks, exactly as for an in-process planner.
  Asynchronous: the wrapper's scheduler calls :meth:`ServedPlanFn.submit`, which sends the
  query at once (``DirectPlanner.send_many``, on the trainer's own thread: no worker thread,
  so no GIL hand-offs or thread wake-ups) and returns a future; the simulation steps on while
  the service computes, and the answer is read from the socket when its chunk is due (``D``
  steps later), so the round trip overlaps with ``D`` control steps instead of stalling each
  query.
* :class:`BCServedPlanner` serves a behaviour-cloned chunk planner (``edgerl serve-planner
  --bc TASK``): the same network ``--planner bc`` fits in-process, behind the service.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any

import numpy as np
import torch

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerHealth, PlannerInfo

__all__ = ["BCServedPlanner", "ServedAnswer", "ServedPlanFn", "is_remote_planner",
           "parse_remote_planner"]

log = logging.getLogger(__name__)

_PREFIX = "remote:"


def is_remote_planner(spec: str) -> bool:
    """Whether a ``--planner`` value names a served planner (``remote:HOST:PORT``)."""
    return isinstance(spec, str) and spec.startswith(_PREFIX)


def parse_remote_planner(spec: str) -> tuple[str, int]:
    """``remote:HOST:PORT`` -> ``(host, port)``; ``ValueError`` naming what is wrong."""
    if not is_remote_planner(spec):
        raise ValueError(f"expected remote:HOST:PORT, got {spec!r}")
    host, sep, port = spec[len(_PREFIX):].rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"planner {spec!r}: expected remote:HOST:PORT with a port in "
                         "1..65535")
    return host, int(port)


class ServedPlanFn:
    """Batched planner callable over a planner service.

    Args:
        client: A connected :class:`~edgerl.runtime.planners.remote.direct.DirectPlanner` (or
        anything
            with ``info`` and ``plan_many(pieces, now, timeout_s)``, e.g. a started
            :class:`~edgerl.runtime.planners.remote.planner.RemotePlanner`).
        horizon: Chunk rows the wrapper expects; the server's must match.
        max_rows: Rows per ``plan_batch`` request (the server's ``max_batch_rows``).
        timeout_s: Longest wait for one query's answers.
    """

    #: Ask the wrapper's scheduler to send the queries of several control steps together
    #: (each by half its delay): one request instead of one per step's group of envs.
    coalesce = True

    def __init__(self, client: Any, horizon: int, max_rows: int = 256,
                 timeout_s: float = 30.0) -> None:
        if client.info.horizon != horizon:
            raise ValueError(f"the served planner answers chunks of {client.info.horizon} rows, "
                             f"this training run needs {horizon} (serve it with the same "
                             "--horizon/--delay-steps)")
        self.client = client
        self.max_rows = max_rows
        self.timeout_s = timeout_s
        self.calls = 0
        self.rows = 0
        #: Seconds the caller waited in ``result()`` for answers not yet arrived.
        self.wait_s = 0.0

    @classmethod
    def connect(cls, spec: str, horizon: int, **kwargs: Any) -> ServedPlanFn:
        """Connect to ``remote:HOST:PORT`` (training priority) and check the horizon. The
        secret is ``EDGERL_PLANNER_SECRET``'s; on a service with named client keys,
        ``EDGERL_PLANNER_KEY_ID`` names this job's key (whose secret that file then holds)."""
        import os

        from edgerl.runtime.planners.protocol.auth import load_secret
        from edgerl.runtime.planners.remote.direct import DirectPlanner

        host, port = parse_remote_planner(spec)
        client = DirectPlanner(host, port, secret=load_secret(), priority="training",
                               key_id=os.environ.get("EDGERL_PLANNER_KEY_ID") or None).connect()
        try:
            return cls(client, horizon, **kwargs)
        except ValueError:
            client.close()
            raise

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        """Synchronous query: ``obs (n, O)`` -> chunks ``(n, H, A)`` on ``obs.device``."""
        return self.submit(obs, env_ids).result()

    def submit(self, obs: torch.Tensor, env_ids: torch.Tensor) -> ServedAnswer | Future:
        """Asynchronous query: sends ``obs (n, O)`` now and returns a future of the
        ``(n, H, A)`` chunks (on ``obs.device``); the caller steps on and calls ``.result()``
        when the chunks are due. A client without ``send_many`` (a ``RemotePlanner``) is
        asked synchronously and its future is already done."""
        x = obs.detach().float().cpu().numpy()
        pieces = [x[i:i + self.max_rows] for i in range(0, len(x), self.max_rows)]
        self.calls += 1
        self.rows += len(x)
        send_many = getattr(self.client, "send_many", None)
        if send_many is not None:
            self.client.poll()  # file the answers in, resend refused pieces: keep it flowing
            return ServedAnswer(self, send_many(pieces, now=0.0, timeout_s=self.timeout_s),
                                obs.device)
        done: Future = Future()
        done.set_result(self._chunks(self.client.plan_many(pieces, now=0.0,
                                                           timeout_s=self.timeout_s), obs.device))
        return done

    def _chunks(self, out: list[np.ndarray], device: torch.device) -> torch.Tensor:
        return torch.from_numpy(np.concatenate(out)).to(device)

    def close(self) -> None:
        """Close the connection (the scheduler drains its pending answers first)."""
        log.info("served planner: %d queries, %d rows, %.3f s waited for answers", self.calls,
                 self.rows, self.wait_s)
        self.client.close()


class ServedAnswer:
    """The future :meth:`ServedPlanFn.submit` returns: ``result()`` reads the answers from
    the socket (waiting only if they have not arrived), ``done()`` never waits."""

    def __init__(self, owner: ServedPlanFn, ticket: Any, device: torch.device) -> None:
        self._owner, self._ticket, self._device = owner, ticket, device
        self._value: torch.Tensor | None = None

    def done(self) -> bool:
        """Whether the answers are in (or failed), after filing those already received."""
        if self._value is None and not self._ticket.done and self._ticket.error is None:
            self._owner.client.poll()
        return self._value is not None or self._ticket.done or self._ticket.error is not None

    def result(self, timeout: float | None = None) -> torch.Tensor:
        """The ``(n, H, A)`` float32 chunks; raises the service's ``RemotePlannerError``.
        ``timeout`` is ignored: the client's ``timeout_s`` bounds the wait."""
        if self._value is None:
            start = time.perf_counter()
            out = self._owner.client.receive(self._ticket)
            self._owner.wait_s += time.perf_counter() - start
            self._value = self._owner._chunks(out, self._device)
        return self._value


class BCServedPlanner:
    """A :class:`~edgerl.contract.planner.Planner` over a :class:`BCChunkPlanner` network, with
    ``plan_batch`` (``obs (n, O)`` -> ``(n, H, A)`` float32); instructions are ignored.

    ``threads``: torch intra-op threads for the network, set in every thread that calls it.
    torch's thread count is per OS thread (an OpenMP setting): the server's loop or worker
    thread does not inherit the ``torch.set_num_threads(1)`` of the thread that started it
    and would run each tiny forward with one OpenMP thread per core: 8-11x the round trip
    and server CPU per request on a loaded machine (docs/planner.md, "Where the served
    run's time went").
    """

    def __init__(self, net: Any, dt_s: float, period_s: float, threads: int = 1) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.net = net.eval()
        self.threads = int(threads)
        self._configured = threading.local()  # .done in each thread that set its threads
        self.info = PlannerInfo(horizon=net.horizon, action_dim=net.action_dim, dt_s=dt_s,
                                period_s=period_s, expected_latency_s=0.001)

    def plan_batch(self, observations: np.ndarray, instructions: list[str],
                   now: float) -> np.ndarray:
        self._use_own_threads()
        with torch.no_grad():
            x = torch.from_numpy(np.asarray(observations, np.float32))
            return self.net.plan(x).cpu().numpy().astype(np.float32)

    def _use_own_threads(self) -> None:
        """Set ``threads`` in the calling thread, once per thread (OpenMP's team size)."""
        if not getattr(self._configured, "done", False):
            torch.set_num_threads(self.threads)
            self._configured.done = True

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        rows = self.plan_batch(np.asarray(observation, np.float32)[None], [instruction], now)[0]
        return ActionChunk(actions=rows, t0=now, dt=self.info.dt_s, obs_time=now,
                           source="bc_planner")

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK
