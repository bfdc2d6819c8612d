"""The transport floor under ``edgerl deploy``: a bare rclpy ``JointState`` round trip
between two processes (Fast DDS, loopback), paced like a control loop.

Process A publishes a stamped 8-joint ``JointState`` every ``--period-ms`` and waits for B to
echo it (B re-publishes the message it received); A records publish -> echo received. Paced
round trips pay the wake-ups an idle process pays in a real loop, which back-to-back
ping-pong (``--period-ms 0``) hides. State -> command across processes is one such round
trip plus the edit tick, so this is the floor of ``edgerl deploy`` without ``--compose``.

Usage: ``.venv/bin/python benchmarks/ros2_roundtrip.py [--n 1000] [--period-ms 5]
[--executor single|events] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


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
    from sensor_msgs.msg import JointState

    rclpy.init()
    node = rclpy.create_node("roundtrip_echo")
    pub = node.create_publisher(JointState, "pong", _qos())
    node.create_subscription(JointState, "ping", pub.publish, _qos())
    ex = _executor(kind)
    ex.add_node(node)
    from rclpy.executors import ExternalShutdownException

    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            ex.spin_once(timeout_sec=0.1)
    except ExternalShutdownException:  # terminated by A: done
        pass
    rclpy.try_shutdown()


def ping(n: int, period_s: float, kind: str) -> np.ndarray:
    """Process A: ``n`` paced round trips; returns their times (s), ``(n_received,)``."""
    import rclpy
    from sensor_msgs.msg import JointState

    rclpy.init()
    node = rclpy.create_node("roundtrip_ping")
    got: list[int] = []
    node.create_subscription(JointState, "pong", lambda m: got.append(time.time_ns()), _qos())
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
            rtt.append((got[-1] - t0) * 1e-9)
        if period_s > 0:
            time.sleep(period_s)
    rclpy.try_shutdown()
    return np.asarray(rtt)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="round trips")
    ap.add_argument("--period-ms", type=float, default=5.0, help="pause between round trips")
    ap.add_argument("--executor", choices=("single", "events"), default="single")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--echo", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.echo:
        echo(args.echo, args.executor)
        return 0
    seconds = 15.0 + args.n * (args.period_ms * 1e-3 + 0.002)
    child = subprocess.Popen([sys.executable, __file__, "--echo", str(seconds), "--executor",
                              args.executor], env=os.environ)
    try:
        rtt = ping(args.n, args.period_ms * 1e-3, args.executor)
    finally:
        child.terminate()
        child.wait(timeout=10)
    if rtt.size < 0.9 * args.n:
        print(f"only {rtt.size} of {args.n} round trips came back", file=sys.stderr)
        return 1
    rtt = rtt[min(50, rtt.size // 10):]
    out = {"executor": args.executor, "period_ms": args.period_ms, "n": int(rtt.size),
           "rtt_p50_us": float(np.percentile(rtt, 50) * 1e6),
           "rtt_p99_us": float(np.percentile(rtt, 99) * 1e6),
           "load1": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"rclpy JointState round trip ({args.executor}, every {args.period_ms:g} ms): "
              f"p50 {out['rtt_p50_us']:.0f} us, p99 {out['rtt_p99_us']:.0f} us "
              f"(n={out['n']}, load {out['load1']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
