"""The edit tick's hot path and the clock loop around it: the finite check, one intervention
lock per tick, the work per tick, the prewarm before the spin window, the GIL held through
spin and tick, and the onnxruntime session options."""

from __future__ import annotations

import sys
import threading
import warnings

import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import VirtualClock
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.edit_loop import EditLoop, LoopConfig
from edgerl.runtime.safety import all_finite


def _loop(mlp_bundle, clock=None, sink=None, **cfg) -> EditLoop:
    spec, net = load_bundle(mlp_bundle, warmup=1)
    loop = EditLoop(spec, net, ChunkBuffer(), clock=clock or VirtualClock(),
                    sink=sink, cfg=LoopConfig(gc_freeze=False, **cfg))
    loop.obs.write(np.ones(4, np.float32), 0.0)
    rows = np.linspace(-0.5, 0.5, 20, dtype=np.float32).reshape(10, 2)
    loop.buffer.push(ActionChunk(actions=rows, t0=0.0, dt=0.01, obs_time=0.0))
    return loop


def test_all_finite_is_isfinite_all_without_warnings():
    rng = np.random.default_rng(0)
    special = np.array([np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-45], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (0, 1, 2, 5, 64):
            for _ in range(200):
                x = (rng.standard_normal(n) * 1e30).astype(np.float32)
                for _ in range(rng.integers(0, 3)):
                    if n:
                        x[rng.integers(n)] = rng.choice(special)
                assert all_finite(x) == bool(np.isfinite(x).all()), x
        big = np.full(1000, 3.4e38, np.float32)  # finite, its float32 sum would overflow
        assert all_finite(big) and not all_finite(np.append(big, [np.inf, -np.inf]))


class _CountingLock:
    """A real lock that counts how often it is taken."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = 0

    def __enter__(self):
        self.taken += 1
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)


def test_intervention_slot_lock_is_taken_once_per_tick(mlp_bundle):
    loop = _loop(mlp_bundle)
    lock = loop.interventions._lock = _CountingLock()
    for i in range(10):
        loop.tick(0.001 * i)
    assert loop.state == "ok" and lock.taken == 10


def test_a_steady_tick_makes_few_python_calls(mlp_bundle):
    """Python + C calls in one steady-state edit tick (chunk rows unchanged), counted with
    sys.setprofile (ufuncs are not counted): a deterministic measure of the per-tick work.
    The generic builder, the isfinite/clip/any wrappers and two slot locks made it 97; the
    preallocated writer, the float-sum finite check and one lock make 63."""
    loop = _loop(mlp_bundle)
    loop.tick(0.0)
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(event)
                   if event in ("call", "c_call") else None)
    try:
        loop.tick(0.001)
    finally:
        sys.setprofile(None)
    assert loop.state == "ok"
    assert len(calls) <= 70, len(calls)


class _RecordingClock(VirtualClock):
    """VirtualClock recording each wait's target, spin mode and the GIL switch interval
    in force; ``oversleep`` moves an OS-only sleep (``spin_s=0``) that much late."""

    def __init__(self, oversleep: float = 0.0) -> None:
        super().__init__(0.0)
        self.waits: list[tuple[float, float | None, float]] = []
        self.oversleep = oversleep

    def sleep_until(self, t: float, spin_s: float | None = None) -> None:
        self.waits.append((t, spin_s, sys.getswitchinterval()))
        super().sleep_until(t + (self.oversleep if spin_s == 0.0 else 0.0))


def _run_recorded(mlp_bundle, clock, **cfg):
    ticks, warm = [], []
    loop = _loop(mlp_bundle, clock=clock, sink=lambda c, t: ticks.append(
        (t, clock.now(), sys.getswitchinterval())) or True, rate_hz=1000.0, **cfg)
    prewarm = loop._prewarm
    loop._prewarm = lambda: (warm.append((clock.now(), sys.getswitchinterval())), prewarm())
    loop.run_for(ticks=5)
    return loop, ticks, warm


def test_prewarm_runs_before_the_spin_window_and_ticks_stay_on_the_grid(mlp_bundle):
    """1 kHz, spin 300 us, prewarm 150 us: the OS sleep ends 450 us before each deadline,
    the prewarm runs there (outside the spin window, so its own run time never delays the
    tick), then the loop spins to the deadline and ticks on it."""
    clock = _RecordingClock()
    loop, ticks, warm = _run_recorded(mlp_bundle, clock, spin_s=300e-6, prewarm_s=150e-6)
    deadlines = [t for t, _, _ in ticks]
    assert np.allclose(np.diff(deadlines), 1e-3) and [now for _, now, _ in ticks] == deadlines
    assert np.allclose([w for w, _ in warm], np.array(deadlines) - 450e-6)
    assert all(w < d - loop.cfg.spin_s for (w, _), d in zip(warm, deadlines))
    assert [s for _, s, _ in clock.waits] == [0.0, np.inf] * 5


def test_prewarm_is_skipped_when_the_loop_wakes_inside_the_spin_window(mlp_bundle):
    clock = _RecordingClock(oversleep=200e-6)  # the OS sleep returns 50 us into the spin
    loop, ticks, warm = _run_recorded(mlp_bundle, clock, spin_s=300e-6, prewarm_s=150e-6)
    assert len(ticks) == 5 and warm == [] and loop.state == "ok"


def test_gil_switch_interval_is_held_through_spin_and_tick_and_restored(mlp_bundle):
    """The long interval is in force from the wake-up to the tick's end (prewarm, spin, the
    sink), the base one during the OS sleep; and it is back when the loop returns."""
    base = sys.getswitchinterval()
    clock = _RecordingClock()
    loop, ticks, warm = _run_recorded(mlp_bundle, clock, spin_switch_interval_s=4e-3)
    assert [s for _, _, s in ticks] == [4e-3] * 5 and [s for _, s in warm] == [4e-3] * 5
    sleeps = [s for _, spin, s in clock.waits if spin == 0.0]
    assert sleeps == [pytest.approx(base)] * 5
    assert sys.getswitchinterval() == pytest.approx(base)
    _, ticks, _ = _run_recorded(mlp_bundle, _RecordingClock(), spin_switch_interval_s=None)
    assert [s for _, _, s in ticks] == [pytest.approx(base)] * 5


def test_spin_switch_interval_is_validated():
    with pytest.raises(ValueError, match="spin_switch_interval_s must be > 0"):
        LoopConfig(spin_switch_interval_s=0.0)


def test_onnxruntime_session_runs_single_threaded_without_spinning(mlp_bundle):
    """One intra-/inter-op thread, sequential execution, no spinning workers: the loop's
    core is not shared with onnxruntime's own threads."""
    import onnxruntime as ort

    _, net = load_bundle(mlp_bundle, warmup=1)
    so = net.session.get_session_options()
    assert (so.intra_op_num_threads, so.inter_op_num_threads) == (1, 1)
    assert so.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert net._fast is not None  # the C-level IOBinding path (no per-call Python wrapper)


def test_guard_command_fast_path_agrees_with_the_exact_checks(mlp_bundle):
    """A composed node checks every tick's command: the Python-float fast path accepts
    exactly what the numpy checks accept, and a refusal still names the problem."""
    from edgerl.runtime.input_guard import InputGuard

    spec, _ = load_bundle(mlp_bundle, warmup=1)
    guard = InputGuard(spec)
    low, high = guard._cmd_low, guard._cmd_high
    edges = np.concatenate([low, high, np.nextafter(low, -np.inf), np.nextafter(high, np.inf),
                            [np.nan, np.inf, -np.inf, 0.0, -0.0]])
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.float64):
        for _ in range(400):
            v = rng.uniform(-1.2, 1.2, spec.action.dim)
            v[rng.integers(spec.action.dim)] = rng.choice(edges)
            v = v.astype(dtype)
            assert guard.check_command(v, 1.0, 1.0) == guard._values("command", v, low, high)
    assert guard.check_command(np.array([0.0, np.nan]), 1.0, 1.0) == "nonfinite: value 1 is nan"
