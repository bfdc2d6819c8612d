"""Loop metrics: per-tick timings in preallocated ring buffers, summaries, histograms.

Per tick the loop records the wake-up lateness (jitter: actual wake time minus the scheduled
deadline), the compute time (wake to command sent), the chunk age and the tick's state.
Recording writes into preallocated arrays (no allocation). Summaries (p50/p99, misses) and
histograms are computed on demand and exported as JSON, or as a PNG when matplotlib is
installed.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.report import finite

__all__ = ["STATES", "LoopMetrics"]

#: Tick states, in counter order (``ok``: the policy's command; others are fallbacks).
STATES = ("ok", "no_chunk", "stale_chunk", "nonfinite_obs", "nonfinite_action", "overrun",
          "estop")


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if x.size else float("nan")


class LoopMetrics:
    """Ring buffers of the last ``capacity`` ticks plus running totals over the whole run.

    Attributes:
        ticks: Ticks run.
        deadline_misses: Ticks whose command went out after the next tick's deadline, plus
            ticks skipped because the loop woke more than a period late.
        skipped: Ticks skipped (a subset of ``deadline_misses``).
        miss_bursts: Runs of deadline misses, a miss starting a new run unless another came
            within ``burst_gap_ticks`` ticks before it: one host stall that costs several
            ticks in a row is one burst (misses in a burst are not independent events).
        max_late_s: Largest wake-up lateness (s).
        state_counts: Ticks per state (:data:`STATES`).
        planner_latency_s: Recent planner latencies (s), appended by the planner client.
    """

    def __init__(self, capacity: int = 1 << 16, burst_gap_ticks: int = 100) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if burst_gap_ticks < 1:
            raise ValueError(f"burst_gap_ticks must be >= 1, got {burst_gap_ticks}")
        self.capacity = capacity
        self.burst_gap_ticks = burst_gap_ticks
        self._late = np.zeros(capacity, np.float64)
        self._compute = np.zeros(capacity, np.float64)
        self._age = np.zeros(capacity, np.float64)
        self._send = np.zeros(capacity, np.float64)
        self.planner_latency_s: deque[float] = deque(maxlen=4096)
        self.reset()

    def reset(self) -> None:
        """Forget everything recorded so far (e.g. after warm-up); buffers are reused, so a
        loop thread recording concurrently keeps writing into valid arrays."""
        self._i = 0
        self.ticks = 0
        self.deadline_misses = 0
        self.skipped = 0
        self.miss_bursts = 0
        self._last_miss = -(1 << 62)  # tick position (ticks + skipped) of the newest miss
        self.max_late_s = 0.0
        self.max_compute_s = 0.0
        self.state_counts = [0] * len(STATES)
        self.planner_latency_s.clear()

    def record(self, late_s: float, compute_s: float, chunk_age_s: float, state: int,
               missed: bool, send_s: float = 0.0) -> None:
        """One tick (no allocation); ``send_s`` is the part of ``compute_s`` spent handing
        the command to the transport (the sink: a ROS publish, a serial write)."""
        i = self._i
        self._late[i] = late_s
        self._compute[i] = compute_s
        self._age[i] = chunk_age_s
        self._send[i] = send_s
        self._i = 0 if i + 1 == self.capacity else i + 1
        self.ticks += 1
        self.state_counts[state] += 1
        if missed:
            self.deadline_misses += 1
            self._note_miss()
        if late_s > self.max_late_s:
            self.max_late_s = late_s
        if compute_s > self.max_compute_s:
            self.max_compute_s = compute_s

    def record_skipped(self, n: int) -> None:
        """``n`` deadlines passed without a tick (the loop woke too late)."""
        self.skipped += n
        self.deadline_misses += n
        if n > 0:
            self._note_miss()

    def _note_miss(self) -> None:
        pos = self.ticks + self.skipped
        if pos - self._last_miss > self.burst_gap_ticks:
            self.miss_bursts += 1
        self._last_miss = pos

    def _window(self, arr: np.ndarray, n: int | None = None) -> np.ndarray:
        return arr[: min(self.ticks if n is None else n, self.capacity)]

    def summary(self) -> dict[str, Any]:
        """Run totals and percentiles (µs) over the last ``capacity`` ticks."""
        # ``ticks`` read once: the loop thread may record between these lines, and windows
        # of different lengths cannot be subtracted (the soak crashed the edit node so)
        n = self.ticks
        late = self._window(self._late, n) * 1e6
        comp = self._window(self._compute, n) * 1e6
        send = self._window(self._send, n) * 1e6
        age = self._window(self._age, n)
        age = age[np.isfinite(age)]
        lat = np.asarray(self.planner_latency_s, np.float64) * 1e3
        return {
            "ticks": self.ticks,
            "tick_compute_p50_us": _pct(comp, 50), "tick_compute_p99_us": _pct(comp, 99),
            "tick_compute_max_us": self.max_compute_s * 1e6,
            # the command's own work (observation -> command), without the transport's
            "tick_policy_p50_us": _pct(comp - send, 50),
            "tick_policy_p99_us": _pct(comp - send, 99),
            "send_p50_us": _pct(send, 50), "send_p99_us": _pct(send, 99),
            "jitter_p50_us": _pct(late, 50), "jitter_p99_us": _pct(late, 99),
            "deadline_misses": self.deadline_misses, "skipped_ticks": self.skipped,
            "miss_bursts": self.miss_bursts,
            "deadline_miss_pct": 100.0 * self.deadline_misses / max(1, self.ticks + self.skipped),
            "max_late_us": self.max_late_s * 1e6,
            "chunk_age_p50_ms": _pct(age, 50) * 1e3, "chunk_age_max_ms":
                (float(age.max()) * 1e3 if age.size else float("nan")),
            "planner_latency_p50_ms": _pct(lat, 50), "planner_latency_p99_ms": _pct(lat, 99),
            "states": dict(zip(STATES, self.state_counts)),
        }

    def histograms(self, bins: int = 50) -> dict[str, Any]:
        """Histograms (µs) of compute time and jitter, and of planner latency (ms)."""
        out: dict[str, Any] = {}
        series = {"tick_compute_us": self._window(self._compute) * 1e6,
                  "jitter_us": self._window(self._late) * 1e6,
                  "planner_latency_ms": np.asarray(self.planner_latency_s) * 1e3}
        for name, x in series.items():
            x = x[np.isfinite(x)]
            if x.size == 0:
                out[name] = {"edges": [], "counts": []}
                continue
            counts, edges = np.histogram(x, bins=bins)
            out[name] = {"edges": edges.tolist(), "counts": counts.tolist()}
        return out

    def save_json(self, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """Summary + histograms as strict JSON (NaN becomes null)."""
        doc = {"summary": self.summary(), "histograms": self.histograms(), **(extra or {})}
        path = Path(path)
        path.write_text(json.dumps(finite(doc), indent=2) + "\n")
        return path

    def save_png(self, path: str | Path, title: str = "edit loop") -> Path:
        """Latency histograms (compute time, jitter) as a PNG; needs matplotlib."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as exc:
            raise RuntimeError("the PNG export needs matplotlib (pip install matplotlib); "
                               "use the JSON export instead") from exc
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
        for ax, arr, label in ((axes[0], self._compute, "tick compute time (µs)"),
                               (axes[1], self._late, "wake-up jitter (µs)")):
            x = self._window(arr) * 1e6
            ax.hist(x, bins=60, log=True)
            ax.set_xlabel(label)
            ax.set_ylabel("ticks")
            if x.size:
                ax.axvline(np.percentile(x, 99), color="r", ls="--", label="p99")
                ax.legend()
        fig.suptitle(f"{title}: {self.ticks} ticks, {self.deadline_misses} deadline misses")
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path
