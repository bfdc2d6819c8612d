"""Export the language planner to a runtime bundle: encoder ONNX, chunk-head ONNX, manifest.

Bundle layout: see :mod:`edgerl.runtime.planners.local.language`. Both graphs are checked against
torch right after export (:func:`encoder_parity`, :func:`head_parity`); the numbers go into
``manifest.extra["language"]["parity"]`` and ``parity.json`` (hashed like every file; the
runtime refuses a bundle whose parity failed). Over :data:`ENCODER_COS_TOL` /
:data:`HEAD_TOL` the export raises :class:`~edgerl.export.onnx_export.ExportError` and writes
no manifest.
"""

from __future__ import annotations

import json
import logging
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from edgerl.contract.spec import MANIFEST_NAME, PolicySpec, sha256_file
from edgerl.export.onnx_export import ExportError
from edgerl.runtime.bundle_check import PARITY_FILE
from edgerl.runtime.planners.local.language import (
    EMBEDDINGS_FILE,
    ENCODER_FILE,
    HEAD_FILE,
    TOKENIZER_FILE,
    InstructionTokenizer,
    OnnxSentenceEncoder,
)

__all__ = ["ENCODER_OPSET", "encoder_parity", "export_encoder_onnx", "export_head_onnx",
           "export_language_bundle", "head_parity"]

log = logging.getLogger(__name__)

ENCODER_OPSET = 17
#: Largest cosine distance between torch and onnxruntime sentence embeddings.
ENCODER_COS_TOL = 1e-4
#: Largest absolute chunk difference between the torch head and ``planner.onnx``.
HEAD_TOL = 1e-4


def _write_parity(out: Path, enc_par: dict[str, Any], head_par: dict[str, Any]) -> bool:
    """``parity.json`` in the exporter's format (``ok`` and per-check ``ok``)."""
    enc_ok = enc_par["max_cosine_distance"] <= ENCODER_COS_TOL
    head_ok = head_par["max_abs_error"] <= HEAD_TOL
    doc = {"ok": enc_ok and head_ok, "parity": {
        "encoder_onnx": {**enc_par, "reference": "torch", "candidate": "onnxruntime",
                         "tolerance_cosine": ENCODER_COS_TOL, "ok": enc_ok},
        "planner_onnx": {**head_par, "reference": "torch", "candidate": "onnxruntime",
                         "tolerance": HEAD_TOL, "ok": head_ok}}}
    (out / PARITY_FILE).write_text(json.dumps(doc, indent=2) + "\n")
    return doc["ok"]


def _export(module: nn.Module, args: tuple, path: Path, input_names: list[str],
            output_names: list[str], dynamic_axes: dict[str, dict[int, str]]) -> None:
    """TorchScript-based exporter (``dynamo=False``): stable for BERT-style graphs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes,
                          opset_version=ENCODER_OPSET, dynamo=False, do_constant_folding=True)


def export_encoder_onnx(encoder: nn.Module, tokenizer: InstructionTokenizer,
                        path: str | Path) -> Path:
    """Write ``encoder.onnx``: ``input_ids, attention_mask (B, T) int64 -> embedding (B, 384)``
    with dynamic ``B`` and ``T``."""
    path = Path(path)
    ids, mask = tokenizer.encode(["push the block to the left", "reach"])
    encoder = encoder.eval()
    with torch.no_grad():
        _export(encoder, (torch.from_numpy(ids), torch.from_numpy(mask)), path,
                ["input_ids", "attention_mask"], ["embedding"],
                {"input_ids": {0: "batch", 1: "tokens"},
                 "attention_mask": {0: "batch", 1: "tokens"}, "embedding": {0: "batch"}})
    log.info("exported the sentence encoder to %s (%.1f MB)", path, path.stat().st_size / 1e6)
    return path


def encoder_parity(encoder: nn.Module, tokenizer: InstructionTokenizer, onnx_path: str | Path,
                   texts: list[str]) -> dict[str, float]:
    """Torch vs onnxruntime embeddings of ``texts``: max cosine distance and max abs error."""
    ort_enc = OnnxSentenceEncoder(onnx_path, _tokenizer_path(tokenizer))
    with torch.no_grad():
        ids, mask = tokenizer.encode(texts)
        ref = encoder(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    got = ort_enc.embed(texts)
    cos = np.sum(ref * got, axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1))
    return {"max_cosine_distance": float(np.max(1.0 - cos)),
            "max_abs_error": float(np.max(np.abs(ref - got))), "n_texts": len(texts)}


def _tokenizer_path(tokenizer: InstructionTokenizer) -> Path:
    path = getattr(tokenizer, "source_path", None)
    if path is None:
        raise ValueError("tokenizer was not loaded from a file (InstructionTokenizer.from_file)")
    return Path(path)


def export_head_onnx(head: nn.Module, obs_dim: int, embed_dim: int, path: str | Path) -> Path:
    """Write ``planner.onnx`` from a module called as ``head(obs (B, O), embedding (B, C)) ->
    chunk (B, H, A)`` (e.g. :class:`~edgerl.policies.language.head.GroundedChunkHead`)."""
    path = Path(path)
    graph = head.eval()
    with torch.no_grad():
        _export(graph, (torch.zeros(1, obs_dim), torch.zeros(1, embed_dim)), path,
                ["obs", "embedding"], ["chunk"],
                {"obs": {0: "batch"}, "embedding": {0: "batch"}, "chunk": {0: "batch"}})
    return path


def head_parity(head: nn.Module, onnx_path: str | Path, obs: np.ndarray,
                embeddings: np.ndarray) -> dict[str, float]:
    """Torch vs onnxruntime chunks for ``obs (N, O)`` and ``embeddings (N, C)``."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    obs = np.asarray(obs, np.float32)
    embeddings = np.asarray(embeddings, np.float32)
    (got,) = sess.run(None, {"obs": obs, "embedding": embeddings})
    with torch.no_grad():
        ref = head.eval()(torch.from_numpy(obs), torch.from_numpy(embeddings)).numpy()
    return {"max_abs_error": float(np.max(np.abs(ref - got))), "n_samples": int(obs.shape[0])}


def export_language_bundle(out_dir: str | Path, *, spec: PolicySpec, head: nn.Module,
                           encoder: nn.Module, tokenizer: InstructionTokenizer,
                           instructions: list[str], parity_obs: np.ndarray,
                           extra: dict[str, Any] | None = None) -> PolicySpec:
    """Write a complete language planner bundle to ``out_dir`` and return its manifest.

    ``spec`` supplies task, observation/action layout and chunk timing; its ``method``,
    ``tensors``, ``files`` and ``extra["language"]`` are filled in here. ``instructions`` get
    precomputed embeddings (``instructions.npz``). Parity of both graphs is measured on
    ``parity_obs (N, O)`` x the instructions and recorded in the manifest.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_NAME).unlink(missing_ok=True)  # a failed export leaves no loadable bundle
    export_encoder_onnx(encoder, tokenizer, out / ENCODER_FILE)
    shutil.copyfile(_tokenizer_path(tokenizer), out / TOKENIZER_FILE)
    export_head_onnx(head, spec.observation.dim, _embed_dim(encoder, tokenizer), out / HEAD_FILE)
    texts = sorted(set(instructions))
    with torch.no_grad():
        ids, mask = tokenizer.encode(texts)
        embeddings = encoder(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    np.savez(out / EMBEDDINGS_FILE, texts=np.asarray(texts, dtype=np.str_),
             embeddings=embeddings.astype(np.float32))
    enc_par = encoder_parity(encoder, tokenizer, out / ENCODER_FILE, texts)
    rng = np.random.default_rng(0)
    pick = rng.integers(0, len(texts), size=len(parity_obs))
    head_par = head_parity(head, out / HEAD_FILE, parity_obs, embeddings[pick])
    if not _write_parity(out, enc_par, head_par):
        raise ExportError(f"language planner parity over tolerance (encoder cosine distance "
                          f"{enc_par['max_cosine_distance']:.2e} > {ENCODER_COS_TOL:g} or head "
                          f"error {head_par['max_abs_error']:.2e} > {HEAD_TOL:g}); see "
                          f"{out / PARITY_FILE}")
    spec.method = "language_planner"
    spec.tensors.inputs = ["obs", "embedding"]
    spec.tensors.outputs = ["chunk"]
    spec.files = {name: sha256_file(out / name) for name in
                  (HEAD_FILE, ENCODER_FILE, TOKENIZER_FILE, EMBEDDINGS_FILE, PARITY_FILE)}
    spec.extra = {**spec.extra, **(extra or {}),
                  "language": {"encoder": "sentence-transformers/all-MiniLM-L6-v2",
                               "embed_dim": int(embeddings.shape[1]),
                               "instructions": len(texts),
                               "parity": {"encoder": enc_par, "head": head_par}}}
    spec.save(out)
    log.info("language planner bundle written to %s (encoder cosine distance %.2e, head max "
             "error %.2e)", out, enc_par["max_cosine_distance"], head_par["max_abs_error"])
    return spec


def _embed_dim(encoder: nn.Module, tokenizer: InstructionTokenizer) -> int:
    with torch.no_grad():
        ids, mask = tokenizer.encode(["x"])
        return int(encoder(torch.from_numpy(ids), torch.from_numpy(mask)).shape[-1])
