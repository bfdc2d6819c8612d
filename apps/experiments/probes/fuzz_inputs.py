"""Fuzz the input checks with ``--n`` inputs each (docs/reliability.md, "Fuzzing").

Targets:
  c_frame_parser    firmware/src/wire.c through the host build's ``build/fuzz_parser`` driver
                    (the ASan/UBSan build when ``make -C firmware sanitize`` made it)
  py_frame_parser   edgerl.contract.wire FrameParser + codec.decode
  ros_message_checks edgerl_ros.messages: stamped_state / joint_state_values (commands) /
                    trajectory_to_chunk on random JointState / JointTrajectory messages
The frame inputs are edgerl.contract.wire.fuzz's corpus (random bytes, and valid streams with one
CRC-detectable mutation). A **crash** is an exception other than the named refusal (Python) or
a driver that died or answered short (C); an **illegal accept** is an accepted frame that was
not sent unmodified, or an accepted message whose values are not finite, do not fit float32,
have the wrong shape, or (chunks) times that do not increase.

Usage: ``python -m edgerl.apps.experiments.probes.fuzz_inputs --n 1000000 [--json] [--seed 1]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from edgerl.apps.experiments.probes import CHECKOUT as ROOT

sys.path.insert(0, str(ROOT / "ros2_ws" / "src" / "edgerl_ros"))
CHUNK = 50_000  # inputs generated and checked per batch (bounded memory)
F32_MAX = float(np.finfo(np.float32).max)
VALUES = (0.0, 1.0, -2.5, 1e-3, float("nan"), float("inf"), float("-inf"), 1e39, -1e39, 1e308,
          -1e308, F32_MAX, -F32_MAX, 5e-324, 3.5e38)


def _c_driver() -> str:
    build = ROOT / "firmware" / "build"
    for name in ("fuzz_parser_asan", "fuzz_parser"):
        if (build / name).exists():
            return str(build / name)
    subprocess.run(["make", "-C", str(ROOT / "firmware"), "host"], check=True,
                   capture_output=True)
    return str(build / "fuzz_parser")


def fuzz_c(n: int, seed: int) -> dict:
    """The C parser, in batches of CHUNK records per driver process."""
    from edgerl.contract.wire.framing import Frame
    from edgerl.contract.wire.fuzz import is_legal, make_inputs

    driver = _c_driver()
    crashes = illegal = accepted = 0
    busy = 0.0
    for b0 in range(0, n, CHUNK):
        inputs = make_inputs(min(CHUNK, n - b0), seed=seed + b0)
        blob = b"".join(struct.pack("<I", len(s)) + s for s, _ in inputs)
        t0 = time.perf_counter()
        res = subprocess.run([driver], input=blob, capture_output=True, timeout=600)
        busy += time.perf_counter() - t0
        results, cur = [], []
        for line in res.stdout.decode().splitlines():
            parts = line.split()
            if parts[0] == "F":
                cur.append(Frame(int(parts[1]), int(parts[2]),
                                 bytes.fromhex(parts[3]) if len(parts) > 3 else b""))
            else:
                results.append(cur)
                cur = []
        if res.returncode != 0 or len(results) != len(inputs):
            crashes += len(inputs) - len(results) or 1
        for (_, legal), frames in zip(inputs, results):
            accepted += len(frames)
            illegal += not is_legal(frames, legal)
    return {"target": "c_frame_parser", "inputs": n, "rate_per_s": n / busy,
            "crashes": crashes, "illegal_accepts": illegal, "accepted_frames": accepted,
            "driver": Path(driver).name}


def fuzz_py(n: int, seed: int) -> dict:
    from edgerl.contract.wire import codec
    from edgerl.contract.wire.framing import FrameParser
    from edgerl.contract.wire.fuzz import is_legal, make_inputs

    crashes = illegal = accepted = 0
    busy = 0.0
    examples: list[str] = []
    for b0 in range(0, n, CHUNK):
        inputs = make_inputs(min(CHUNK, n - b0), seed=seed + b0)
        t0 = time.perf_counter()
        out = []
        for stream, _ in inputs:
            try:
                frames = FrameParser().feed(stream)
                for f in frames:
                    codec.decode(f)
                out.append(frames)
            except Exception as exc:  # a crash is what we count
                crashes += 1
                out.append([])
                if len(examples) < 3:
                    examples.append(repr(exc))
        busy += time.perf_counter() - t0
        for (_, legal), frames in zip(inputs, out):
            accepted += len(frames)
            illegal += not is_legal(frames, legal)
    return {"target": "py_frame_parser", "inputs": n, "rate_per_s": n / busy,
            "crashes": crashes, "illegal_accepts": illegal, "accepted_frames": accepted,
            "examples": examples}


# --- ROS messages ---------------------------------------------------------------------------
OBS = ["x", "v", "th", "w"]
ACT = ["f0", "f1"]


def _names(rng: random.Random, good: list[str]) -> list[str]:
    k = rng.randrange(6)
    names = list(good)
    if k == 0:
        rng.shuffle(names)
    elif k == 1:
        names = names[:-1]
    elif k == 2:
        names = names + ["extra"]
    elif k == 3:
        names[0] = names[-1]  # duplicate
    elif k == 4:
        names[rng.randrange(len(names))] = "bogus"
    return names


def _floats(rng: random.Random, count: int) -> list[float]:
    if rng.random() < 0.5:  # mostly ordinary values
        return [rng.uniform(-10, 10) for _ in range(count)]
    return [rng.choice(VALUES) if rng.random() < 0.5 else rng.uniform(-1e3, 1e3)
            for _ in range(count)]


def _state_msg(rng: random.Random, names: list[str], field: str):
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.header.stamp.sec = rng.choice((0, 1, rng.randrange(2**31)))
    msg.header.stamp.nanosec = rng.randrange(10**9)
    msg.name = _names(rng, names)
    setattr(msg, field, _floats(rng, max(0, len(msg.name) + rng.choice((0, 0, 0, -1, 1)))))
    return msg


def _traj_msg(rng: random.Random):
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory()
    msg.header.stamp.sec = rng.randrange(2**31)
    msg.joint_names = _names(rng, ACT)
    t = 0.0
    for _ in range(rng.randrange(0, 13)):
        pt = JointTrajectoryPoint()
        pt.positions = _floats(rng, len(msg.joint_names) + rng.choice((0, 0, 0, 0, 1)))
        t += rng.choice((0.02, 0.02, 0.02, 0.0, -0.01, 1e-9))
        ns = int(round(t * 1e9))
        pt.time_from_start.sec = ns // 10**9
        pt.time_from_start.nanosec = ns % 10**9
        msg.points.append(pt)
    return msg


def _ok_values(v: np.ndarray, dim: int) -> bool:
    return v.shape == (dim,) and v.dtype == np.float32 and bool(np.all(np.isfinite(v)))


def fuzz_ros(n: int, seed: int) -> dict:
    from edgerl_ros.messages import (
        BadMessage,
        TimeBase,
        joint_state_values,
        stamped_state,
        trajectory_to_chunk,
    )

    rng = random.Random(seed)
    tb = TimeBase()
    crashes = illegal = accepted = 0
    busy = 0.0
    examples: list[str] = []
    for b0 in range(0, n, CHUNK):
        batch = []
        for i in range(b0, min(n, b0 + CHUNK)):
            kind = i % 3
            batch.append((kind, _state_msg(rng, OBS, "position") if kind == 0 else
                          _state_msg(rng, ACT, "effort") if kind == 1 else _traj_msg(rng)))
        t0 = time.perf_counter()
        for kind, msg in batch:
            try:
                if kind == 0:
                    obs, stamp = stamped_state(msg, OBS)
                    ok = _ok_values(obs, len(OBS)) and stamp > 0
                elif kind == 1:
                    ok = _ok_values(joint_state_values(msg, ACT, "effort"), len(ACT))
                else:
                    c = trajectory_to_chunk(msg, ACT, tb)
                    times = np.asarray(c.times(), np.float64)
                    ok = (c.actions.shape == (len(msg.points), len(ACT))
                          and bool(np.all(np.isfinite(c.actions)))
                          and bool(np.all(np.isfinite(times)))
                          and bool(np.all(np.diff(times) > 0)))
                accepted += 1
                illegal += not ok
                if not ok and len(examples) < 3:
                    examples.append(f"accepted: {msg}"[:300])
            except BadMessage:
                pass
            except Exception as exc:  # a crash is what we count
                crashes += 1
                if len(examples) < 3:
                    examples.append(repr(exc))
        busy += time.perf_counter() - t0
    return {"target": "ros_message_checks", "inputs": n, "rate_per_s": n / busy,
            "crashes": crashes, "illegal_accepts": illegal, "accepted_messages": accepted,
            "examples": examples}


TARGETS = {"c_frame_parser": fuzz_c, "py_frame_parser": fuzz_py, "ros_message_checks": fuzz_ros}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000, help="inputs per target")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.n < 1:
        p.error("--n must be >= 1")
    unknown = set(args.targets.split(",")) - set(TARGETS)
    if unknown:
        p.error(f"unknown targets {sorted(unknown)} (known: {', '.join(TARGETS)})")
    rows = []
    for name in args.targets.split(","):
        load = os.getloadavg()[0]
        row = TARGETS[name](args.n, args.seed)
        row.update(rate_per_s=round(row["rate_per_s"], 1), load1=load)
        rows.append(row)
    if args.json:
        print(json.dumps({"n": args.n, "seed": args.seed, "results": rows}, indent=2))
    else:
        cols = ("target", "inputs", "rate_per_s", "crashes", "illegal_accepts", "load1")
        print("  ".join(f"{c:>18}" for c in cols))
        for r in rows:
            print("  ".join(f"{r[c]!s:>18}" for c in cols))
    return 1 if any(r["crashes"] or r["illegal_accepts"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
