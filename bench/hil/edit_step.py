"""The fast loop's edit step (``firmware/src/edit.c`` + an exported ``edit_policy.h``) against
the Python path the runtime runs (:mod:`edgerl.contract.timing` row rule,
:mod:`edgerl.contract.edit_obs` with the chunk's planner intent,
onnxruntime, ``compose_edit_action``, the ``SafetyFilter``), on the host build and on the
emulated Cortex-M4F, with the instructions per edit tick there.

``firmware/tests/edit_bench.c`` is the driver (its protocol is in its header comment): each
record is one ``edgerl_edit_tick`` on a fresh state that holds the record's chunk (or none)
and committed-action history; it answers the edit observation, the command, the row used
and (M4) the SysTick ticks of the tick.
"""

from __future__ import annotations

import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgerl.contract.spec import PolicySpec, load_bundle_manifest
from edgerl.contract.timing import usable_steps
from edgerl.contract.wire.schema import MAX_INTENT, NO_ROW
from edgerl.hil.firmware import FIRMWARE_DIR, FirmwareError
from edgerl.hil.qemu import QEMU, QEMU_MACHINE, SYSCLK_HZ, qemu_missing

__all__ = ["EditCases", "EditOutputs", "build_edit_bench", "edit_cases", "edit_parity",
           "python_edit_step", "run_edit_bench"]


@dataclass
class EditCases:
    """N edit ticks to compare. Times are integer µs of one clock (< 2**31).

    Attributes:
        has: (N,) 1 where the state holds a chunk.
        now_us, t0_us, dt_us, obs_us, horizon: (N,) the tick time and the chunk's timing.
        obs: (N, O) plant states. chunk: (N, H, A) chunk rows (only ``horizon`` used).
        committed: (N, K, A) last commands, newest first.
        intent_n: (N,) planner intent values the CHUNK carries (0: none; a size other than
            the bundle's ``edit_obs.intent_dim`` is refused, as the runtime's guard does).
        intent: (N, MAX_INTENT) the planner intents (``intent_n`` used).
    """

    has: np.ndarray
    now_us: np.ndarray
    t0_us: np.ndarray
    dt_us: np.ndarray
    obs_us: np.ndarray
    horizon: np.ndarray
    obs: np.ndarray
    chunk: np.ndarray
    committed: np.ndarray
    intent_n: np.ndarray
    intent: np.ndarray

    def __len__(self) -> int:
        return int(self.has.shape[0])

    def to_bytes(self) -> bytes:
        """The driver's input: u32 N, then one record per case."""
        out = [struct.pack("<I", len(self))]
        for i in range(len(self)):
            out.append(struct.pack("<7I", int(self.has[i]), int(self.now_us[i]),
                                   int(self.t0_us[i]), int(self.dt_us[i]),
                                   int(self.obs_us[i]), int(self.horizon[i]),
                                   int(self.intent_n[i])))
            for arr in (self.obs[i], self.chunk[i], self.committed[i], self.intent[i]):
                out.append(np.ascontiguousarray(arr, "<f4").tobytes())
        return b"".join(out)


@dataclass
class EditOutputs:
    """Per case: edit observation ``x`` (N, D), command ``cmd`` (N, A), ``row`` (N,) (-1:
    none) and, from the M4, ``instructions`` (N,) (``-icount shift=0``; 40-instruction
    resolution), else None."""

    x: np.ndarray
    cmd: np.ndarray
    row: np.ndarray
    instructions: np.ndarray | None = None


def edit_cases(spec: PolicySpec, n: int, seed: int = 0) -> EditCases:
    """``n`` random ticks: states in [-2, 2], chunk rows in [-1.2, 1.2] (so the limits clip),
    tick times from 2 rows before the chunk to past its stale limit, ages up to 5 s (past
    the clip), shorter chunks than the horizon, and no chunk in ~15 %. With a planner intent
    (``edit_obs.intent_dim`` I > 0): intents in [-1, 1], a chunk without one in ~15 % and one
    of the wrong size (refused) in ~5 %."""
    rng = np.random.default_rng(seed)
    e, big_h, a = spec.edit_obs, spec.chunk.horizon, spec.action.dim
    dt = max(1, round(spec.chunk.dt_s * 1e6))
    horizon = rng.integers(1, big_h + 1, n)
    t0 = rng.integers(10_000_000, 100_000_000, n)
    usable = usable_steps(horizon, spec.timing.stale_steps)
    span = (usable + 2) * dt
    now = t0 + (rng.uniform(-2.0 * dt, 1.0, n) + rng.uniform(0, 1, n) * span).astype(np.int64)
    age = np.where(rng.uniform(size=n) < 0.1, rng.integers(0, 5_000_000, n),
                   rng.integers(0, 400_000, n))
    cases = EditCases(
        has=(rng.uniform(size=n) >= 0.15).astype(np.int64), now_us=now, t0_us=t0,
        dt_us=np.full(n, dt, np.int64), obs_us=t0 - age, horizon=horizon,
        obs=rng.uniform(-2, 2, (n, e.obs_dim)).astype(np.float32),
        chunk=rng.uniform(-1.2, 1.2, (n, big_h, a)).astype(np.float32),
        committed=rng.uniform(-1, 1, (n, e.n_committed, a)).astype(np.float32),
        intent_n=np.zeros(n, np.int64), intent=np.zeros((n, MAX_INTENT), np.float32))
    if e.intent_dim:  # drawn last: the cases above stay those of a bundle without one
        u = rng.uniform(size=n)
        wrong = 1 + (e.intent_dim + rng.integers(0, MAX_INTENT - 1, n)) % MAX_INTENT
        cases.intent_n = np.where(u < 0.15, 0, np.where(u < 0.2, wrong, e.intent_dim))
        cases.intent = rng.uniform(-1, 1, (n, MAX_INTENT)).astype(np.float32)
    return cases


def python_edit_step(bundle: Path, cases: EditCases) -> EditOutputs:
    """The runtime's computation of each case (what ``EditLoop`` does in one tick)."""
    import onnxruntime as ort

    from edgerl.contract.edit_obs import build_edit_obs, compose_edit_action, select_chunk_rows
    from edgerl.runtime.safety import SafetyConfig, SafetyFilter

    spec = load_bundle_manifest(bundle)
    cfg = spec.edit_obs
    sess = ort.InferenceSession(str(Path(bundle) / "policy.onnx"),
                                providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    period = 1.0 / spec.control_hz
    mean = np.asarray(spec.observation.mean, np.float32)
    std = np.asarray(spec.observation.std, np.float32)
    n = len(cases)
    xs = np.zeros((n, cfg.dim), np.float32)
    cmds = np.zeros((n, spec.action.dim), np.float32)
    rows_used = np.full(n, -1, np.int64)
    for i in range(n):
        h, k = int(cases.horizon[i]), int(cases.intent_n[i])
        row = intent = None
        if cases.has[i] and k in (0, cfg.intent_dim):  # another intent size: refused
            row = spec.timing.row_at(cases.now_us[i] / 1e6, cases.t0_us[i] / 1e6,
                                     cases.dt_us[i] / 1e6, h)
        if row is None:
            rows = np.zeros((cfg.n_rows, spec.action.dim), np.float32)
            age, has = 0.0, 0.0
        else:
            rows = select_chunk_rows(cases.chunk[i, :h], np.asarray(row), cfg.n_rows)
            age, has = (cases.now_us[i] - cases.obs_us[i]) / 1e6, 1.0
            rows_used[i] = row
            intent = cases.intent[i, :k] if k else None
        obs = cases.obs[i]
        if not spec.observation.normalized_in_graph:
            obs = ((obs - mean) / std).astype(np.float32)
        build_edit_obs(obs, rows, age, cases.committed[i], has, cfg, out=xs[i], intent=intent)
        res = sess.run(None, {name: xs[i][None]})[0][0]
        action = compose_edit_action(rows[0], res, spec.residual_bound)
        SafetyFilter(spec.action, SafetyConfig()).filter(action, period, cmds[i])
    return EditOutputs(xs, cmds, rows_used)


def build_edit_bench(edit_h: Path, build_dir: Path, m4: bool = False) -> Path:
    """Build the edit bench for ``edit_h`` (its directory holds ``edit_net.h``): the host
    driver, or (``m4``) ``edit_bench_m4.elf``."""
    build_dir = Path(build_dir).resolve()
    if m4:
        reason = qemu_missing()
        if reason:
            raise FirmwareError(f"cannot build the M4 edit bench: {reason}")
        target = build_dir / "edit_bench_m4.elf"
    else:
        target = build_dir / "edit_bench_host"
    res = subprocess.run(["make", "--no-print-directory", "-s", "-C", str(FIRMWARE_DIR),
                          f"BUILD={build_dir}", f"M4_BUILD={build_dir}",
                          f"EDIT_H={Path(edit_h).resolve()}", str(target)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise FirmwareError(f"building {target.name} failed:\n{res.stderr[-2000:]}")
    return target


def run_edit_bench(exe: Path, cases: EditCases, edit_dim: int, action_dim: int,
                   m4: bool = False, timeout_s: float = 300.0) -> EditOutputs:
    """Run ``cases`` through the host driver or (``m4``) the ELF in QEMU (``-icount
    shift=0``: one instruction = 1 ns of emulated time)."""
    if m4:
        argv = [QEMU, "-M", QEMU_MACHINE, "-nodefaults", "-display", "none", "-nic", "none",
                "-serial", "stdio", "-semihosting-config", "enable=on,target=native",
                "-icount", "shift=0", "-kernel", str(exe)]
    else:
        argv = [str(exe)]
    res = subprocess.run(argv, input=cases.to_bytes(), capture_output=True, timeout=timeout_s)
    rec = 4 * (edit_dim + action_dim + 2)
    want = rec * len(cases)
    if res.returncode != 0 or len(res.stdout) != want:
        raise FirmwareError(f"edit bench: exit {res.returncode}, {len(res.stdout)} of {want} "
                            f"bytes: {res.stderr.decode(errors='replace')[-1000:]}")
    raw = np.frombuffer(res.stdout, np.uint8).reshape(len(cases), rec)
    x = raw[:, :4 * edit_dim].copy().view("<f4").astype(np.float32)
    cmd = raw[:, 4 * edit_dim:4 * (edit_dim + action_dim)].copy().view("<f4")
    tail = raw[:, 4 * (edit_dim + action_dim):].copy().view("<u4").astype(np.int64)
    row = np.where(tail[:, 0] == NO_ROW, -1, tail[:, 0])
    ins = tail[:, 1] * (1_000_000_000 // SYSCLK_HZ) if m4 else None
    return EditOutputs(x, cmd.astype(np.float32), row, ins)


def edit_parity(bundle: Path, n: int = 1000, m4: bool = False, seed: int = 0) -> dict:
    """Export ``bundle``'s edit header, run ``n`` random ticks through C (host, or the M4 in
    QEMU) and Python; returns the errors (and the M4's instructions per tick)."""
    from edgerl.export.edit_header import write_edit_header

    spec = load_bundle_manifest(bundle)
    cases = edit_cases(spec, n, seed)
    ref = python_edit_step(bundle, cases)
    with tempfile.TemporaryDirectory(prefix="edgerl_edit_") as tmp:
        info = write_edit_header(bundle, Path(tmp) / "hdr")
        exe = build_edit_bench(info.path, Path(tmp), m4=m4)
        out = run_edit_bench(exe, cases, info.edit_dim, info.action_dim, m4=m4)
    report = {
        "target": "qemu-m4" if m4 else "host", "ticks": n,
        "rows_equal": bool(np.array_equal(out.row, ref.row)),
        "no_row_ticks": int((ref.row < 0).sum()),
        "max_abs_err_edit_obs": float(np.abs(out.x - ref.x).max()),
        "max_abs_err_cmd": float(np.abs(out.cmd - ref.cmd).max()),
        "edit_dim": info.edit_dim, "net_params": info.net.n_params,
    }
    if spec.edit_obs.intent_dim:
        i0, i1 = next((a, b) for name, a, b in spec.edit_obs.layout() if name == "intent")
        k = cases.intent_n
        report.update(
            max_abs_err_intent=float(np.abs(out.x[:, i0:i1] - ref.x[:, i0:i1]).max()),
            intent_ticks=int(((ref.row >= 0) & (k > 0)).sum()),
            refused_intent_ticks=int(((cases.has > 0) & (k > 0)
                                      & (k != spec.edit_obs.intent_dim)).sum()))
    if out.instructions is not None:
        ins = out.instructions
        report.update(instructions_mean=float(ins.mean()), instructions_max=int(ins.max()),
                      instructions_p50=float(np.median(ins)))
    return report
