"""MCAP recording in the rosbag2 layout: CDR bytes from rclpy, ros2msg schemas with their
dependencies; read back with mcap_ros2 (what Foxglove and `ros2 bag` also parse)."""

from __future__ import annotations

import numpy as np
import pytest
from edgerl_ros.recording import (
    McapRecorder,
    message_definition,
    read_recording,
    summarize_recording,
)


def test_message_definition_appends_dependencies_once():
    text = message_definition("trajectory_msgs/msg/JointTrajectory")
    deps = [line for line in text.splitlines() if line.startswith("MSG: ")]
    assert deps == sorted(set(deps), key=deps.index)  # no duplicates
    assert {"MSG: std_msgs/Header", "MSG: builtin_interfaces/Time",
            "MSG: trajectory_msgs/JointTrajectoryPoint",
            "MSG: builtin_interfaces/Duration"} == set(deps)
    with pytest.raises(FileNotFoundError, match="no .msg file"):
        message_definition("nope_msgs/msg/Nothing")


def test_round_trip_through_mcap_ros2(tmp_path):
    from edgerl_ros.messages import make_joint_state
    from mcap.reader import make_reader
    from rclpy.serialization import serialize_message

    path = tmp_path / "x.mcap"
    rec = McapRecorder(path)
    rec.add_topic("/robot/joint_states", "sensor_msgs/msg/JointState")
    for i in range(5):
        msg = make_joint_state(["a", "b"], np.array([i, -i], float), 1_000_000_000 + i)
        rec.write("/robot/joint_states", serialize_message(msg), 2_000_000_000 + i * 20_000_000)
    rec.close()
    rec.close()  # idempotent
    with open(path, "rb") as fh:
        reader = make_reader(fh)
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        (schema,) = summary.schemas.values()
        assert schema.encoding == "ros2msg" and schema.name == "sensor_msgs/msg/JointState"
        assert {c.message_encoding for c in summary.channels.values()} == {"cdr"}
    data = read_recording(path)
    msgs = [m for _, m in data["/robot/joint_states"]]
    assert [list(m.position) for m in msgs] == [[float(i), float(-i)] for i in range(5)]
    assert msgs[3].header.stamp.nanosec == 3 and list(msgs[0].name) == ["a", "b"]
    (row,) = summarize_recording(data)
    assert row["messages"] == 5 and row["rate_hz"] == pytest.approx(50.0)
