"""The edgerl ROS nodes read their bundle through the one gate (``declare_with_bundle`` ->
``verify_bundle``): with ``EDGERL_BUNDLE_PUBKEY`` set, a manifest edited after signing is
refused at start, as ``Deployment.from_bundle`` refuses it (the planner node loaded it)."""

from __future__ import annotations

import json

import pytest

from tests.helpers.bundles import write_mlp_bundle

pytestmark = pytest.mark.ros
pytest.importorskip("cryptography")


def test_the_planner_node_refuses_a_manifest_edited_after_signing(rclpy_context, tmp_path,
                                                                  monkeypatch):
    from edgerl_ros.planner_node import PlannerNode
    from rclpy.parameter import Parameter

    from edgerl.contract.bundle_errors import BundleSignatureError
    from edgerl.runtime.bundle_sign import generate_keypair, sign_manifest

    priv, pub = generate_keypair(tmp_path / "keys")
    bundle = write_mlp_bundle(tmp_path / "bundle", hidden=(8,), planner=True)
    sign_manifest(bundle, priv)
    monkeypatch.setenv("EDGERL_BUNDLE_PUBKEY", str(pub))
    node = PlannerNode(context=rclpy_context,
                       parameter_overrides=[Parameter("bundle", value=str(bundle))])
    node.destroy_node()  # the control: signed and untouched, it starts
    doc = json.loads((bundle / "manifest.json").read_text())
    doc["timing"]["hold_s"] = 4.0  # within bounds: only the signature can tell
    (bundle / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(BundleSignatureError):
        PlannerNode(context=rclpy_context,
                    parameter_overrides=[Parameter("bundle", value=str(bundle))])
