"""Export a torch actor to ONNX: static batch-1 graphs for the device, optional dynamic batch.

The actor contract (what :func:`export_onnx` accepts, the same as rsl_rl's ``as_onnx()``
modules)::

    actor(obs)                  -> action                  # MLP; obs (B, D), action (B, A)
    actor(obs, h)               -> (action, h_out[, None]) # GRU; h (layers, B, hidden)
    actor(obs, h, c)            -> (action, h_out, c_out)  # LSTM

Normalisation must be inside the actor (rsl_rl's ``as_onnx()`` bakes its normaliser in), so
the graph takes the raw observation the runtime builds. Recurrent state is an explicit graph
input and output; the runtime feeds ``*_out`` back as ``*_in`` every tick and resets it to
zeros at the start of an episode.

Exporter choice (measured on torch 2.13 by ``edgerl.apps.experiments.probes.export_parity``,
numbers in ``docs/export.md``): the TorchScript exporter (``dynamo=False``) is the default: one
self-contained file, the minimal op set (``Gemm``/activations, one fused ``GRU``/``LSTM``
node) and ~10-100x faster export; the dynamo exporter gives the same parity but wraps RNNs in
``Reshape``/``Slice``/``Transpose``/``Concat`` and writes weights to a side ``.data`` file
unless told otherwise (``external_data=False`` here).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = [
    "DEFAULT_OPSET",
    "EXPORTERS",
    "MAX_OPSET",
    "MIN_OPSET",
    "ActorSignature",
    "ExportError",
    "OnnxExportConfig",
    "PolicyModule",
    "export_onnx",
    "infer_signature",
]

log = logging.getLogger(__name__)

#: Default ONNX opset: supported by every TensorRT >= 8.5 and onnxruntime >= 1.13.
DEFAULT_OPSET = 17
#: Opsets accepted by :func:`export_onnx` (TensorRT 10 parses opset 9-20; LSTM/GRU need >= 14
#: for ``layout``-free export, ``Gemm`` defaults need >= 13).
MIN_OPSET, MAX_OPSET = 13, 20
EXPORTERS = ("torchscript", "dynamo")


class ExportError(RuntimeError):
    """The actor cannot be exported (bad signature, parity over tolerance, missing tool)."""


@dataclass
class OnnxExportConfig:
    """How to write one ONNX file.

    ``opset``: ONNX opset (``MIN_OPSET``..``MAX_OPSET``); ``exporter``: ``torchscript``
    (``torch.onnx.export(dynamo=False)``) or ``dynamo``; ``dynamic_batch``: make dimension 0
    of ``obs``/``action`` symbolic (``batch``; recurrent state then has a symbolic dim 1).
    """

    opset: int = DEFAULT_OPSET
    exporter: str = "torchscript"
    dynamic_batch: bool = False

    def __post_init__(self) -> None:
        if not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise ExportError(f"opset {self.opset} is outside the supported range "
                              f"{MIN_OPSET}..{MAX_OPSET}")
        if self.exporter not in EXPORTERS:
            raise ExportError(f"exporter must be one of {EXPORTERS}, got {self.exporter!r}")


@dataclass
class ActorSignature:
    """Graph inputs/outputs of an actor: names and batch-1 shapes.

    ``input_dim`` D (observation), ``action_dim`` A, ``kind`` none/gru/lstm,
    ``state_shapes`` per state tensor (batch 1, e.g. ``[layers, 1, hidden]``).
    """

    input_dim: int
    action_dim: int
    kind: str = "none"
    obs_name: str = "obs"
    action_name: str = "action"
    state_inputs: list[str] = field(default_factory=list)
    state_outputs: list[str] = field(default_factory=list)
    state_shapes: list[list[int]] = field(default_factory=list)
    #: Full batch-1 shape of the first output (``[1, A]`` for policies).
    output_shape: list[int] = field(default_factory=list)
    #: Further outputs after the states (a planner's ``intent``), batch on dimension 0.
    extra_outputs: list[str] = field(default_factory=list)

    @property
    def input_names(self) -> list[str]:
        """Every graph input, in order: observation then states."""
        return [self.obs_name, *self.state_inputs]

    @property
    def output_names(self) -> list[str]:
        """Every graph output, in order: action, states, then the extra outputs."""
        return [self.action_name, *self.state_outputs, *self.extra_outputs]

    def zero_state(self, batch: int = 1) -> list[torch.Tensor]:
        """Zero recurrent state tensors for ``batch`` sequences (dim 1 is the batch)."""
        out = []
        for shape in self.state_shapes:
            s = list(shape)
            s[1] = batch
            out.append(torch.zeros(s))
        return out


class PolicyModule(nn.Module):
    """Wraps any actor to the fixed tuple-in / tuple-out form the exporter and parity use.

    ``forward(obs, *state) -> (action, *state_out, *extra)``; ``None`` outputs (rsl_rl's GRU
    returns ``(action, h, None)``) are dropped. ``n_extra``: outputs after the states (a
    planner's intent).
    """

    def __init__(self, actor: nn.Module, n_states: int, n_extra: int = 0) -> None:
        super().__init__()
        self.actor = actor
        self.n_states = n_states
        self.n_extra = n_extra

    def forward(self, obs: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.actor(obs, *state)
        if isinstance(out, torch.Tensor):
            out = (out,)
        outs = tuple(o for o in out if o is not None)
        if len(outs) != 1 + self.n_states + self.n_extra:
            raise ExportError(f"the actor returned {len(outs)} tensors; expected the action plus "
                              f"{self.n_states} recurrent state tensors"
                              + (f" and {self.n_extra} more" if self.n_extra else ""))
        return outs


def _find_rnn(actor: nn.Module) -> nn.Module | None:
    rnns = [m for m in actor.modules() if isinstance(m, (nn.GRU, nn.LSTM))]
    if len(rnns) > 1:
        raise ExportError(f"the actor holds {len(rnns)} recurrent layers; export supports one "
                          "(stack layers with num_layers instead)")
    return rnns[0] if rnns else None


def infer_signature(actor: nn.Module, input_dim: int,
                    state_shapes: list[list[int]] | None = None,
                    expected_kind: str = "none", any_output_rank: bool = False,
                    ) -> ActorSignature:
    """Find the actor's recurrence and output size by running it once on zeros.

    ``state_shapes`` overrides the shapes found from the actor's ``nn.GRU``/``nn.LSTM``
    (``[num_layers, 1, hidden_size]`` per state) or its rsl_rl ``get_dummy_inputs()``.
    ``expected_kind`` (the manifest's ``recurrent.kind``; ``none`` = no expectation) must match
    the recurrence found. ``any_output_rank`` accepts outputs ``(1, ...)`` of any rank (a
    planner's ``(1, H, A)`` chunk); policies must give ``(1, A)``.
    """
    rnn = _find_rnn(actor)
    kind = "none"
    if rnn is not None:
        kind = "gru" if isinstance(rnn, nn.GRU) else "lstm"
        if getattr(rnn, "batch_first", False) or getattr(rnn, "bidirectional", False):
            raise ExportError("recurrent layers must be batch_first=False and unidirectional")
    if expected_kind != "none" and expected_kind != kind:
        raise ExportError(f"the manifest says recurrent.kind={expected_kind!r} but the actor is "
                          f"{kind!r}")
    if state_shapes is None:
        dummy = getattr(actor, "get_dummy_inputs", None)
        if callable(dummy):
            state_shapes = [list(t.shape) for t in dummy()[1:]]
        elif rnn is not None:
            n = 1 if kind == "gru" else 2
            state_shapes = [[rnn.num_layers, 1, rnn.hidden_size]] * n
        else:
            state_shapes = []
    names = {"none": ([], []), "gru": (["h_in"], ["h_out"]),
             "lstm": (["h_in", "c_in"], ["h_out", "c_out"])}[kind]
    if len(state_shapes) != len(names[0]):
        raise ExportError(f"a {kind} actor needs {len(names[0])} state tensors, "
                          f"got shapes {state_shapes}")
    sig = ActorSignature(input_dim=input_dim, action_dim=0, kind=kind,
                         state_inputs=list(names[0]), state_outputs=list(names[1]),
                         state_shapes=[list(s) for s in state_shapes])
    module = PolicyModule(actor, len(sig.state_inputs)).eval()
    with torch.no_grad():
        try:
            outs = module(torch.zeros(1, input_dim), *sig.zero_state())
        except ExportError:
            raise
        except Exception as exc:  # shape errors from the user's network
            raise ExportError(f"the actor failed on a (1, {input_dim}) observation: {exc}") from exc
    action = outs[0]
    if action.dim() < 2 or action.shape[0] != 1 or (action.dim() != 2 and not any_output_rank):
        raise ExportError(f"the actor must return an action of shape (1, A), got "
                          f"{tuple(action.shape)}")
    sig.action_dim = int(action.shape[1])
    sig.output_shape = [int(d) for d in action.shape]
    for i, (o, shape) in enumerate(zip(outs[1:], sig.state_shapes)):
        if list(o.shape) != list(shape):
            raise ExportError(f"state output {i} has shape {list(o.shape)}, input {shape}")
    return sig


def export_onnx(actor: nn.Module, path: str | Path, sig: ActorSignature,
                config: OnnxExportConfig | None = None) -> Path:
    """Write ``actor`` to ``path`` as ONNX with ``sig``'s names; returns the path.

    The graph is static batch 1 unless ``config.dynamic_batch``. The actor is exported in
    eval mode on the CPU in its own dtype (float32 unless the caller wraps it).
    """
    config = config or OnnxExportConfig()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = PolicyModule(actor, len(sig.state_inputs), len(sig.extra_outputs)).eval().cpu()
    args: tuple[Any, ...] = (torch.zeros(1, sig.input_dim), *sig.zero_state())
    kwargs: dict[str, Any] = {}
    if config.dynamic_batch:
        axes = {name: {0: "batch"} for name in (sig.obs_name, sig.action_name,
                                               *sig.extra_outputs)}
        for name in (*sig.state_inputs, *sig.state_outputs):
            axes[name] = {1: "batch"}
        if config.exporter == "torchscript":
            kwargs["dynamic_axes"] = axes
        else:
            batch = torch.export.Dim("batch", min=1, max=4096)
            kwargs["dynamic_shapes"] = ({0: batch}, *({1: batch} for _ in sig.state_inputs))
    if config.exporter == "dynamo":
        kwargs.update(external_data=False, optimize=True, verbose=False)
    with warnings.catch_warnings(), torch.no_grad():
        # The TorchScript exporter announces its deprecation; the choice is documented above.
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module, args, str(path), input_names=sig.input_names,
                              output_names=sig.output_names, opset_version=config.opset,
                              dynamo=config.exporter == "dynamo", **kwargs)
        except Exception as exc:
            raise ExportError(f"torch.onnx.export ({config.exporter}, opset {config.opset}) "
                              f"failed: {exc}") from exc
    log.debug("wrote %s (%s, opset %d, dynamic_batch=%s)", path, config.exporter, config.opset,
              config.dynamic_batch)
    return path
