"""The edit node's inline tick without other processes: an EditPolicyNode (trigger state) and a
publisher thread in one process at RATE Hz; prints the node's tick time, the part spent in the
command publish and the policy part (docs/ros2.md).

Usage: ``python -m edgerl.apps.experiments.probes.edit_node_inprocess BUNDLE [--rate 200]
[--seconds 4] [--json]`` (BUNDLE: e.g. the one the ``deploy_trigger`` experiment runs on).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import rclpy
    from edgerl_ros.common import STATE_QOS, TOPICS
    from edgerl_ros.edit_policy_node import EditPolicyNode
    from edgerl_ros.messages import make_joint_state
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    rclpy.init()
    node = EditPolicyNode(parameter_overrides=[Parameter("bundle", value=args.bundle),
                                               Parameter("trigger", value="state")])
    node.trigger_configure()
    node.trigger_activate()
    probe = rclpy.create_node("state_probe")
    pub = probe.create_publisher(JointState, TOPICS["state"], STATE_QOS)
    names = node.spec.observation.names
    stop = threading.Event()

    def publish_states() -> None:
        while not stop.is_set():
            pub.publish(make_joint_state(names, np.zeros(len(names)), time.time_ns()))
            time.sleep(1.0 / args.rate)

    executor = SingleThreadedExecutor()
    executor.add_node(node)
    thread = threading.Thread(target=publish_states, daemon=True)
    thread.start()
    t_end = time.perf_counter() + args.seconds
    while time.perf_counter() < t_end:
        executor.spin_once(timeout_sec=0.05)
    stop.set()
    thread.join()
    m = node.loop.metrics.summary()
    out = {"ticks": m["ticks"], "tick_p50_us": m["tick_compute_p50_us"],
           "tick_p99_us": m["tick_compute_p99_us"], "publish_p50_us": m["send_p50_us"],
           "policy_p50_us": m["tick_policy_p50_us"], "policy_p99_us": m["tick_policy_p99_us"],
           "load1": os.getloadavg()[0]}
    node.shutdown()
    node.destroy_node()
    probe.destroy_node()
    rclpy.shutdown()
    print(json.dumps(out, indent=1) if args.json else
          "  ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                    for k, v in out.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
