"""The transport floor under ``edgerl deploy``: a bare rclpy ``JointState`` round trip
between two processes (Fast DDS, loopback), paced like a control loop.

Process A publishes a stamped 8-joint ``JointState`` every ``period_s`` and waits for B to
echo it (B re-publishes the message it received); A records publish -> echo received. Paced
round trips pay the wake-ups an idle process pays in a real loop, which back-to-back
ping-pong (``period_s = 0``) hides. State -> command across processes is one such round trip
plus the edit tick, so this is the reference of ``edgerl bench ratios``' ``ros2/e2e_p99``.

:func:`measure` runs A in the calling process (rclpy must not be initialised there) and B as
``python -m edgerl_ros.roundtrip --echo SECONDS``.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from typing import Any

import numpy as np

__all__ = ["echo", "measure", "ping"]

#: Executors the round trip can spin.
EXECUTORS = ("single", "events")


def _qos():
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT,
                      history=HistoryPolicy.KEEP_LAST)


def _executor(kind: str):
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    from rclpy.executors import SingleThreadedExecutor

    return SingleThreadedExecutor()


def _message(stamp_ns: int):
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.name = [f"j{i}" for i in range(8)]
    msg.position = [0.1] * 8
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 10**9)
    return msg


def echo(seconds: float, kind: str) -> None:
    """Process B: re-publish every ``ping`` on ``pong`` for ``seconds``."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from sensor_msgs.msg import JointState

    rclpy.init()
    node = rclpy.create_node("roundtrip_echo")
    pub = node.create_publisher(JointState, "pong", _qos())
    node.create_subscription(JointState, "ping", pub.publish, _qos())
    ex = _executor(kind)
    ex.add_node(node)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            ex.spin_once(timeout_sec=0.1)
    except ExternalShutdownException:  # terminated by A: done
        pass
    rclpy.try_shutdown()


def ping(n: int, period_s: float, kind: str) -> np.ndarray:
    """Process A: ``n`` paced round trips; their times in seconds, ``(n_received, 2)``:
    publish -> the echo in A's callback, and -> its receipt by A's middleware
    (``MessageInfo["received_timestamp"]``; NaN when not reported)."""
    import rclpy
    from sensor_msgs.msg import JointState

    rclpy.init()
    try:
        node = rclpy.create_node("roundtrip_ping")
        got: list[int] = []
        wire: list[int] = []

        def on_pong(msg: JointState, info: Any) -> None:
            got.append(time.time_ns())
            wire.append(int(info.get("received_timestamp") or 0))

        node.create_subscription(JointState, "pong", on_pong, _qos())
        pub = node.create_publisher(JointState, "ping", _qos())
        ex = _executor(kind)
        ex.add_node(node)
        deadline = time.monotonic() + 10.0  # discovery
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            ex.spin_once(timeout_sec=0.05)
        time.sleep(0.5)
        rtt = []
        for _ in range(n):
            before = len(got)
            t0 = time.time_ns()
            pub.publish(_message(t0))
            wait_end = time.monotonic() + 0.1
            while len(got) == before and time.monotonic() < wait_end:
                ex.spin_once(timeout_sec=0.05)
            if len(got) > before:
                rtt.append(((got[-1] - t0) * 1e-9, (wire[-1] - t0) * 1e-9 if wire[-1] else
                            float("nan")))
            if period_s > 0:
                time.sleep(period_s)
    finally:
        rclpy.try_shutdown()
    return np.asarray(rtt, dtype=np.float64).reshape(-1, 2)


def measure(n: int = 1000, period_s: float = 0.005, kind: str = "single",
            domain_id: int | None = None, rt_priority: int = 0) -> dict[str, Any]:
    """``n`` paced round trips against an echo process; p50 / p99 in microseconds after the
    first ``min(50, n // 10)`` (warm-up): ``rtt_*`` to the echo in the caller's callback,
    ``rtt_wire_*`` to its receipt by the caller's middleware. ``domain_id`` (default: a random
    one in 1..200) keeps the two processes off other ROS 2 traffic; ``rt_priority`` > 0 runs
    both sides SCHED_FIFO at that priority where permitted (as ``edgerl deploy
    --rt-priority`` runs the state -> command nodes; ``rt_applied`` says whether it was).

    Raises ``ValueError`` on bad sizes, ``RuntimeError`` when fewer than 90 % come back."""
    if n < 10 or period_s < 0 or kind not in EXECUTORS:
        raise ValueError(f"round trip: n must be >= 10 (got {n}), period_s >= 0 (got "
                         f"{period_s}) and kind one of {EXECUTORS} (got {kind!r})")
    domain = int(domain_id if domain_id is not None else random.randint(1, 200))
    from edgerl_ros.common import RT_PRIORITY_ENV

    env = {**os.environ, "ROS_DOMAIN_ID": str(domain)}
    if rt_priority:
        env[RT_PRIORITY_ENV] = str(int(rt_priority))
    seconds = 15.0 + n * (period_s + 0.002)
    child = subprocess.Popen([sys.executable, "-m", "edgerl_ros.roundtrip", "--echo",
                              str(seconds), "--executor", kind], env=env)
    saved = os.environ.get("ROS_DOMAIN_ID")
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    policy = _fifo(rt_priority)
    try:
        rtt = ping(n, period_s, kind)
    finally:
        _restore(policy)
        if saved is None:
            os.environ.pop("ROS_DOMAIN_ID", None)
        else:
            os.environ["ROS_DOMAIN_ID"] = saved
        child.terminate()
        child.wait(timeout=10)
    if len(rtt) < 0.9 * n:
        raise RuntimeError(f"rclpy round trip: only {len(rtt)} of {n} came back in 100 ms")
    rtt = rtt[min(50, len(rtt) // 10):]
    cb, wire = rtt[:, 0], rtt[:, 1][np.isfinite(rtt[:, 1])]

    def pct(x: np.ndarray, q: float) -> float:
        return float(np.percentile(x, q) * 1e6) if x.size else float("nan")

    return {"executor": kind, "period_ms": period_s * 1e3, "n": int(len(rtt)),
            "rtt_p50_us": pct(cb, 50), "rtt_p99_us": pct(cb, 99),
            "rtt_wire_p50_us": pct(wire, 50), "rtt_wire_p99_us": pct(wire, 99),
            "rt_priority": int(rt_priority), "rt_applied": policy is not None,
            "domain_id": domain, "load1": os.getloadavg()[0]}


def _fifo(priority: int) -> tuple[int, int] | None:
    """SCHED_FIFO ``priority`` for the calling thread (the threads rclpy starts inherit it);
    the previous (policy, priority) to restore, or None when not asked or not permitted."""
    from edgerl.runtime.loop_scheduler import set_fifo

    if not priority:
        return None
    old = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
    return old if set_fifo(int(priority)) else None


def _restore(old: tuple[int, int] | None) -> None:
    if old is not None:
        os.sched_setscheduler(0, old[0], os.sched_param(old[1]))


def main(argv: list[str] | None = None) -> int:
    """The echo side (``--echo SECONDS``), started by :func:`measure`."""
    ap = argparse.ArgumentParser(prog="python -m edgerl_ros.roundtrip",
                                 description="echo side of the rclpy round trip")
    ap.add_argument("--echo", type=float, required=True, help="seconds to echo")
    ap.add_argument("--executor", choices=EXECUTORS, default="single")
    args = ap.parse_args(argv)
    from edgerl_ros.common import process_realtime

    process_realtime()  # $EDGERL_RT_PRIORITY, as the graph's nodes
    echo(args.echo, args.executor)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
