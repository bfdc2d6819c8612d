"""MCAP recording of ROS 2 topics in the rosbag2 layout (``ros2`` profile, ``cdr`` messages,
``ros2msg`` schemas with their dependencies appended), readable by Foxglove, ``ros2 bag`` and
``mcap_ros2.reader``.

Messages are written as the exact CDR bytes that arrived (raw subscriptions), so nothing is
re-encoded; the schema text is assembled from the installed ``.msg`` files.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from pathlib import Path

__all__ = ["McapRecorder", "message_definition"]

_BUILTIN = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
            "int32", "uint32", "int64", "uint64", "string", "wstring"}
_SEP = "=" * 80


def _share_dirs() -> list[Path]:
    dirs = [Path(p) / "share" for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
            if p]
    dirs.append(Path(sys.prefix) / "share")
    return dirs


def _msg_file(datatype: str) -> Path:
    pkg, _, name = datatype.replace("/msg/", "/").partition("/")
    for share in _share_dirs():
        path = share / pkg / "msg" / f"{name}.msg"
        if path.is_file():
            return path
    raise FileNotFoundError(f"no .msg file for {datatype} under {[str(d) for d in _share_dirs()]}")


def _field_types(text: str, pkg: str) -> list[str]:
    """Complex field types used by a .msg text, as ``pkg/msg/Name``."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or "=" in line.split()[0:2][-1]:
            continue
        base = re.sub(r"\[.*\]$", "", line.split()[0])
        base = re.sub(r"<=\d+$", "", base)
        if base in _BUILTIN:
            continue
        if "/" in base:
            p, _, n = base.partition("/")
            out.append(f"{p}/msg/{n.split('/')[-1]}")
        elif base == "Header":
            out.append("std_msgs/msg/Header")
        else:
            out.append(f"{pkg}/msg/{base}")
    return out


def message_definition(datatype: str) -> str:
    """The concatenated ``ros2msg`` definition of ``datatype`` (e.g. ``sensor_msgs/msg/JointState``)
    followed by every nested type, as rosbag2 writes it."""
    main = _msg_file(datatype).read_text()
    parts, seen = [main], {datatype}
    queue = _field_types(main, datatype.split("/")[0])
    while queue:
        dep = queue.pop(0)
        if dep in seen:
            continue
        seen.add(dep)
        text = _msg_file(dep).read_text()
        parts.append(f"{_SEP}\nMSG: {dep.replace('/msg/', '/')}\n{text}")
        queue.extend(_field_types(text, dep.split("/")[0]))
    return "\n".join(parts)


class McapRecorder:
    """Thread-safe MCAP writer for raw CDR messages.

    Args:
        path: Output ``.mcap`` file (parent directories are created).
    """

    def __init__(self, path: str | Path) -> None:
        from mcap.writer import CompressionType, Writer

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "wb")  # noqa: SIM115 -- closed in close()
        self._writer = Writer(self._fh, compression=CompressionType.ZSTD)
        self._writer.start(profile="ros2", library=__package__)  # "edgerl_ros"
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()
        self.count = 0
        self._closed = False

    def add_topic(self, topic: str, datatype: str) -> None:
        """Register ``topic`` carrying ``datatype`` (``pkg/msg/Name``)."""
        with self._lock:
            if datatype not in self._schemas:
                self._schemas[datatype] = self._writer.register_schema(
                    name=datatype, encoding="ros2msg",
                    data=message_definition(datatype).encode())
            self._channels[topic] = self._writer.register_channel(
                topic=topic, message_encoding="cdr", schema_id=self._schemas[datatype])
            self._seq[topic] = 0

    def write(self, topic: str, cdr: bytes, log_time_ns: int | None = None) -> None:
        """Append one serialized message (as received by a raw subscription)."""
        t = time.time_ns() if log_time_ns is None else log_time_ns
        with self._lock:
            if self._closed:
                return
            self._writer.add_message(channel_id=self._channels[topic], log_time=t,
                                     publish_time=t, data=bytes(cdr),
                                     sequence=self._seq[topic])
            self._seq[topic] += 1
            self.count += 1

    def counts(self) -> dict[str, int]:
        """Messages written per registered topic (0 for a topic that got none)."""
        with self._lock:
            return dict(self._seq)

    def close(self) -> None:
        """Finish the file (summary, index); idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._writer.finish()
            self._fh.close()


# --- reading back (no rclpy needed) ----------------------------------------------------------
def read_recording(path: str | Path) -> dict[str, list[tuple[int, object]]]:
    """``{topic: [(log_time_ns, decoded message), ...]}`` in log-time order.

    Raises:
        ValueError: not an MCAP file or not decodable as ROS 2 (message names the file).
    """
    import warnings

    from mcap.reader import make_reader

    with warnings.catch_warnings():
        # mcap_ros2's vendored msg parser (lark) imports deprecated stdlib modules
        warnings.simplefilter("ignore", DeprecationWarning)
        from mcap_ros2.decoder import DecoderFactory

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such recording")
    out: dict[str, list[tuple[int, object]]] = {}
    try:
        with open(path, "rb") as fh:
            reader = make_reader(fh, decoder_factories=[DecoderFactory()])
            for _schema, channel, message, decoded in reader.iter_decoded_messages(
                    log_time_order=True):
                out.setdefault(channel.topic, []).append((message.log_time, decoded))
    except Exception as exc:  # mcap raises several types for corrupt input
        raise ValueError(f"{path}: not a readable ROS 2 MCAP file ({exc})") from exc
    return out


def summarize_recording(data: dict[str, list[tuple[int, object]]]) -> list[dict[str, object]]:
    """One row per topic: messages, rate (Hz) and duration (s) from the log times."""
    rows = []
    for topic in sorted(data):
        times = [t for t, _ in data[topic]]
        span = (times[-1] - times[0]) * 1e-9 if len(times) > 1 else 0.0
        rows.append({"topic": topic, "messages": len(times), "duration_s": span,
                     "rate_hz": (len(times) - 1) / span if span > 0 else float("nan")})
    return rows


def plot_recording(data: dict[str, list[tuple[int, object]]], out: str | Path,
                   state_topic: str = "/robot/joint_states",
                   command_topic: str = "/robot/command") -> Path:
    """PNG with the state, the commands (and state->command latency from the command stamps)
    over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    t_ref = min((v[0][0] for v in data.values() if v), default=0)
    for ax, topic in ((axes[0], state_topic), (axes[1], command_topic)):
        msgs = data.get(topic, [])
        if not msgs:
            ax.set_title(f"{topic}: no messages")
            continue
        t = [(lt - t_ref) * 1e-9 for lt, _ in msgs]
        names = list(msgs[0][1].name)
        for j, name in enumerate(names):
            field_vals = [_first_field(m) for _, m in msgs]
            ax.plot(t, [v[j] if j < len(v) else float("nan") for v in field_vals], label=name)
        ax.set_title(topic)
        ax.legend(loc="upper right", fontsize="small")
    cmds = data.get(command_topic, [])
    if cmds:
        stamped = [(lt, m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec)
                   for lt, m in cmds]
        stamped = [(lt, st) for lt, st in stamped if st > 0]  # 0: computed before any state
        axes[2].plot([(lt - t_ref) * 1e-9 for lt, _ in stamped],
                     [(lt - st) * 1e-3 for lt, st in stamped], ".", ms=2)
        axes[2].set_ylabel("state -> command (us)")
    axes[2].set_xlabel("time (s)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def _first_field(msg: object) -> list[float]:
    for key in ("position", "effort", "velocity"):
        vals = list(getattr(msg, key, []) or [])
        if vals:
            return vals
    return []
