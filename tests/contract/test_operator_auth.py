"""Signed operator messages: tags, refusals by reason, key files."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from edgerl.contract.operator_auth import (
    OperatorAuthError,
    OperatorKey,
    OperatorSigner,
    OperatorVerifier,
    intervention_payload,
    load_operator_key,
)

TOPIC = "robot/estop_reset"


@pytest.fixture
def key() -> OperatorKey:
    return OperatorKey("console", bytes(range(32)))


def test_a_fresh_signed_message_passes_once(key):
    signer, verifier = OperatorSigner(key), OperatorVerifier([key])
    now = time.time_ns()
    tag = signer.tag(TOPIC, now)
    assert verifier.check(TOPIC, tag, now) is None
    assert verifier.check(TOPIC, tag, now) == "replayed"  # the same tag again
    later = signer.tag(TOPIC, now + 1000)
    assert verifier.check(TOPIC, later, now + 1000) is None
    assert verifier.accepted == 2 and verifier.refused == {"replayed": 1}


@pytest.mark.parametrize("mutate, reason", [
    (lambda tag, now: ("", now), "unsigned"),
    (lambda tag, now: ("soak operator", now), "unsigned"),
    (lambda tag, now: (tag + " extra", now), "malformed_tag"),
    (lambda tag, now: (tag.replace("console", "stranger"), now), "unknown_key"),
    (lambda tag, now: (tag[:-1] + ("0" if tag[-1] != "0" else "1"), now), "bad_signature"),
    (lambda tag, now: (tag, now + 1), "bad_signature"),  # stamp changed after signing
    (lambda tag, now: (tag, now - 5 * 10**9), "bad_signature"),
])
def test_tampered_tags_are_refused_by_reason(key, mutate, reason):
    now = time.time_ns()
    tag = OperatorSigner(key).tag(TOPIC, now)
    frame_id, stamp = mutate(tag, now)
    assert OperatorVerifier([key]).check(TOPIC, frame_id, stamp, now_ns=now) == reason


def test_the_tag_binds_topic_payload_and_key(key):
    now = time.time_ns()
    payload = intervention_payload("override", [0.5])
    tag = OperatorSigner(key).tag("operator/intervention", now, payload)
    v = OperatorVerifier([key])
    assert v.check(TOPIC, tag, now) == "bad_signature"  # another topic
    assert v.check("operator/intervention", tag, now,
                   intervention_payload("override", [0.9])) == "bad_signature"
    other = OperatorKey("console", bytes(32))  # same id, another secret
    assert OperatorVerifier([other]).check("operator/intervention", tag, now,
                                           payload) == "bad_signature"
    assert v.check("/operator/intervention", tag, now, payload) is None  # absolute name


def test_freshness_window(key):
    signer, v = OperatorSigner(key), OperatorVerifier([key], max_age_s=1.0,
                                                      future_skew_s=0.05)
    now = time.time_ns()
    old = now - 2 * 10**9
    assert v.check(TOPIC, signer.tag(TOPIC, old), old, now_ns=now) == "stale"
    ahead = now + 10**9
    assert v.check(TOPIC, signer.tag(TOPIC, ahead), ahead, now_ns=now) == "future"
    unchecked = OperatorVerifier([key], max_age_s=0.0)  # freshness left to the caller
    assert unchecked.check(TOPIC, signer.tag(TOPIC, old), old, now_ns=now) is None


def test_sequence_numbers_keep_rising_across_a_restarted_console(key):
    first = OperatorSigner(key)
    v = OperatorVerifier([key])
    now = time.time_ns()
    assert v.check(TOPIC, first.tag(TOPIC, now), now) is None
    restarted = OperatorSigner(key)  # a new process: starts from wall-clock microseconds
    time.sleep(0.002)
    assert v.check(TOPIC, restarted.tag(TOPIC, now + 1), now + 1) is None
    seqs = [first.next_seq() for _ in range(1000)]
    assert seqs == sorted(set(seqs))


def test_float32_payload_matches_what_a_joint_state_carries():
    values = np.array([0.1, -0.7], np.float32)
    as_sent = [float(v) for v in values]  # JointState.position is float64
    assert intervention_payload("override", as_sent) == intervention_payload("override", values)


def test_key_file_round_trip_and_its_refusals(tmp_path, key, monkeypatch):
    path = key.save(tmp_path / "op.key")
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert OperatorKey.load(path) == key
    monkeypatch.setenv("EDGERL_OPERATOR_KEY", str(path))
    assert load_operator_key() == key
    with pytest.raises(OperatorAuthError, match="exists"):
        key.save(path)
    os.chmod(path, 0o644)
    with pytest.raises(OperatorAuthError, match="readable by others"):
        OperatorKey.load(path)
    bad = tmp_path / "bad.key"
    bad.write_text('{"key_id": "x"}')
    os.chmod(bad, 0o600)
    with pytest.raises(OperatorAuthError, match="hex 'secret'"):
        OperatorKey.load(bad)
    with pytest.raises(OperatorAuthError, match="No such file"):
        OperatorKey.load(tmp_path / "missing.key")
    with pytest.raises(OperatorAuthError, match="at least 16"):
        OperatorKey("short", b"123")
    with pytest.raises(OperatorAuthError, match="key id"):
        OperatorKey("has space", bytes(32))
