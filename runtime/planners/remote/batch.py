"""Batched requests of :class:`~.remote.RemotePlanner`: ``plan_batch`` and ``plan_many``.

The training-time use of a planner service: many observations in one ``plan_batch`` request,
several requests in flight at once, pieces refused for the server's quotas sent again.
:class:`_BatchRequests` is a mixin: its state lives on the client.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from edgerl.runtime.planners.protocol.framing import encode_array
from edgerl.runtime.planners.remote.config import RemotePlannerError, _Sent, _Waiter

__all__: list[str] = []


class _BatchRequests:
    """``plan_batch`` / ``plan_many`` (mixin of ``RemotePlanner``)."""

    def plan_batch(self, observations: np.ndarray, instructions: list[str], now: float,
                   timeout_s: float = 30.0, with_intent: bool = False) -> Any:
        """Blocking batched round trip: ``obs (n, O)`` + n instructions -> ``(n, H, A)``
        float32, every chunk starting at ``now`` (a training-time planner service answering
        all simulated envs in one request). The server's planner must have ``plan_batch``.
        ``with_intent``: return ``(chunks, intent (n, I) float32 or None)`` instead."""
        obs = np.ascontiguousarray(observations, dtype=np.float32)
        if obs.ndim != 2 or obs.shape[0] != len(instructions):
            raise ValueError(f"need obs (n, O) and n instructions, got obs {obs.shape} and "
                             f"{len(instructions)} instructions")
        intents: list[np.ndarray | None] = []
        chunks = self.plan_many([obs], now, timeout_s, [list(instructions)], intents)[0]
        return (chunks, intents[0]) if with_intent else chunks

    def plan_many(self, pieces: list[np.ndarray], now: float, timeout_s: float = 30.0,
                  instructions: list[list[str]] | None = None,
                  intents: list[np.ndarray | None] | None = None) -> list[np.ndarray]:
        """Send one ``plan_batch`` per piece (``obs (n_i, O)``) at once, wait for all;
        returns ``[(n_i, H, A) float32, ...]`` (and fills ``intents``, if given, with each
        piece's ``(n_i, I)`` planner intent or ``None``). A piece refused for the server's
        quotas (``quota_exceeded``, ``overloaded``) is sent again after a short pause until
        ``timeout_s``; any other error raises :class:`RemotePlannerError`."""
        texts = instructions or [[""] * len(p) for p in pieces]
        end = time.monotonic() + timeout_s
        results: list[np.ndarray | None] = [None] * len(pieces)
        got_intents: list[np.ndarray | None] = [None] * len(pieces)
        todo = list(range(len(pieces)))
        pause = 0.002
        while todo:
            waiting = [(i, *self._send_batch(pieces[i], texts[i], now)) for i in todo]
            todo = []
            for i, req_id, waiter in waiting:
                try:
                    reply = self._await_reply(req_id, waiter, max(0.0, end - time.monotonic()),
                                              "batch")
                    actions = reply["_actions"]
                    if actions.shape[0] != len(pieces[i]):
                        raise RemotePlannerError("malformed", f"{actions.shape[0]} chunks for "
                                                              f"{len(pieces[i])} observations")
                    results[i], got_intents[i] = actions, reply.get("_intent")
                except RemotePlannerError as exc:
                    if exc.code not in ("quota_exceeded", "overloaded") or \
                            time.monotonic() + pause > end:
                        raise
                    todo.append(i)
            if todo:
                self._counts["batch_retries"] += len(todo)
                time.sleep(pause)
                pause = min(0.05, 2 * pause)
        if intents is not None:
            intents[:] = got_intents
        return results  # type: ignore[return-value]

    def _send_batch(self, obs: np.ndarray, texts: list[str], now: float
                    ) -> tuple[int, _Waiter]:
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        waiter = _Waiter(threading.Event())
        req_id = next(self._ids)
        with self._cv:
            self._waiters[req_id] = waiter
            self._sent[req_id] = _Sent(time.monotonic(), 0.0, float(now), time.monotonic())
        message = {"v": self.version, "type": "plan_batch", "id": req_id,
                   "obs": encode_array(obs), "instructions": list(texts),
                   "obs_time": float(now), "deadline_s": self.config.deadline_s,
                   "priority": "training" if self.config.priority == "robot"
                   else self.config.priority}
        try:
            self._send_now(message)
        except RemotePlannerError as exc:
            waiter.reply = {"type": "error", "code": exc.code, "message": str(exc)}
            waiter.event.set()
        return req_id, waiter
