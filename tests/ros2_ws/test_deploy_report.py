"""What `edgerl deploy` reports: only the edit node's commands in rate and latency (publisher
GID), and success as k/n episodes against --min-success (not "any episode succeeded")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from edgerl_ros.graph import DeployConfig, DeployError
from edgerl_ros.verdict import DEFAULT_MIN_SUCCESS, episode_verdict

from edgerl.apps.cli import main


class TestEpisodeVerdict:
    def test_by_default_k_of_n_is_reported_and_not_judged(self):
        """Without a threshold the episodes are reported as k/n and judged neither way (a
        0.75 policy exited 2 under a default of 1.0); asked for all, 2 of 8 fails (deploy once
        said ok when successes > 0)."""
        v = episode_verdict(2.0, 8.0)
        assert DEFAULT_MIN_SUCCESS is None
        assert v == {"success": None, "success_rate": 0.25, "successes_of": "2/8",
                     "min_success": None}
        assert episode_verdict(2.0, 8.0, 1.0)["success"] is False

    def test_threshold_is_inclusive_and_needs_an_episode(self):
        assert episode_verdict(2.0, 8.0, 0.25)["success"] is True
        assert episode_verdict(8.0, 8.0, 1.0)["success"] is True
        assert episode_verdict(7.0, 8.0, 1.0)["success"] is False
        none = episode_verdict(float("nan"), float("nan"), 0.0)
        assert none["success"] is False and none["successes_of"] == "0/0"

    def test_bad_threshold_is_a_named_error(self, tmp_path, capsys):
        with pytest.raises(ValueError, match="min_success"):
            episode_verdict(1.0, 1.0, 1.5)
        with pytest.raises(DeployError, match="min_success"):
            DeployConfig(bundle=tmp_path, min_success=-0.1)
        assert main(["deploy", "--bundle", str(tmp_path), "--min-success", "2"]) == 1
        assert "--min-success must be in 0..1" in capsys.readouterr().err


INTRUDER = textwrap.dedent("""
    import sys, time, rclpy
    from edgerl_ros.common import COMMAND_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state
    rclpy.init()
    node = rclpy.create_node("intruder")
    pub = node.create_publisher(__import__("sensor_msgs.msg").msg.JointState,
                                TOPICS["command"], COMMAND_QOS)
    names = sys.argv[1].split(",")
    t_end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < t_end:
        pub.publish(make_joint_state(names, [0.0] * len(names), time.time_ns(), "effort"))
        time.sleep(0.01)
""")


@pytest.mark.ros
@pytest.mark.slow
def test_rate_and_latency_count_only_the_edit_nodes_commands(session_bundle, ros_domain,
                                                             capsys):
    """A second publisher at 100 Hz on robot/command does not count: counting every
    publisher makes cmd_rate_hz about 130-150 for a 50 Hz loop."""
    from edgerl.contract.spec import load_bundle_manifest

    names = ",".join(load_bundle_manifest(session_bundle).action.names)
    intruder = subprocess.Popen([sys.executable, "-c", INTRUDER, names, "60"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        rc = main(["deploy", "--bundle", str(session_bundle), "--duration", "6", "--json",
                   "--domain-id", str(ros_domain), "--min-success", "0"])
    finally:
        intruder.kill()
        intruder.wait()
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    assert out["configured_rate_hz"] == 50.0
    # ours alone: ~50 Hz (the intruder's 100 Hz counted too would read ~150); 10 % for the
    # burstiness of a loaded machine (53.2 Hz seen in CI beside a soak)
    assert abs(out["cmd_rate_hz"] - 50.0) / 50.0 < 0.10, out["cmd_rate_hz"]
    assert out["commands"] <= 50 * 6  # 5 s after warm-up at 50 Hz, none of the intruder's
    assert out["commands_foreign"] >= 200
    # the robot's end-to-end latency also counts only the edit node's commands: it measures
    # the same path as the monitor (state stamp -> command in), so the medians are alike;
    # the intruder's commands, stamped when sent, pulled the robot's median far below the
    # monitor's (measured 2.6 vs 10.7 ms without the filter, 7.1 vs 7.5 ms with it)
    assert int(out["robot"]["commands_foreign"]) >= 200
    assert out["e2e_latency_p50_us"] > 0.5 * out["monitor_latency_p50_us"], out
    k, n = (int(x) for x in out["successes_of"].split("/"))
    assert out["episodes"] == n >= 1 and out["min_success"] == 0.0 and out["success"] is True
    assert out["success_rate"] == pytest.approx(k / n)
