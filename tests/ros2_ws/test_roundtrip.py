"""``edgerl_ros.roundtrip``: the paced rclpy round trip between two real processes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros


def test_paced_round_trips_come_back(ros_domain):
    from edgerl_ros.roundtrip import measure

    out = measure(n=40, period_s=0.005, domain_id=ros_domain)
    assert 32 <= out["n"] <= 36 and out["domain_id"] == ros_domain  # >= 90 % back, 4 warm-up
    assert 0 < out["rtt_p50_us"] <= out["rtt_p99_us"] < 100_000  # each waited <= 100 ms
    assert out["executor"] == "single" and out["period_ms"] == pytest.approx(5.0)


@pytest.mark.parametrize("kw, match", [({"n": 5}, "n must be >= 10"),
                                       ({"period_s": -1.0}, "period_s >= 0"),
                                       ({"kind": "multi"}, "kind one of")])
def test_bad_arguments_are_named(kw, match):
    from edgerl_ros.roundtrip import measure

    with pytest.raises(ValueError, match=match):
        measure(**kw)
