"""``EditLoop``: the fixed-rate fast loop beside the asynchronous planner.

Per tick (``t`` = the tick's scheduled time)::

    newest observation (ObservationSlot) -> chunk row for t (ChunkBuffer; past rows dropped)
    -> edit input (edgerl.contract.edit_obs.select_chunk_rows + build_edit_obs(out=prealloc),
    with the chunk's planner intent) -> inference (backend.input -> backend.output, preallocated)
    -> compose_edit_action (method "edit"; "planner"/"blend"/"rtc": the chunk row; others: the
    output)
    -> SafetyFilter -> CommandSink(command, t) -> timing record

The row for ``t`` and the stale rule are the bundle's ``timing`` (``edgerl.contract.timing``, the
training wrapper's rules: past its last row a chunk's last row holds for ``stale_steps`` more
steps). Fallback states (counted in :attr:`LoopMetrics.state_counts` and as safety
interventions): no chunk yet, stale chunk, non-finite observation, non-finite network output,
deadline overrun, e-stop; a sink that fails is counted as ``transport_down``.

Operator interventions (:mod:`edgerl.contract.intervention`) arrive through
:attr:`EditLoop.interventions` (a slot, like the observation's): while an ``override`` is in
force the command is the operator's (through the same safety filter; the network still runs
on the tick's input so the log shows what it would have done), an ``estop`` latches the
e-stop. With
:meth:`EditLoop.log_transitions` the loop keeps a bounded per-tick log for learning from
them (:class:`~edgerl.runtime.transition_log.TransitionLog`), with optional exploration
noise on the residual (:meth:`EditLoop.explore`).

The loop runs in its own thread (:meth:`EditLoop.start` / :meth:`EditLoop.stop`, from
:class:`~edgerl.runtime.loop_scheduler.LoopScheduler`: a fixed-rate grid, or the ``state``
trigger of ``LoopConfig.trigger`` / the manifest's ``timing.trigger``: tick on each new
observation, on the clock after ``trigger_timeout_periods`` periods without one) or is stepped
by hand (:meth:`EditLoop.tick`) with a :class:`~edgerl.contract.clock.VirtualClock` for tests and
sim-in-the-loop. Its ports (:class:`ObservationSlot`, :class:`CommandSink`) live in
:mod:`edgerl.runtime.loop_io`, its options (:class:`LoopConfig`) in
:mod:`edgerl.runtime.loop_config`.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from edgerl.contract.clock import Clock, MonotonicClock
from edgerl.contract.edit_obs import EditObsWriter, compose_edit_action
from edgerl.contract.intervention import InterventionSlot
from edgerl.contract.methods import CHUNK_METHODS
from edgerl.contract.spec import PolicySpec
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.chunk_rows import ChunkRows
from edgerl.runtime.escalation import EscalationConfig
from edgerl.runtime.inference import InferenceBackend
from edgerl.runtime.loop_config import LoopConfig
from edgerl.runtime.loop_io import CommandSink, ObservationSlot, TransportDown
from edgerl.runtime.loop_scheduler import LoopScheduler
from edgerl.runtime.metrics import STATES, LoopMetrics
from edgerl.runtime.safety import SafetyFilter, all_finite
from edgerl.runtime.transition_log import TransitionLog

# The loop's ports and options are part of its public API (defined beside it).
__all__ = ["CHUNK_METHODS", "CommandSink", "EditLoop", "LoopConfig", "ObservationSlot",
           "TransportDown"]

log = logging.getLogger(__name__)

_S = {name: i for i, name in enumerate(STATES)}


def _null_sink(command: np.ndarray, t: float) -> bool:
    return True


class EditLoop(LoopScheduler):
    """The fast loop for one bundle.

    Args:
        spec: The bundle's manifest.
        backend: Its inference backend (``None`` for ``planner``/``blend``/``rtc`` bundles).
        buffer: Where the planner client pushes chunks.
        obs: Where the sensor side writes observations (created if ``None``).
        sink: Command output (default: discard).
        clock: ``MonotonicClock`` (default) or ``VirtualClock``.
        cfg: Loop options.
    """

    def __init__(self, spec: PolicySpec, backend: InferenceBackend | None, buffer: ChunkBuffer,
                 obs: ObservationSlot | None = None, sink: CommandSink | None = None,
                 clock: Clock | None = None, cfg: LoopConfig | None = None) -> None:
        self.spec = spec
        self.backend = backend
        self.buffer = buffer
        self.cfg = cfg or LoopConfig()
        self.clock: Clock = clock or MonotonicClock(self.cfg.spin_s)
        if isinstance(self.clock, MonotonicClock):
            self.clock.spin_s = self.cfg.spin_s
        self.obs = obs or ObservationSlot(spec.observation.dim)
        if self.obs.dim != spec.observation.dim:
            raise ValueError(f"observation slot has {self.obs.dim} elements, the manifest "
                             f"{spec.observation.dim}")
        self.sink: CommandSink = sink or _null_sink
        self.rate_hz = float(self.cfg.rate_hz or spec.control_hz)
        self.period = 1.0 / self.rate_hz
        self.safety = SafetyFilter(spec.action, self.cfg.safety,
                                   EscalationConfig.from_timing(spec.timing))
        self.metrics = LoopMetrics(self.cfg.metrics_capacity)
        self.edit_cfg = spec.edit_obs
        #: The bundle's timing: which row is used when, and when a chunk is stale.
        self.timing = spec.timing
        #: ``clock`` or ``state`` (see :class:`LoopConfig`).
        self.trigger = self.cfg.trigger or spec.timing.trigger
        self.trigger_timeout_s = spec.timing.trigger_timeout_periods * self.period
        #: State-triggered ticks that fell back to the clock (no state within the timeout).
        self.trigger_timeouts = 0
        self._setup_mode()
        a_dim, o_dim = spec.action.dim, spec.observation.dim
        n_rows = self.edit_cfg.n_rows
        # Preallocated per-tick buffers.
        self._obs = np.zeros(o_dim, np.float32)
        self._obs_in = np.zeros(o_dim, np.float32)
        #: The chunk rows of the newest tick (:attr:`ChunkRows.rows` is ``self._rows``).
        self.chunk_rows = ChunkRows(n_rows, a_dim, self.cfg.row_mode)
        self._rows = self.chunk_rows.rows
        self._committed = np.zeros((self.edit_cfg.n_committed, a_dim), np.float32)
        self._action = np.zeros(a_dim, np.float32)
        self.command = np.zeros(a_dim, np.float32)
        # The edit observation is written straight into the network's input row (no copy).
        self._edit_x = (backend.input if self.input_mode == "edit"  # type: ignore[union-attr]
                        else np.zeros((1, self.edit_cfg.dim), np.float32))
        self._edit_obs = EditObsWriter(self.edit_cfg, self._edit_x[0])
        self._intent_dim = self.edit_cfg.intent_dim
        self._warm_x = np.zeros(self.edit_cfg.dim, np.float32)
        self._warm_obs = EditObsWriter(self.edit_cfg, self._warm_x)
        self._can_prewarm = (self.cfg.prewarm_s > 0 and backend is not None
                             and spec.recurrent.kind == "none")
        self._mean = np.asarray(spec.observation.mean, np.float32)
        self._std = np.asarray(spec.observation.std, np.float32)
        self._normalize = not spec.observation.normalized_in_graph
        self._last_t: float | None = None
        self._reset_pending = False
        self.state = "no_chunk"
        self.transport_ok = True
        #: Seconds the sink took in the newest tick (part of its compute time).
        self.last_send_s = 0.0
        self.last_chunk_age_s = float("nan")
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._old_switch: float | None = None
        #: Operator interventions (override / e-stop / release), read once per tick.
        self.interventions = InterventionSlot(a_dim)
        self._override = np.zeros(a_dim, np.float32)
        self._policy_out = np.zeros(a_dim, np.float32)
        self._ran_policy = False
        #: Per-tick log for learning (None until :meth:`log_transitions`).
        self.transitions: TransitionLog | None = None
        #: Episode index (incremented by :meth:`reset`), stamped on logged transitions.
        self.episode = 0
        #: Exploration noise std on the residual (policy units; 0 = off, see :meth:`explore`).
        self.explore_std = 0.0
        self._explore_rng: np.random.Generator | None = None
        self._noisy = np.zeros(a_dim, np.float32)
        #: The residual the newest policy tick composed its command from (policy units,
        #: before the bound: the network's output plus the exploration noise, if on).
        self._residual = np.zeros(a_dim, np.float32)

    def explore(self, std: float, seed: int = 0) -> None:
        """Add ``N(0, std^2)`` (policy units: the residual before its ``[-1, 1]`` bound) to
        the edit network's output on every tick the policy (not an override) is in control,
        before the bound and the safety filter: the command sent and the logged ``command``
        are the action executed, ``policy_out`` stays the network's and ``residual`` is the
        noisy value before the bound (the unbiased action of a learner: the bound clips the
        noise asymmetrically where the output is near it). ``std = 0``: off.
        Deterministic for ``seed`` (one draw per such tick)."""
        if not self.is_edit:
            raise ValueError(f"exploration noise needs an edit policy, the bundle's method is "
                             f"{self.spec.method!r}")
        if not (np.isfinite(std) and 0.0 <= std <= 10.0):
            raise ValueError(f"exploration noise std must be a finite number in [0, 10], "
                             f"got {std}")
        self.explore_std = float(std)
        self._explore_rng = np.random.default_rng(seed) if std > 0 else None

    def log_transitions(self, capacity: int = 1 << 15) -> TransitionLog:
        """Start keeping the per-tick transition log (edit policies only); returns it."""
        if not self.is_edit:
            raise ValueError(f"transition logging needs an edit policy, the bundle's method is "
                             f"{self.spec.method!r}")
        self.transitions = TransitionLog(self.edit_cfg.dim, self.spec.action.dim, capacity)
        return self.transitions

    def _setup_mode(self) -> None:
        spec, net = self.spec, self.backend
        self.is_edit = spec.method == "edit"
        if net is None:
            if spec.method not in ("planner", "blend", "rtc"):
                raise ValueError(f"method {spec.method!r} needs a policy network")
            self.input_mode = "none"
        elif net.input.shape[-1] == self.edit_cfg.dim:
            self.input_mode = "edit"
        elif net.input.shape[-1] == spec.observation.dim:
            self.input_mode = "obs"
        else:
            raise ValueError(f"network input has {net.input.shape[-1]} elements; expected "
                             f"{self.edit_cfg.dim} (edit obs) or {spec.observation.dim} (obs)")
        self.needs_chunk = spec.method in CHUNK_METHODS or self.input_mode == "edit"
        if self.is_edit and self.input_mode != "edit":
            raise ValueError("an edit policy must take the edit observation as input")

    # --- one tick ----------------------------------------------------------------------------
    def tick(self, now: float | None = None, overrun: bool = False,
             late: float = 0.0) -> np.ndarray:
        """Run one tick at time ``now`` (default ``clock.now()``); returns the command sent
        (a reused ``(A,)`` buffer). Records ``late`` (s; the input's age or the wake-up
        delay, as the caller defines it) and the compute time; a tick whose compute exceeds
        the period counts as a deadline miss."""
        start = time.perf_counter()
        t = self.clock.now() if now is None else now
        state = self._step(t, overrun)
        compute = time.perf_counter() - start
        self.metrics.record(late, compute, self.last_chunk_age_s, state, compute > self.period,
                            self.last_send_s)
        return self.command

    def _step(self, t: float, overrun: bool) -> int:
        """Compute and send the command for time ``t``; returns the state index."""
        if self._reset_pending:
            self._reset_pending = False
            self.reset()
        dt = self.period if self._last_t is None else t - self._last_t
        self._last_t = t
        safety = self.safety
        _, obs_seq = self.obs.read_into(self._obs)
        chunk = self.buffer.latest() if self.needs_chunk else None
        row = None if chunk is None else self.timing.row_at(t, chunk.t0, chunk.dt,
                                                            chunk.horizon)
        self.last_chunk_age_s = chunk.age(t) if chunk is not None else float("nan")
        cmd = self.command
        pol = safety.cfg
        safety.note_overrun(overrun)
        estop, override, started = self.interventions.poll_into(self._override)
        if estop:
            safety.estop("operator")
        self._ran_policy = False
        if safety.estopped:
            state = _S["estop"]
            safety.filter(self._action, dt, cmd)
        elif override:
            state = _S["ok"]
            if self.is_edit and all_finite(self._obs):
                self._policy_action(t, None if row is None else chunk, row)
            safety.filter(self._override, dt, cmd)
        elif overrun and pol.overrun_policy != "compute":
            state = _S["overrun"]
            safety.fallback(pol.overrun_policy, dt, cmd)
        elif self.needs_chunk and row is None and pol.stale_policy != "policy":
            reason = "no_chunk" if chunk is None else "stale_chunk"
            state = _S[reason]
            safety.fallback(pol.stale_policy, dt, cmd, reason=reason)
        elif not all_finite(self._obs):
            state = _S["nonfinite_obs"]
            # no state yet at all (the robot still booting): the ladder ends at the safe
            # action but does not latch, as before the first chunk
            safety.fallback(pol.nonfinite_policy, dt, cmd, nonfinite=True, reason="nonfinite_obs",
                            latch=obs_seq != 0)
        else:
            state = _S["ok"]
            if self.needs_chunk and row is None:  # stale_policy "policy": run as in training
                reason = "no_chunk" if chunk is None else "stale_chunk"
                state = _S[reason]
                safety.count(reason)
                chunk = None
            self._policy_action(t, chunk, row, explore=True)
            if state == _S["ok"] and not all_finite(self._action):
                state = _S["nonfinite_action"]
            safety.filter(self._action, dt, cmd)
        self.state = STATES[state]
        if self.transitions is not None and self._ran_policy:
            self.transitions.append(self._edit_x[0], self._policy_out, self._residual,
                                    self._rows[0], cmd, override, started, self.episode, t)
        self._commit(cmd)
        self._send(cmd, t)
        return state

    def _policy_action(self, t: float, chunk, row: int | None, explore: bool = False) -> None:
        """Fill ``self._action`` from the chunk and/or the network (``explore``: the policy
        is in control, so the exploration noise applies, if on)."""
        if chunk is not None:
            self.chunk_rows.fill(t, chunk, row)
        else:
            self.chunk_rows.clear()  # no usable chunk: zero rows (has_chunk = 0)
        if self.input_mode == "none":
            np.copyto(self._action, self._rows[0])
            return
        obs = self._obs
        if self._normalize:
            np.subtract(obs, self._mean, out=self._obs_in)
            np.divide(self._obs_in, self._std, out=self._obs_in)
            obs = self._obs_in
        net = self.backend
        assert net is not None
        if self.input_mode == "edit":  # self._edit_x is net.input
            self._edit_obs.write(obs, self._rows, 0.0 if chunk is None else chunk.age(t),
                                 self._committed, chunk is not None, self._intent_of(chunk))
        else:
            net.input[0] = obs
        y = net.infer()[0]
        if self.is_edit:
            self._policy_out[...] = y
            self._ran_policy = True
        if self.is_edit and not all_finite(y):
            self._action.fill(np.nan)  # before the residual clip turns inf into +-1
            return
        if self.is_edit:
            if explore and self._explore_rng is not None:
                self._explore_rng.standard_normal(out=self._noisy, dtype=np.float32)
                self._noisy *= np.float32(self.explore_std)
                self._noisy += y
                y = self._noisy
            self._residual[...] = y
            compose_edit_action(self._rows[0], y, self.spec.residual_bound, out=self._action)
        elif self.spec.method in ("planner", "blend", "rtc"):
            np.copyto(self._action, self._rows[0])
        else:
            np.copyto(self._action, y)

    def _intent_of(self, chunk) -> np.ndarray | None:
        """``chunk``'s ``(I,)`` intent when ``edit_obs.intent_dim`` is I, else ``None``
        (zeros; a wrong size never gets past the buffer's checks)."""
        if chunk is None or not self._intent_dim:
            return None
        intent = chunk.intent
        return intent if intent is not None and intent.shape[0] == self._intent_dim else None

    def _commit(self, cmd: np.ndarray) -> None:
        """Shift the committed-action history (newest first)."""
        c = self._committed
        if c.shape[0]:
            c[1:] = c[:-1]  # numpy copies overlapping views as if through a temporary
            c[0] = cmd

    def _send(self, cmd: np.ndarray, t: float) -> None:
        start = time.perf_counter()
        try:
            ok = self.sink(cmd, t)
        except (ConnectionError, OSError) as exc:
            if self.transport_ok:
                log.warning("transport down: %s", exc)
            ok = False
        self.last_send_s = time.perf_counter() - start
        if ok is False:
            self.safety.count("transport_down")
            self.transport_ok = False
        elif not self.transport_ok:
            log.info("transport back up")
            self.transport_ok = True

    # --- e-stop ------------------------------------------------------------------------------
    def estop(self, reason: str = "requested") -> None:
        """Latch the e-stop (thread-safe: the next tick sends the safe action)."""
        self.safety.estop(reason)

    def reset_estop(self) -> None:
        """Release the e-stop latch."""
        self.safety.reset_estop()

    def reset(self) -> None:
        """Start of an episode: clear history and recurrent state."""
        self._committed[...] = 0.0
        self._last_t = None
        self.episode += 1
        self.interventions.clear()
        self.safety.reset()
        if self.backend is not None:
            self.backend.reset_state()

    def request_reset(self) -> None:
        """Thread-safe :meth:`reset`: the next tick starts a new episode (for an episode
        boundary announced from another thread while the loop runs)."""
        self._reset_pending = True

    def prewarm(self) -> bool:
        """Warm the caches for an imminent tick (see ``LoopConfig.prewarm_s``) without side
        effects; for callers that schedule ticks themselves (a state-triggered node).
        Returns False where it does not apply (recurrent or no network, or disabled)."""
        if not self._can_prewarm:
            return False
        self._prewarm()
        return True

    def _prewarm(self) -> None:
        """Touch the tick's working set without side effects (see ``LoopConfig.prewarm_s``):
        the feed-forward network on its unchanged last input (same output) and the builder
        into a scratch buffer."""
        self._warm_obs.write(self._obs, self._rows, 0.0, self._committed, True)
        self.backend.infer()  # type: ignore[union-attr]

    def _on_crash(self, exc: BaseException) -> None:
        """The loop thread died: latch the e-stop so nothing moves on a dead loop."""
        self.safety.estop(f"loop crashed: {exc}")
