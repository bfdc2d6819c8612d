"""``policy.h``: an MLP policy as plain C99 for microcontrollers (float32, no malloc).

The header is generated from the exported ``policy.onnx`` itself (not from the torch module),
so whatever normalisation or output scaling the graph bakes in is carried over exactly. The
graph must be a chain: one input ``(1, D)``, one output, every node consuming the previous
node's result plus constants. Supported ops: ``Gemm``, ``MatMul``, ``Add``/``Sub``/``Mul``/
``Div`` by a constant, ``Relu``, ``LeakyRelu``, ``Elu``, ``Tanh``, ``Sigmoid``, ``Neg``,
``Clip``, ``Identity``, ``Flatten``. Recurrent graphs are refused.

The header defines ``EDGERL_POLICY_IN_DIM``, ``EDGERL_POLICY_OUT_DIM``,
``EDGERL_POLICY_MAX_WIDTH`` (the two stack buffers' size, floats), ``EDGERL_POLICY_N_PARAMS``
and ``static inline void edgerl_policy_forward(const float *in, float *out)``. It needs only
``tanhf``/``expf`` from libm (link ``-lm`` on hosts).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CHeaderError",
    "CHeaderInfo",
    "Layer",
    "compile_c_driver",
    "parse_mlp_chain",
    "run_c_header",
    "write_c_header",
]

log = logging.getLogger(__name__)


class CHeaderError(ValueError):
    """The graph cannot be expressed as the plain-C MLP forward pass."""


@dataclass
class Layer:
    """One step of the chain: ``kind`` is ``dense`` (``w`` (out, in), ``b`` (out,)), an
    elementwise op with a constant (``add``/``sub``/``rsub``/``mul``/``div``/``rdiv``, ``c``
    (width,)) or an activation (``relu``, ``leaky_relu``, ``elu``, ``tanh``, ``sigmoid``,
    ``neg``, ``clip``) with scalar ``params``."""

    kind: str
    width: int
    w: np.ndarray | None = None
    b: np.ndarray | None = None
    c: np.ndarray | None = None
    params: dict[str, float] = field(default_factory=dict)


@dataclass
class CHeaderInfo:
    """What was written: sizes, parameter count, layer kinds."""

    path: Path
    in_dim: int
    out_dim: int
    max_width: int
    n_params: int
    layers: list[str]


def _constants(model: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    consts = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    consts[node.output[0]] = numpy_helper.to_array(attr.t)
                elif attr.name in ("value_float", "value_int"):
                    consts[node.output[0]] = np.array(attr.f if attr.name == "value_float"
                                                      else attr.i)
    return consts


def _attr(node: Any, name: str, default: Any) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _vector(c: np.ndarray, width: int, what: str) -> np.ndarray:
    c = np.asarray(c, dtype=np.float64)
    if c.size == 1:
        return np.full(width, float(c.reshape(-1)[0]))
    flat = c.reshape(-1)
    if flat.size != width or (c.ndim == 2 and c.shape[0] != 1):
        raise CHeaderError(f"{what}: constant of shape {c.shape} does not broadcast to "
                           f"(1, {width})")
    return flat


def parse_mlp_chain(model: Any) -> tuple[int, list[Layer]]:
    """Turn a chain ONNX graph into ``(in_dim, layers)``; raises :class:`CHeaderError`."""
    import onnx

    if isinstance(model, (str, Path)):
        model = onnx.load(str(model))
    graph = model.graph
    init_names = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in init_names]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise CHeaderError(f"the C header supports single-input single-output MLP graphs; this "
                           f"graph has inputs {[i.name for i in inputs]} and outputs "
                           f"{[o.name for o in graph.output]} (recurrent policies are not "
                           "supported)")
    dims = [d.dim_value for d in inputs[0].type.tensor_type.shape.dim]
    if len(dims) != 2 or dims[0] != 1 or dims[1] < 1:
        raise CHeaderError(f"input {inputs[0].name} must have static shape (1, D), got {dims}")
    consts = _constants(model)
    cur, width = inputs[0].name, dims[1]
    layers: list[Layer] = []
    for node in graph.node:
        if node.op_type == "Constant":
            continue
        what = f"node {node.name or node.op_type} ({node.op_type})"
        args = [a for a in node.input if a]
        if cur not in args:
            raise CHeaderError(f"{what} does not consume the previous result: the graph is not "
                               "a chain")
        others = [consts.get(a) for a in args if a != cur]
        if any(o is None for o in others):
            raise CHeaderError(f"{what}: non-constant second operand; not an MLP chain")
        op = node.op_type
        if op in ("Gemm", "MatMul"):
            if op == "Gemm" and (_attr(node, "transA", 0) or args[0] != cur):
                raise CHeaderError(f"{what}: transA/ operand order not supported")
            if op == "MatMul" and args[0] != cur:
                raise CHeaderError(f"{what}: constant @ x is not supported")
            bmat = np.asarray(others[0], dtype=np.float64)
            if bmat.ndim != 2:
                raise CHeaderError(f"{what}: weight must be 2-D, got {bmat.shape}")
            if op == "Gemm" and _attr(node, "transB", 0):
                bmat = bmat.T
            if bmat.shape[0] != width:
                raise CHeaderError(f"{what}: weight {bmat.shape} does not match width {width}")
            alpha = float(_attr(node, "alpha", 1.0)) if op == "Gemm" else 1.0
            beta = float(_attr(node, "beta", 1.0)) if op == "Gemm" else 1.0
            out = bmat.shape[1]
            bias = (beta * _vector(others[1], out, what) if len(others) > 1 else np.zeros(out))
            layers.append(Layer("dense", out, w=(alpha * bmat).T.copy(), b=bias))
            width = out
        elif op in ("Add", "Sub", "Mul", "Div"):
            first = args[0] == cur
            kind = op.lower() if first or op in ("Add", "Mul") else "r" + op.lower()
            layers.append(Layer(kind, width, c=_vector(others[0], width, what)))
        elif op in ("Relu", "Tanh", "Sigmoid", "Neg"):
            layers.append(Layer(op.lower(), width))
        elif op in ("Elu", "LeakyRelu"):
            default = 1.0 if op == "Elu" else 0.01
            layers.append(Layer("elu" if op == "Elu" else "leaky_relu", width,
                                params={"alpha": float(_attr(node, "alpha", default))}))
        elif op == "Clip":
            lo = float(others[0]) if len(others) > 0 else float(_attr(node, "min", -np.inf))
            hi = float(others[1]) if len(others) > 1 else float(_attr(node, "max", np.inf))
            layers.append(Layer("clip", width, params={"min": lo, "max": hi}))
        elif op in ("Identity", "Flatten"):
            pass
        else:
            raise CHeaderError(f"{what}: op {op} is not supported by the C header")
        cur = node.output[0]
    if cur != graph.output[0].name:
        raise CHeaderError("the chain does not end at the graph output")
    return dims[1], layers


def _floats(values: np.ndarray, per_line: int = 6) -> str:
    vals = np.asarray(values, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(vals)):
        raise CHeaderError("weights must be finite")
    items = [_literal(float(v)) for v in vals]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "    " + ",\n    ".join(lines)


def _literal(v: float) -> str:
    """A C float literal that round-trips float32 exactly (9 significant digits)."""
    text = f"{v:.9g}"
    if not any(ch in text for ch in ".e"):
        text += ".0"
    return text + "f"


def _cfloat(v: float) -> str:
    if v == np.inf:
        return "3.402823466e+38f"
    if v == -np.inf:
        return "-3.402823466e+38f"
    return _literal(float(np.float32(v)))


_ACT = {
    "relu": "cur[i] = cur[i] > 0.0f ? cur[i] : 0.0f;",
    "tanh": "cur[i] = tanhf(cur[i]);",
    "sigmoid": "cur[i] = 1.0f / (1.0f + expf(-cur[i]));",
    "neg": "cur[i] = -cur[i];",
}
_BINOP = {"add": "cur[i] = cur[i] + {c}[i];", "sub": "cur[i] = cur[i] - {c}[i];",
          "rsub": "cur[i] = {c}[i] - cur[i];", "mul": "cur[i] = cur[i] * {c}[i];",
          "div": "cur[i] = cur[i] / {c}[i];", "rdiv": "cur[i] = {c}[i] / cur[i];"}


def _layer_code(k: int, layer: Layer, prev_width: int, prefix: str) -> tuple[list[str], list[str]]:
    """(array definitions, forward-pass statements) for one layer."""
    name = f"{prefix}_l{k}"
    n = layer.width
    arrays: list[str] = []
    body = [f"    /* layer {k}: {layer.kind} ({prev_width} -> {n}) */"]
    if layer.kind == "dense":
        assert layer.w is not None and layer.b is not None
        arrays.append(f"static const float {name}_w[{n * prev_width}] = {{\n"
                      f"{_floats(layer.w)}\n}};")
        arrays.append(f"static const float {name}_b[{n}] = {{\n{_floats(layer.b)}\n}};")
        body += [f"    for (i = 0; i < {n}; ++i) {{",
                 f"        const float *w = {name}_w + i * {prev_width};",
                 f"        float acc = {name}_b[i];",
                 f"        for (j = 0; j < {prev_width}; ++j) {{",
                 "            acc += w[j] * cur[j];",
                 "        }",
                 "        nxt[i] = acc;",
                 "    }",
                 "    tmp = cur; cur = nxt; nxt = tmp;"]
    elif layer.kind in _BINOP:
        assert layer.c is not None
        arrays.append(f"static const float {name}_c[{n}] = {{\n{_floats(layer.c)}\n}};")
        body.append(f"    for (i = 0; i < {n}; ++i) {{ "
                    f"{_BINOP[layer.kind].format(c=name + '_c')} }}")
    elif layer.kind in _ACT:
        body.append(f"    for (i = 0; i < {n}; ++i) {{ {_ACT[layer.kind]} }}")
    elif layer.kind == "elu":
        a = _cfloat(layer.params["alpha"])
        body.append(f"    for (i = 0; i < {n}; ++i) {{ "
                    f"cur[i] = cur[i] > 0.0f ? cur[i] : {a} * (expf(cur[i]) - 1.0f); }}")
    elif layer.kind == "leaky_relu":
        a = _cfloat(layer.params["alpha"])
        body.append(f"    for (i = 0; i < {n}; ++i) {{ "
                    f"cur[i] = cur[i] > 0.0f ? cur[i] : {a} * cur[i]; }}")
    elif layer.kind == "clip":
        lo, hi = _cfloat(layer.params["min"]), _cfloat(layer.params["max"])
        body.append(f"    for (i = 0; i < {n}; ++i) {{ cur[i] = cur[i] < {lo} ? {lo} : "
                    f"(cur[i] > {hi} ? {hi} : cur[i]); }}")
    else:  # pragma: no cover - parse_mlp_chain only produces the kinds above
        raise CHeaderError(f"unknown layer kind {layer.kind}")
    return arrays, body


def write_c_header(onnx_path: str | Path, header_path: str | Path, *,
                   prefix: str = "edgerl_policy", provenance: str = "") -> CHeaderInfo:
    """Generate ``header_path`` from the chain MLP graph in ``onnx_path``."""
    in_dim, layers = parse_mlp_chain(onnx_path)
    if not any(layer.kind == "dense" for layer in layers):
        raise CHeaderError("the graph has no dense layer; nothing to export")
    macro = prefix.upper()
    widths = [in_dim] + [layer.width for layer in layers]
    max_width = max(widths)
    arrays: list[str] = []
    body: list[str] = []
    prev = in_dim
    for k, layer in enumerate(layers):
        a, b = _layer_code(k, layer, prev, prefix)
        arrays += a
        body += b
        prev = layer.width
    out_dim = prev
    n_params = sum((layer.w.size if layer.w is not None else 0)
                   + (layer.b.size if layer.b is not None else 0)
                   + (layer.c.size if layer.c is not None else 0) for layer in layers)
    guard = f"{macro}_H"
    lines = [
        f"/* Generated by edgerl export; do not edit. {provenance}".rstrip() + " */",
        "/* Plain C99 MLP forward pass: float32, no malloc, libm tanhf/expf only. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <math.h>",
        "",
        f"#define {macro}_IN_DIM {in_dim}",
        f"#define {macro}_OUT_DIM {out_dim}",
        f"#define {macro}_MAX_WIDTH {max_width}",
        f"#define {macro}_N_LAYERS {len(layers)}",
        f"#define {macro}_N_PARAMS {n_params}",
        "",
        *arrays,
        "",
        f"/* in: {macro}_IN_DIM floats; out: {macro}_OUT_DIM floats. Uses two stack buffers "
        f"of {macro}_MAX_WIDTH floats. */",
        f"static inline void {prefix}_forward(const float *in, float *out)",
        "{",
        f"    float buf_a[{macro}_MAX_WIDTH];",
        f"    float buf_b[{macro}_MAX_WIDTH];",
        "    float *cur = buf_a;",
        "    float *nxt = buf_b;",
        "    float *tmp;",
        "    int i;",
        "    int j;",
        f"    for (i = 0; i < {macro}_IN_DIM; ++i) {{ cur[i] = in[i]; }}",
        *body,
        f"    for (i = 0; i < {macro}_OUT_DIM; ++i) {{ out[i] = cur[i]; }}",
        "    (void)tmp;",
        "    (void)j;",
        "    (void)nxt;",
        "}",
        "",
        f"#endif /* {guard} */",
        "",
    ]
    header_path = Path(header_path)
    header_path.write_text("\n".join(lines))
    info = CHeaderInfo(path=header_path, in_dim=in_dim, out_dim=out_dim, max_width=max_width,
                       n_params=int(n_params), layers=[layer.kind for layer in layers])
    log.info("wrote %s: %d -> %d, %d params, layers %s", header_path, in_dim, out_dim,
             info.n_params, ",".join(info.layers))
    return info


_DRIVER = r"""
#include <stdio.h>
#include "{header}"

int main(int argc, char **argv)
{{
    float in[{macro}_IN_DIM];
    float out[{macro}_OUT_DIM];
    FILE *fi;
    FILE *fo;
    if (argc != 3) {{
        return 2;
    }}
    fi = fopen(argv[1], "rb");
    fo = fopen(argv[2], "wb");
    if (fi == NULL || fo == NULL) {{
        return 3;
    }}
    while (fread(in, sizeof(float), {macro}_IN_DIM, fi) == {macro}_IN_DIM) {{
        {prefix}_forward(in, out);
        fwrite(out, sizeof(float), {macro}_OUT_DIM, fo);
    }}
    fclose(fi);
    fclose(fo);
    return 0;
}}
"""

C_FLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic")


def compile_c_driver(header_path: str | Path, out_dir: str | Path, *, cc: str = "gcc",
                     prefix: str = "edgerl_policy") -> Path:
    """Compile a driver that maps a float32 file of inputs to a float32 file of outputs.

    Flags: :data:`C_FLAGS` ``-lm``. Raises ``FileNotFoundError`` when ``cc`` is missing and
    ``RuntimeError`` (with the compiler's messages) when compilation fails.
    """
    if shutil.which(cc) is None:
        raise FileNotFoundError(f"C compiler {cc!r} not found on PATH")
    header_path = Path(header_path).resolve()
    out_dir = Path(out_dir)
    src = out_dir / "policy_driver.c"
    exe = out_dir / "policy_driver"
    src.write_text(_DRIVER.format(header=header_path.name, macro=prefix.upper(), prefix=prefix))
    cmd = [cc, *C_FLAGS, f"-I{header_path.parent}", str(src), "-o", str(exe), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
    return exe


def run_c_header(header_path: str | Path, observations: np.ndarray, *, cc: str = "gcc",
                 prefix: str = "edgerl_policy") -> np.ndarray:
    """Compile ``header_path`` with a driver and run it on ``observations`` (N, D) -> (N, A)."""
    obs = np.ascontiguousarray(observations, dtype=np.float32)
    with tempfile.TemporaryDirectory(prefix="edgerl_c_") as tmp:
        exe = compile_c_driver(header_path, tmp, cc=cc, prefix=prefix)
        fin, fout = Path(tmp) / "in.f32", Path(tmp) / "out.f32"
        obs.astype("<f4").tofile(fin)
        proc = subprocess.run([str(exe), str(fin), str(fout)], capture_output=True,
                              timeout=120, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the C policy driver exited with {proc.returncode}")
        out = np.fromfile(fout, dtype="<f4")
    if out.size % obs.shape[0] != 0:
        raise RuntimeError(f"the C driver wrote {out.size} floats for {obs.shape[0]} inputs")
    return out.reshape(obs.shape[0], -1)
