"""The language-conditioned chunk planner on the device: onnxruntime, no torch.

A language planner bundle (written by :func:`edgerl.export.encoder_onnx.export_language_bundle`)::

    manifest.json      PolicySpec, method "language_planner"; extra["language"] describes it
    planner.onnx       chunk head: obs (1, O) float32, embedding (1, 384) -> chunk (1, H, A)
    encoder.onnx       all-MiniLM-L6-v2: input_ids, attention_mask (B, T) int64 -> (B, 384)
    tokenizer.json     the encoder's WordPiece tokenizer (Rust ``tokenizers`` package)
    instructions.npz   cached embeddings: texts (N,) str, embeddings (N, 384) float32

A planner sees few distinct instructions, so embeddings are cached per instruction text: the
ones in ``instructions.npz`` at load, any new one after its first encoding (LRU). With a warm
cache a plan costs one head inference; the encoder (and the ``tokenizers`` package) is only
needed for instructions not seen before. A device without ``tokenizers`` still runs every
cached instruction and refuses others with a clear error.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerHealth, PlannerInfo
from edgerl.contract.spec import BundleError, PolicySpec
from edgerl.runtime.bundle_check import verify_bundle

__all__ = [
    "EMBEDDINGS_FILE",
    "ENCODER_FILE",
    "HEAD_FILE",
    "TOKENIZER_FILE",
    "InstructionTokenizer",
    "OnnxLanguagePlanner",
    "OnnxSentenceEncoder",
]

log = logging.getLogger(__name__)

HEAD_FILE = "planner.onnx"
ENCODER_FILE = "encoder.onnx"
TOKENIZER_FILE = "tokenizer.json"
EMBEDDINGS_FILE = "instructions.npz"


class InstructionTokenizer:
    """WordPiece tokenization with the model's ``tokenizer.json`` (lower-cases, adds
    ``[CLS]``/``[SEP]``), padded to the longest text of the batch, truncated at ``max_tokens``.
    """

    def __init__(self, tokenizer: Any, max_tokens: int = 128,
                 source_path: Path | None = None) -> None:
        self._tok = tokenizer
        self.source_path = source_path
        self.max_tokens = max_tokens
        self._tok.enable_truncation(max_length=max_tokens)
        self._tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the batch's longest

    @classmethod
    def from_file(cls, path: str | Path, max_tokens: int = 128) -> InstructionTokenizer:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError("encoding a new instruction needs the 'tokenizers' package "
                              "(pip install tokenizers); cached instructions work without "
                              "it") from exc
        return cls(Tokenizer.from_file(str(path)), max_tokens, Path(path))

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(input_ids, attention_mask)``, both ``(N, T)`` int64."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts")
        encs = self._tok.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in encs], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encs], dtype=np.int64)
        return ids, mask


def _session(path: Path, threads: int, device: str = "cpu") -> Any:
    """An onnxruntime session on ``device`` (``auto``: TensorRT EP, else CUDA EP, else CPU)."""
    import onnxruntime as ort

    from edgerl.runtime.inference import open_session

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    return open_session(path, device, opts)[0]


class OnnxSentenceEncoder:
    """``encoder.onnx`` + tokenizer: ``embed(texts) -> (N, 384)`` float32, unit norm."""

    def __init__(self, onnx_path: str | Path, tokenizer_path: str | Path,
                 threads: int = 1, device: str = "cpu") -> None:
        self.session = _session(Path(onnx_path), threads, device)
        self.tokenizer = InstructionTokenizer.from_file(tokenizer_path)

    def embed(self, texts: list[str]) -> np.ndarray:
        ids, mask = self.tokenizer.encode(texts)
        (out,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
        return np.asarray(out, dtype=np.float32)


class OnnxLanguagePlanner:
    """A :class:`~edgerl.contract.planner.Planner` running a language planner bundle with
    onnxruntime.

    ``plan(obs (O,), instruction, now)`` returns an ``(H, A)`` chunk with ``t0 = obs_time =
    now``: row ``i`` is meant for ``now + i * dt`` (the caller drops rows already past).

    Args:
        bundle_dir: The bundle directory, checked by
            :func:`~edgerl.runtime.bundle_check.verify_bundle` (hashes of every file it reads,
            parity, bounds, ONNX shapes; the signature when a public key is configured).
        pubkey: Ed25519 public key (else ``$EDGERL_BUNDLE_PUBKEY``; none: no signature check).
        cache: Keep instruction embeddings (``False``: encode on every call, the latency a
            VLA that re-reads its prompt would have; used by ``edgerl bench planner``).
        cache_size: Most instructions kept beyond the bundle's own.
        threads: onnxruntime intra-op threads per session.
        device: onnxruntime device of the sessions (``auto``: TensorRT EP, else CUDA EP,
            else CPU; see :func:`edgerl.runtime.inference.choose_providers`).
    """

    def __init__(self, bundle_dir: str | Path, *, cache: bool = True, cache_size: int = 256,
                 threads: int = 1, device: str = "cpu",
                 pubkey: str | Path | None = None) -> None:
        bundle_dir = Path(bundle_dir)
        self.spec: PolicySpec = verify_bundle(bundle_dir, pubkey=pubkey, check_onnx=True)
        if self.spec.method != "language_planner":
            raise BundleError(f"{bundle_dir}: method is {self.spec.method!r}, not a "
                              "language_planner bundle")
        self.bundle_dir = bundle_dir
        self.obs_dim = self.spec.observation.dim
        c = self.spec.chunk
        self.info = PlannerInfo(horizon=c.horizon, action_dim=self.spec.action.dim, dt_s=c.dt_s,
                                period_s=c.period_s, expected_latency_s=c.expected_latency_s)
        self.device = device
        self.head = _session(bundle_dir / HEAD_FILE, threads, device)
        self.cache_enabled = cache
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._bundle_texts: set[str] = set()
        if (bundle_dir / EMBEDDINGS_FILE).is_file():
            with np.load(bundle_dir / EMBEDDINGS_FILE, allow_pickle=False) as data:
                for text, emb in zip(data["texts"].tolist(), data["embeddings"]):
                    self._cache[str(text)] = np.asarray(emb, np.float32)
                    self._bundle_texts.add(str(text))
        self._encoder: OnnxSentenceEncoder | None = None
        self._encoder_error: str | None = None
        if (bundle_dir / ENCODER_FILE).is_file():
            try:
                self._encoder = OnnxSentenceEncoder(bundle_dir / ENCODER_FILE,
                                                    bundle_dir / TOKENIZER_FILE, threads,
                                                    device)
            except ImportError as exc:
                self._encoder_error = str(exc)
                log.warning("%s; only the %d cached instructions can be planned", exc,
                            len(self._cache))
        else:
            self._encoder_error = f"{bundle_dir} ships no {ENCODER_FILE}"
        if not cache and self._encoder is None:
            raise BundleError(f"cache=False needs the encoder: {self._encoder_error}")
        self._embed_dim = int(self.head.get_inputs()[1].shape[-1])
        self._obs = np.zeros((1, self.obs_dim), np.float32)
        self.calls = 0

    @property
    def instructions(self) -> list[str]:
        """Instructions shipped with the bundle (their embeddings are precomputed)."""
        return sorted(self._bundle_texts)

    def embed(self, instruction: str) -> np.ndarray:
        """``(384,)`` embedding of ``instruction`` (cached per exact text)."""
        if self.cache_enabled and instruction in self._cache:
            self._cache.move_to_end(instruction)
            return self._cache[instruction]
        if self._encoder is None:
            known = "; ".join(repr(t) for t in sorted(self._bundle_texts)[:5])
            raise ValueError(f"instruction {instruction!r} is not cached in the bundle and no "
                             f"encoder is available ({self._encoder_error}); cached: {known}...")
        emb = self._encoder.embed([instruction])[0]
        if self.cache_enabled:
            self._cache[instruction] = emb
            while len(self._cache) > len(self._bundle_texts) + self.cache_size:
                oldest = next(t for t in self._cache if t not in self._bundle_texts)
                del self._cache[oldest]
        return emb

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        obs = np.asarray(observation, dtype=np.float32).reshape(-1)
        if obs.shape[0] != self.obs_dim:
            raise ValueError(f"observation has {obs.shape[0]} values, the planner expects "
                             f"{self.obs_dim} ({', '.join(self.spec.observation.names)})")
        if not np.all(np.isfinite(obs)):
            raise ValueError("observation contains NaN or inf")
        emb = self.embed(instruction)
        self._obs[0] = obs
        (chunk,) = self.head.run(None, {"obs": self._obs, "embedding": emb[None, :]})
        self.calls += 1
        return ActionChunk(actions=chunk[0], t0=now, dt=self.info.dt_s, obs_time=now,
                           source="language_planner")

    def plan_batch(self, observations: np.ndarray, instructions: list[str],
                   now: float) -> np.ndarray:
        """Many observations at once: ``obs (n, O)``, n instructions -> ``(n, H, A)`` float32
        (the head runs once on the whole batch; embeddings come from the cache)."""
        obs = np.ascontiguousarray(observations, dtype=np.float32)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim or obs.shape[0] != len(instructions):
            raise ValueError(f"need obs (n, {self.obs_dim}) and n instructions, got obs "
                             f"{obs.shape} and {len(instructions)} instructions")
        if not np.all(np.isfinite(obs)):
            raise ValueError("observation contains NaN or inf")
        emb = np.stack([self.embed(t) for t in instructions]).astype(np.float32)
        (chunks,) = self.head.run(None, {"obs": obs, "embedding": emb})
        self.calls += 1
        return np.asarray(chunks, dtype=np.float32)

    def health(self) -> PlannerHealth:
        """Always ``OK`` once loaded (errors are reported per call)."""
        return PlannerHealth.OK
