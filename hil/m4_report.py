"""The on-MCU policy on the emulated Cortex-M4F: flash / RAM of the firmware linked with the
exported ``policy.h``, parity against onnxruntime on N observations, instructions per
inference. ``benchmarks/m4_policy.py`` prints it (the numbers docs/firmware.md quotes)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np

from edgerl.export.c_header import write_c_header
from edgerl.hil.qemu import policy_bench_elf, qemu_elf, run_policy_bench

__all__ = ["footprint", "mlp_onnx_bytes", "report"]


def mlp_onnx_bytes(sizes: list[int], activation: str = "Elu", seed: int = 0) -> bytes:
    """A chain MLP ``(1, sizes[0]) -> (1, sizes[-1])``: Gemm + ``activation`` between layers."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "obs"
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = (rng.standard_normal((n_out, n_in)) * 0.3).astype(np.float32)
        b = (rng.standard_normal(n_out) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        last = i == len(sizes) - 2
        out = "action" if last else f"z{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [out], transB=1))
        if not last:
            nodes.append(helper.make_node(activation, [out], [f"h{i}"]))
            out = f"h{i}"
        prev = out
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, sizes[0]])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, [1, sizes[-1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def footprint(elf: Path) -> dict[str, int]:
    """``arm-none-eabi-size``: text, data, bss; flash = text + data, ram = data + bss."""
    out = subprocess.run(["arm-none-eabi-size", str(elf)], capture_output=True, text=True,
                         check=True).stdout.splitlines()[1].split()
    text, data, bss = (int(v) for v in out[:3])
    return {"text": text, "data": data, "bss": bss, "flash": text + data, "ram": data + bss}


def report(onnx_path: Path, n: int = 1000, seed: int = 0) -> dict:
    """Build, run and compare; returns the numbers as a dict."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="edgerl_m4_") as tmp:
        tmp_dir = Path(tmp)
        info = write_c_header(onnx_path, tmp_dir / "policy.h")
        fw = qemu_elf(True, policy_h=info.path, build_dir=tmp_dir)
        plain = qemu_elf(False, build_dir=tmp_dir)
        bench = policy_bench_elf(info.path, tmp_dir)
        obs = np.random.default_rng(seed).uniform(-2.0, 2.0, (n, info.in_dim))
        obs = obs.astype(np.float32)
        res = run_policy_bench(bench, obs, info.out_dim)
        fw_size, plain_size = footprint(fw), footprint(plain)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    ref = np.concatenate([sess.run(None, {name: o[None]})[0] for o in obs])
    ins = res.instructions
    return {
        "policy": {"in_dim": info.in_dim, "out_dim": info.out_dim, "params": info.n_params,
                   "layers": info.layers},
        "observations": n, "max_abs_err": float(np.abs(res.actions - ref).max()),
        "instructions_mean": float(ins.mean()), "instructions_p50": float(np.median(ins)),
        "instructions_max": int(ins.max()),
        "firmware_with_policy": fw_size, "firmware_without_policy": plain_size,
        "policy_flash_bytes": fw_size["flash"] - plain_size["flash"],
    }
