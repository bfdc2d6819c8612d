"""HIL command round trip against ``edgerl bench serial`` in the same minutes.

One set (:func:`pair`), back to back on the same machine, all at ``rt_priority`` P (each
process at SCHED_FIFO P, its firmware at P+1) and on the same ``target`` firmware build:

1. ``edgerl bench serial --pace-hz R``: the link's round trip with the HIL's traffic
   pattern, one SETPOINT -> STATE round trip per tick of the control rate R (the reference);
2. ``edgerl bench serial``: the same round trip back to back (the ping-pong floor);
3. ``edgerl hil``: the plant, the controller and the link together, whose ``cmd_rtt`` is the
   same quantity (a SETPOINT -> its STATE echo), one per control period.

``ratio`` = hil ``cmd_rtt_p99_us`` / paced bench p99 (the like-with-like comparison the 2x
goal is judged on), ``ratio_b2b`` = hil p99 / back-to-back bench p99 (beside it).
``other_rt`` lists other processes' real-time threads that outranked the whole set
(SCHED_FIFO/RR above P+1, sampled every 0.25 s: "pid command" -> priority; on a shared machine
they preempt any of the three at random). :func:`summarize` counts the sets that met 2x.
Used by ``benchmarks/hil_rt_ratio.py`` and the ``hil/rtt_p99`` row of ``edgerl bench ratios``.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from edgerl.bench.child_json import edgerl_json

__all__ = ["TARGET_RATIO", "other_rt_threads", "pair", "summarize", "watch_rt"]

#: the acceptance: hil p99 within this factor of the paced bench serial p99.
TARGET_RATIO = 2.0



def other_rt_threads(above: int) -> dict[str, int]:
    """User-space processes with a SCHED_FIFO / SCHED_RR thread above priority ``above``:
    "pid command (first words)" -> its highest such priority. Kernel threads are left out."""
    out: dict[str, int] = {}
    for pid in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if not argv[0]:
                continue  # a kernel thread
            top = 0
            for tid in os.listdir(f"/proc/{pid}/task"):
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is stat field 3
                prio, policy = int(fields[37]), int(fields[38])  # fields 40 and 41
                if policy in (os.SCHED_FIFO, os.SCHED_RR):
                    top = max(top, prio)
        except (OSError, ValueError, IndexError):  # the process ended while read
            continue
        if top > above:
            name = f"{pid} " + " ".join(a.decode(errors="replace") for a in argv[:5])[:90]
            out[name] = max(out.get(name, 0), top)
    return out


@contextmanager
def watch_rt(above: int, interval_s: float = 0.25) -> Iterator[dict[str, int]]:
    """Within the block, sample :func:`other_rt_threads` every ``interval_s``; the yielded
    dict collects every process seen (command -> highest priority)."""
    seen: dict[str, int] = {}
    stop = threading.Event()

    def sample() -> None:
        while True:
            for name, prio in other_rt_threads(above).items():
                seen[name] = max(seen.get(name, 0), prio)
            if stop.wait(interval_s):
                return

    th = threading.Thread(target=sample, name="rt-watch", daemon=True)
    th.start()
    try:
        yield seen
    finally:
        stop.set()
        th.join()


def pair(rt_priority: int, count: int, episodes: int, target: str, max_steps: int,
         pace_hz: float = 50.0, paced_count: int | None = None) -> dict:
    """One set (paced bench serial, back-to-back bench serial, hil); returns the numbers
    and the ratios. ``paced_count`` defaults to the HIL's step budget."""
    load = os.getloadavg()[0]
    rt = ["--rt-priority", str(rt_priority), "--target", target]  # the same firmware build
    with watch_rt(rt_priority + 1) as other_rt:
        paced = edgerl_json(["bench", "serial", "--count",
                             str(paced_count or episodes * max_steps), "--warmup", "25",
                             "--pace-hz", str(pace_hz), "--watchdog-trials", "0", *rt])
        bench = edgerl_json(["bench", "serial", "--count", str(count), "--watchdog-trials",
                             "0", *rt])
        hil = edgerl_json(["hil", "--episodes", str(episodes), "--max-steps", str(max_steps),
                           "--no-estop-check", *rt])
    if hil["control_hz"] != pace_hz:
        raise RuntimeError(f"the HIL ran at {hil['control_hz']} Hz, the paced reference at "
                           f"{pace_hz} Hz: pass --pace-hz {hil['control_hz']}")
    ratio = hil["cmd_rtt_p99_us"] / paced["cmd_rtt_p99_us"]
    ratio_b2b = hil["cmd_rtt_p99_us"] / bench["cmd_rtt_p99_us"]
    return {"load1": round(load, 2), "target": target, "rt_priority": rt_priority,
            "rt_granted": hil.get("rt_granted"), "gc_frozen": hil.get("gc_frozen"),
            "pace_hz": pace_hz,
            "bench_paced_p50_us": round(paced["cmd_rtt_p50_us"], 1),
            "bench_paced_p99_us": round(paced["cmd_rtt_p99_us"], 1),
            "bench_b2b_p50_us": round(bench["cmd_rtt_p50_us"], 1),
            "bench_b2b_p99_us": round(bench["cmd_rtt_p99_us"], 1),
            "hil_p50_us": round(hil["cmd_rtt_p50_us"], 1),
            "hil_p99_us": round(hil["cmd_rtt_p99_us"], 1), "hil_rtt_samples": hil["rtt_samples"],
            "host_ticks_per_step": hil.get("host_ticks_per_step"),
            "hil_link_p99_us": round(hil.get("link_rtt_p99_us") or float("nan"), 1),
            "rtt_p99_vs_link": hil.get("rtt_p99_vs_link"), "ratio": round(ratio, 3),
            "met_2x": ratio <= TARGET_RATIO, "ratio_b2b": round(ratio_b2b, 3),
            "met_2x_b2b": ratio_b2b <= TARGET_RATIO, "other_rt": dict(sorted(other_rt.items()))}


def summarize(rows: list[dict]) -> dict:
    """How many of the :func:`pair` ``rows`` met the 2x goal (against the paced reference and
    against back-to-back), also among the sets without ``other_rt`` threads, and the median
    ratio (``nan`` for no rows)."""
    met = sum(r["met_2x"] for r in rows)
    met_b2b = sum(r["met_2x_b2b"] for r in rows)
    ratios = [r["ratio"] for r in rows]
    return {"summary": f"{met} of {len(rows)} runs with hil p99 <= 2x paced bench serial p99 "
                       f"({met_b2b} against back-to-back)", "met": met, "runs": len(rows),
            "met_b2b": met_b2b, "ratios": ratios,
            "median_ratio": statistics.median(ratios) if ratios else float("nan"),
            "ratios_b2b": [r["ratio_b2b"] for r in rows],
            "loads": [r["load1"] for r in rows],
            "runs_without_other_rt": sum(not r["other_rt"] for r in rows),
            "met_without_other_rt": sum(r["met_2x"] for r in rows if not r["other_rt"])}
