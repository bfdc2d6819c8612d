"""The ROS 2 path from operator interventions to `edgerl finetune`, over real rclpy: a deploy
with ``--record-transitions`` while this test publishes overrides on
``operator/intervention`` and `edgerl record` (its own process) joins the graph; the edit
node's transitions file carries the overrides and fine-tunes a bundle, and the counts
`edgerl record` prints match what `edgerl replay` reads back. Plus the refusals."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from edgerl.apps.cli import main
from tests.helpers.task_bundles import write_task_bundle

pytestmark = pytest.mark.ros

OVERRIDES = (0.4, -0.5, 0.3)  # cart_force, inside the task's [-1, 1]; no rate limit
HOLD_S, GAP_S = 0.6, 0.4


def _wait(cond, timeout_s: float, what: str, procs=()) -> None:
    t_end = time.monotonic() + timeout_s
    while not cond():
        for p in procs:
            assert p.poll() is None, f"{p.args[3]} exited early ({p.returncode}) waiting {what}"
        assert time.monotonic() < t_end, f"timed out waiting for {what}"
        time.sleep(0.05)


def _operator(ros, sent: list, key) -> None:
    """Publish the overrides (each held, then released) as a person's console would, signed
    with the operator ``key`` the deployed edit node trusts (``EDGERL_OPERATOR_KEY``)."""
    from edgerl_ros.common import TOPICS
    from edgerl_ros.operator import OperatorPublisher

    console = OperatorPublisher(ros.node, key)
    pub = console.intervention_pub

    def subscribers() -> set:
        return {i.node_name for i in ros.node.get_subscriptions_info_by_topic(
            "/" + TOPICS["intervention"])}

    # the edit node and the recorder both see every record (reliable, discovered first)
    _wait(lambda: {"edit_policy_node", "edgerl_record"} <= subscribers() and
          pub.get_subscription_count() >= 3, 30, "intervention subscribers")
    for value in OVERRIDES:
        for kind, vals in (("override", [value]), ("release", [])):
            console.intervene(kind, vals)
            sent.append((kind, vals))
            time.sleep(HOLD_S if kind == "override" else GAP_S)


@pytest.fixture(scope="module")
def session(tmp_path_factory, rclpy_ok):
    """Run the scenario once: deploy (sim robot, 6 s) + `edgerl record` + the operator."""
    from edgerl_ros.common import STATE_QOS, TOPICS
    from edgerl_ros.graph_config import ros_env
    from edgerl_ros.session import MonitorSession
    from sensor_msgs.msg import JointState

    tmp = tmp_path_factory.mktemp("record")
    bundle = write_task_bundle(tmp / "bundle")
    domain = random.randint(1, 200)
    env = ros_env(domain)
    from edgerl.contract.operator_auth import ENV_KEY, OperatorKey

    key = OperatorKey.generate("console")
    env[ENV_KEY] = str(key.save(tmp / "operator.key"))
    paths = {"transitions": tmp / "transitions.mcap", "topics": tmp / "topics.mcap"}
    deploy = subprocess.Popen(
        [sys.executable, "-m", "edgerl.apps.cli", "deploy", "--bundle", str(bundle), "--duration",
         "6", "--domain-id", str(domain), "--min-success", "0", "--json",
         "--record-transitions", str(paths["transitions"])],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record = subprocess.Popen(
        [sys.executable, "-m", "edgerl.apps.cli", "record", str(paths["topics"]), "--domain-id",
         str(domain), "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    sent: list = []
    try:
        with MonitorSession(env, "test_operator") as ros:
            states: list = []
            ros.node.create_subscription(JointState, TOPICS["state"], states.append, STATE_QOS)
            ros.spin()
            _wait(lambda: len(states) >= 10, 120, "the sim robot's states", (deploy, record))
            _operator(ros, sent, key)
        deploy_out, deploy_err = deploy.communicate(timeout=120)
        time.sleep(0.5)
        record.send_signal(signal.SIGINT)  # the user's Ctrl-C
        rec_out, rec_err = record.communicate(timeout=30)
    finally:
        for p in (deploy, record):
            if p.poll() is None:
                p.kill()
                p.wait()
    return {"bundle": bundle, "tmp": tmp, "sent": sent, **paths,
            "deploy": (deploy.returncode, deploy_out, deploy_err),
            "record": (record.returncode, rec_out, rec_err)}


@pytest.mark.slow  # ~40-60 s on the loaded 2-core VM (the deploy's start-up dominates)
def test_deploy_transitions_carry_the_overrides_and_finetune_on_them(session):
    from edgerl.contract.intervention_log import read_recording

    rc, out, err = session["deploy"]
    assert rc == 0, err[-2000:]
    result = json.loads(out)
    assert result["record_transitions"] == str(session["transitions"])
    assert result["transitions_dropped"] == 0
    ticks, ivs = read_recording(session["transitions"])  # finished: the summary reads
    # every accepted record, in order, with the published command
    assert [(iv.kind, iv.command.tolist()) for iv in ivs] == \
        [(k, pytest.approx(v)) for k, v in session["sent"]]
    assert len(ticks["t"]) >= result["transitions_recorded"] > 100
    on = ticks["intervened"]
    assert 10 <= on.sum() < len(on)
    # each intervened tick lies in an override's window and executed its command (the
    # window ends when the node receives the release: within 0.5 s of its stamp, or the
    # node would have refused it as stale)
    overrides = [iv for iv in ivs if iv.kind == "override"]
    releases = [iv for iv in ivs if iv.kind == "release"]
    for t, cmd in zip(ticks["t"][on], ticks["command"][on], strict=True):
        k = max(i for i, iv in enumerate(overrides) if iv.stamp_s <= t)
        assert t <= releases[k].stamp_s + 0.5, (t, releases[k].stamp_s)
        assert cmd[0] == pytest.approx(overrides[k].command[0])
    # a start opens a run of intervened ticks; outside the windows the policy commanded
    starts = np.flatnonzero(ticks["start"])
    assert 1 <= len(starts) <= len(OVERRIDES) and on[starts].all()
    assert not any(on[i - 1] and ticks["episode"][i - 1] == ticks["episode"][i]
                   for i in starts if i > 0)

    out_bundle = session["tmp"] / "finetuned"
    assert main(["finetune", "--interventions", str(session["transitions"]), "--bundle",
                 str(session["bundle"]), "--out", str(out_bundle), "--steps", "10",
                 "--json"]) == 0
    assert (out_bundle / "manifest.json").is_file() and (out_bundle / "policy.onnx").is_file()


@pytest.mark.slow  # shares the scenario above
def test_record_beside_a_deploy_counts_what_replay_reads(session, capsys):
    rc, out, err = session["record"]
    assert rc == 0, err[-2000:]
    rec = json.loads(out)
    assert rec["stopped_by"] == "SIGINT" and rec["file"] == str(session["topics"])
    counts = {r["topic"]: r["messages"] for r in rec["topics"]}
    assert counts["/robot/joint_states"] > 100 and counts["/robot/command"] > 100
    assert counts["/operator/intervention"] == len(session["sent"]) == 2 * len(OVERRIDES)
    assert rec["messages"] == sum(counts.values())

    capsys.readouterr()
    assert main(["replay", str(session["topics"]), "--no-plot", "--json"]) == 0
    replayed = {r["topic"]: r["messages"] for r in json.loads(capsys.readouterr().out)["topics"]}
    assert replayed == {t: n for t, n in counts.items() if n}

    from edgerl_ros.recording import read_recording

    names = [m.name[0] for _, m in read_recording(session["topics"])["/operator/intervention"]]
    assert names == [k for k, _ in session["sent"]]


def test_record_refuses_an_existing_file_and_an_unwritable_path(tmp_path, capsys):
    existing = tmp_path / "old.mcap"
    existing.write_bytes(b"keep me")
    assert main(["record", str(existing), "--duration", "1"]) == 1
    assert f"{existing}: exists; pass --force" in capsys.readouterr().err
    assert existing.read_bytes() == b"keep me"
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["record", str(blocker / "sub" / "x.mcap"), "--duration", "1"]) == 1
    assert f"{blocker} is not a directory" in capsys.readouterr().err
    assert main(["record", str(tmp_path), "--duration", "1"]) == 1
    assert "is a directory" in capsys.readouterr().err
    assert main(["record", str(tmp_path / "y.mcap"), "--duration", "0"]) == 1
    assert "duration must be > 0" in capsys.readouterr().err


def test_edit_node_configure_fails_naming_an_unwritable_transitions_file(
        rclpy_context, session_bundle, tmp_path, capfd):
    from edgerl_ros.edit_policy_node import EditPolicyNode
    from rclpy.lifecycle import TransitionCallbackReturn as R
    from rclpy.parameter import Parameter

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    node = EditPolicyNode(context=rclpy_context, parameter_overrides=[
        Parameter("bundle", value=str(session_bundle)),
        Parameter("transitions_file", value=str(blocker / "t.mcap"))])
    try:
        assert node.trigger_configure() == R.FAILURE
        assert node.loop is None and node.transitions is None
        err = capfd.readouterr().err
        assert "configure failed: transitions_file" in err, err
        assert f"{blocker} is not a directory" in err, err
    finally:
        node.shutdown()
        node.destroy_node()
