"""PolicySpec / manifest.json: round trip, every validation error names its field, hashes."""

from __future__ import annotations

import json

import pytest

from edgerl.contract.serde import SchemaError
from edgerl.contract.spec import (
    SCHEMA_VERSION,
    BundleError,
    LatencyModel,
    PolicySpec,
    RecurrentSpec,
    load_bundle_manifest,
    sha256_file,
)
from tests.helpers import specs


def make_spec(**overrides) -> PolicySpec:
    """A 3-obs 1-action pendulum GRU spec with a latency model (every optional part set)."""
    kwargs = dict(
        control_hz=50.0, horizon=16, chunk_dt=0.02, period_s=0.1, expected_latency_s=0.12,
        residual_bound=0.5, task="pendulum",
        observation=dict(names=["cos", "sin", "omega"], units=["", "", "rad/s"],
                         std=[1.0, 1.0, 2.0]),
        action=dict(names=["torque"], units=["N*m"], low=[-2.0], high=[2.0]),
        latency=LatencyModel(planner_delay_steps=6, planner_period_steps=5),
        recurrent=RecurrentSpec(kind="gru", state_inputs=["h_in"], state_outputs=["h_out"],
                                state_shapes=[[1, 1, 32]]),
    )
    return specs.make_spec(3, 1, **{**kwargs, **overrides})


def test_round_trip_is_exact():
    spec = make_spec()
    text = spec.to_json()
    again = PolicySpec.from_json(text)
    assert again == spec
    assert again.to_json() == text
    data = json.loads(text)
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["action"]["max_rate"] == [0.0]
    assert spec.control_dt == pytest.approx(0.02)


def test_save_and_load_directory(tmp_path):
    make_spec().save(tmp_path)
    assert PolicySpec.load(tmp_path) == make_spec()


def _mutated(mutate) -> dict:
    data = make_spec().to_dict()
    mutate(data)
    return data


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.pop("control_hz"), r"manifest\.control_hz: missing required field"),
    (lambda d: d["observation"].pop("names"), r"manifest\.observation\.names: missing"),
    (lambda d: d.update(control_hz="fast"), r"manifest\.control_hz: expected a number"),
    (lambda d: d["action"]["low"].__setitem__(0, "x"), r"action\.low\[0\]: expected a number"),
    (lambda d: d["chunk"].update(horizon=2.5), r"manifest\.chunk\.horizon: expected an integer"),
    (lambda d: d["chunk"].update(horizon=True), r"manifest\.chunk\.horizon: expected an integer"),
    (lambda d: d["observation"].update(normalized_in_graph=1), r"in_graph: expected true/false"),
    (lambda d: d.update(task=3), r"manifest\.task: expected a string"),
    (lambda d: d.update(bogus=1), r"manifest\.bogus: unknown field"),
    (lambda d: d.update(schema_version=SCHEMA_VERSION + 1),
     rf"schema_version: {SCHEMA_VERSION + 1} is newer"),
    (lambda d: d.update(schema_version=0), r"schema_version: unknown version 0"),
    (lambda d: d.update(schema_version="1"), r"schema_version: expected an integer"),
    (lambda d: d.pop("schema_version"), r"schema_version: missing"),
    (lambda d: d.update(observation=[1]), r"manifest\.observation: expected an object"),
    (lambda d: d["observation"].update(std=[1.0, 0.0, 1.0]), r"observation\.std\[1\]: must be > 0"),
    (lambda d: d["observation"].update(units=[""]), r"observation\.units: expected 3 entries"),
    (lambda d: d["action"].update(low=[3.0]), r"action\.low\[0\]: must be below"),
    (lambda d: d["chunk"].update(dt_s=0), r"chunk\.dt_s: must be > 0"),
    (lambda d: d["edit_obs"].update(obs_dim=4), r"edit_obs\.obs_dim: 4 does not match"),
    (lambda d: d["recurrent"].update(kind="rnn"), r"recurrent\.kind: must be none, gru or lstm"),
    (lambda d: d["latency"].update(planner_delay_steps=-1), r"latency\.planner_delay_steps"),
    (lambda d: d["latency"].update(delay_distribution=[0.5, 0.2]), r"delay_distribution"),
    (lambda d: d["files"].update({"policy.onnx": 5}), r"files\.policy\.onnx: expected a str"),
])
def test_validation_errors_name_the_field(mutate, message):
    with pytest.raises(SchemaError, match=message):
        PolicySpec.from_dict(_mutated(mutate))


def test_not_json():
    with pytest.raises(SchemaError, match="not valid JSON"):
        PolicySpec.from_json("{nope")


def test_nan_cannot_be_written():
    spec = make_spec()
    spec.extra["x"] = float("nan")
    with pytest.raises(ValueError):
        spec.to_json()


class TestBundleHashes:
    def _bundle(self, tmp_path):
        (tmp_path / "policy.onnx").write_bytes(b"onnx-bytes")
        spec = make_spec(files={"policy.onnx": sha256_file(tmp_path / "policy.onnx")})
        spec.save(tmp_path)
        return tmp_path

    def test_valid_bundle_loads(self, tmp_path):
        spec = load_bundle_manifest(self._bundle(tmp_path))
        assert spec.files["policy.onnx"] == sha256_file(tmp_path / "policy.onnx")

    def test_tampered_file_rejected(self, tmp_path):
        bundle = self._bundle(tmp_path)
        (bundle / "policy.onnx").write_bytes(b"retrained")
        with pytest.raises(BundleError, match=r"policy\.onnx: sha256 mismatch"):
            load_bundle_manifest(bundle)
        load_bundle_manifest(bundle, verify=False)  # explicit opt-out still reads

    def test_missing_file_rejected(self, tmp_path):
        bundle = self._bundle(tmp_path)
        (bundle / "policy.onnx").unlink()
        with pytest.raises(BundleError, match="listed in the manifest but missing"):
            load_bundle_manifest(bundle)

    def test_missing_dir_and_manifest(self, tmp_path):
        with pytest.raises(BundleError, match="bundle directory not found"):
            load_bundle_manifest(tmp_path / "nope")
        with pytest.raises(BundleError, match="no manifest found"):
            load_bundle_manifest(tmp_path)
