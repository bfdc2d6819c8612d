"""Task overhead against raw physics, robust to other load: interleaved best-of blocks.

:func:`overhead_ratio` alternates, ``blocks`` times, three timed blocks of ``steps`` control
steps each (``num_envs`` envs, zero actions, auto-resets included):

1. **ours**: ``env.step``;
2. **raw physics of the same states** (the reference of ``ratio``): the task's own batch
   (same model, per-env parameters, substeps, threads) replays, one ``step`` call each, the
   integration states it had just before each physics call of an untimed block of ``env.step``
   that ran right before; only the ``step`` calls are timed (writing a state row set before
   each costs the replay 0.4-0.5 % on arm_reach, ``benchmarks/sim_overhead/replay_protocol.py``),
   and the task's state is put back after;
3. **raw physics from rest** (``ratio_from_rest``, the earlier reference): a second,
   persistent batch of the model stepped from its default state with zero control.

Why the same states: a contact task's physics costs what its states make it cost. Balls that
roll and get kicked on ball_balance's plate cost 1.5-1.8x the solver time of balls resting on
it, so a reference stepped from rest charges the task's physics to its Python overhead. The
replay times the same physics work without the task's logic around it.

Other processes only ever slow a block down, so each side's fastest block is its
least-disturbed estimate and the ratio of the two bests is the task's overhead on a quiet
machine (``edgerl bench ratios``' ``sim/<task>``; the acceptance is >= 0.75 for every MuJoCo
task). Medians are reported beside them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

__all__ = ["StateReplay", "overhead_ratio"]


class StateReplay:
    """Records a batch's integration states before each ``step`` call, then replays them.

    ``with replay.recording():`` shadows ``batch.step`` with a wrapper that copies
    ``batch.state`` (N, nstate) into the next recorded slot before stepping; :meth:`replay`
    writes each recorded state set back and steps it once, timing only the ``step`` calls,
    and restores the batch's state.

    Args:
        batch: A :class:`~edgerl.sim.mujoco.backends.MujocoBatch`.
        capacity: Most state sets recorded (one per ``step`` call).
    """

    def __init__(self, batch: Any, capacity: int) -> None:
        self.batch = batch
        self.rows = np.empty((capacity, *batch.state.shape))
        self.count = 0

    @contextmanager
    def recording(self) -> Iterator[StateReplay]:
        """Record the state before every ``batch.step`` call inside the block (``count``
        restarts at 0); ``RuntimeError`` on a step of some envs only or past ``capacity``."""
        batch, step = self.batch, self.batch.step
        self.count = 0

        def recording_step(nsubsteps: int = 1, env_ids: np.ndarray | None = None) -> None:
            if env_ids is not None:
                raise RuntimeError("StateReplay records whole-batch steps only")
            if self.count == len(self.rows):
                raise RuntimeError(f"StateReplay: more than {len(self.rows)} steps recorded")
            np.copyto(self.rows[self.count], batch.state)
            self.count += 1
            step(nsubsteps)

        batch.step = recording_step  # an instance attribute: shadows the method until the end
        try:
            yield self
        finally:
            del batch.step

    def replay(self, nsubsteps: int) -> float:
        """Step each recorded state set once (``nsubsteps`` physics steps); seconds spent in
        the ``step`` calls. The batch's state is restored afterwards."""
        if self.count == 0:
            raise RuntimeError("nothing recorded: call batch.step inside recording()")
        batch = self.batch
        saved = batch.state.copy()
        spent = 0.0
        try:
            for rows in self.rows[:self.count]:
                np.copyto(batch.state, rows)
                start = time.perf_counter()
                batch.step(nsubsteps)
                spent += time.perf_counter() - start
        finally:
            np.copyto(batch.state, saved)
        return spent


def overhead_ratio(task: str, num_envs: int = 256, steps: int = 20, blocks: int = 15,
                   warmup: int = 10, seed: int = 0) -> dict[str, Any]:
    """Env-steps/s of ``task``, of its batch replaying the task's states, and of a batch from
    rest: best and median of ``blocks`` interleaved blocks of ``steps`` control steps each.

    Returns a dict: ``steps_per_s`` / ``raw_physics_steps_per_s`` (same states) /
    ``raw_from_rest_steps_per_s`` (bests), ``ratio`` = ours / same-state raw,
    ``ratio_from_rest``, the medians and ``median_pair_ratio`` (median of per-block ratios
    against the same-state raw)."""
    from edgerl.sim.mujoco.backends import MujocoBatch
    from edgerl.sim.registry import make_task

    if min(num_envs, steps, blocks) < 1:
        raise ValueError("num_envs, steps and blocks must be >= 1")
    env = make_task(task, num_envs=num_envs, seed=seed)
    if not hasattr(env, "sim") or not hasattr(env, "substeps"):
        env.close()
        raise ValueError(f"{task} is not a MuJoCo task (no batch to compare with)")
    rest = MujocoBatch(env.model, num_envs, backend=env.backend, nthread=env.nthread)
    replay = StateReplay(env.sim, steps)
    zeros = torch.zeros(num_envs, env.num_actions)
    ours, same, from_rest = [], [], []
    try:
        for _ in range(warmup):
            env.step(zeros)
            rest.step(env.substeps)
        for _ in range(blocks):
            start = time.perf_counter()
            for _ in range(steps):
                env.step(zeros)
            mid = time.perf_counter()
            for _ in range(steps):
                rest.step(env.substeps)
            end = time.perf_counter()
            with replay.recording():
                for _ in range(steps):
                    env.step(zeros)
            ours.append(num_envs * steps / (mid - start))
            from_rest.append(num_envs * steps / (end - mid))
            same.append(num_envs * steps / replay.replay(env.substeps))
    finally:
        rest.close()
        env.close()
    return {"task": task, "num_envs": num_envs, "steps": steps, "blocks": blocks,
            "steps_per_s": round(max(ours)), "raw_physics_steps_per_s": round(max(same)),
            "raw_from_rest_steps_per_s": round(max(from_rest)),
            "ratio": round(max(ours) / max(same), 3),
            "ratio_from_rest": round(max(ours) / max(from_rest), 3),
            "median_steps_per_s": round(statistics.median(ours)),
            "median_raw_steps_per_s": round(statistics.median(same)),
            "median_pair_ratio": round(statistics.median(o / r for o, r in zip(ours, same)), 3)}
