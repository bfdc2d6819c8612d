"""SROS2 access control for the node graph: ``edgerl ros-keystore`` writes the standard
keystore layout, its certificates chain to the CA and its S/MIME files verify against it
(checked with the ``openssl`` CLI, independently of the code under test), the permissions
follow the node code, tampering is detected, ``--force`` guards an existing keystore, and
``edgerl deploy --keystore`` refuses up front on an install that cannot enforce DDS
security (the pip Fast DDS here), starting no process."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from edgerl.apps.cli import main

pytestmark = pytest.mark.ros

ENCLAVES_SIM = {"/edgerl/robot", "/edgerl/planner", "/edgerl/edit_policy",
                "/edgerl/robot_edit", "/edgerl/monitor", "/edgerl/operator"}


def _openssl() -> str:
    exe = shutil.which("openssl") or "/usr/bin/openssl"
    if not Path(exe).is_file():
        pytest.skip("no openssl CLI")
    return exe


def _smime_verify(p7s: Path, ca: Path) -> subprocess.CompletedProcess:
    """``openssl smime -verify`` of ``p7s`` against ``ca`` (stdout: the signed text), and
    the signer must be ``ca`` itself (a certificate it issued also verifies)."""
    signer = p7s.parent / f".{p7s.name}.signer.pem"
    proc = subprocess.run([_openssl(), "smime", "-verify", "-text", "-in", str(p7s),
                           "-CAfile", str(ca), "-signer", str(signer)], capture_output=True,
                          timeout=30)
    if proc.returncode == 0:
        from cryptography import x509

        signers = x509.load_pem_x509_certificates(signer.read_bytes())
        signer.unlink()
        assert signers == [x509.load_pem_x509_certificate(ca.read_bytes())], p7s
    return proc


@pytest.fixture(scope="module")
def keystore(tmp_path_factory, rclpy_ok) -> Path:
    """A sim keystore made through the CLI verb (shared: tests that modify copy it)."""
    root = tmp_path_factory.mktemp("sros2") / "keystore"
    assert main(["ros-keystore", str(root), "--robot", "sim", "--json"]) == 0
    return root


def _copy(keystore: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "keystore"
    shutil.copytree(keystore, dst, symlinks=True)
    return dst


# --- layout --------------------------------------------------------------------------------
def test_keystore_has_the_sros2_layout(keystore):
    assert (keystore / "public/ca.cert.pem").is_file()
    assert (keystore / "private/ca.key.pem").is_file()
    for role in ("identity_ca", "permissions_ca"):
        link = keystore / f"public/{role}.cert.pem"
        assert link.is_symlink() and link.resolve() == (keystore / "public/ca.cert.pem").resolve()
        key_link = keystore / f"private/{role}.key.pem"
        assert key_link.is_symlink()
        assert key_link.resolve() == (keystore / "private/ca.key.pem").resolve()
    assert (keystore / "enclaves/governance.xml").is_file()
    assert (keystore / "enclaves/governance.p7s").is_file()
    found = {"/" + p.parent.relative_to(keystore / "enclaves").as_posix()
             for p in (keystore / "enclaves").glob("**/key.pem")}
    assert found == ENCLAVES_SIM
    for enclave in found:
        d = keystore / "enclaves" / enclave.strip("/")
        for name in ("cert.pem", "key.pem", "permissions.xml", "permissions.p7s"):
            assert (d / name).is_file() and not (d / name).is_symlink(), (enclave, name)
        for name, target in (("identity_ca.cert.pem", "public/identity_ca.cert.pem"),
                             ("permissions_ca.cert.pem", "public/permissions_ca.cert.pem"),
                             ("governance.p7s", "enclaves/governance.p7s")):
            assert (d / name).is_symlink(), (enclave, name)
            assert not os.path.isabs(os.readlink(d / name))  # relocatable
            assert (d / name).resolve() == (keystore / target).resolve()
        assert stat.S_IMODE((d / "key.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE((keystore / "private/ca.key.pem").stat().st_mode) == 0o600


def test_keystore_enclaves_follow_the_robot(tmp_path, rclpy_ok):
    from edgerl_ros.security import create_keystore, permitted_topics

    ks = create_keystore(tmp_path / "rc", "ros2_control")
    assert set(ks.grants) == ENCLAVES_SIM - {"/edgerl/robot_edit"}  # not composable
    pub, sub = permitted_topics((ks.enclave_dir("/edgerl/robot") / "permissions.xml")
                                .read_bytes())
    assert "rt/forward_command_controller/commands" in pub
    assert "rt/joint_states" in sub and "rt/robot/command" in sub
    assert "rt/robot/joint_states" in pub
    assert not any(t.startswith("rt/goal") for t in sub)

    # observations from their own topics (the bridge's observation_map) are granted too
    from edgerl_ros.security import enclave_grants

    params = {"ros2_control_bridge_node": {"observation_map":
                                           "x=slider:position, g=/goal:Float64MultiArray[0], "
                                           "h=/goal_pose:PoseStamped.pose.position.y"}}
    grant = enclave_grants("ros2_control", params)["/edgerl/robot"]
    assert {"rt/goal", "rt/goal_pose"} <= set(grant.subscribe)
    assert "rt/goal" not in grant.publish
    serial = create_keystore(tmp_path / "serial", "serial")
    pub, sub = permitted_topics((serial.enclave_dir("/edgerl/robot") / "permissions.xml")
                                .read_bytes())
    assert "rt/robot/estop" in sub and "rt/sim/expert_chunk" not in pub
    assert "rq/serial_bridge_node/get_parametersRequest" in sub


# --- certificates and signatures ------------------------------------------------------------
def test_enclave_certs_chain_to_the_ca_and_p7s_files_verify(keystore):
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from edgerl_ros.security import verify_keystore

    ca_path = keystore / "public/ca.cert.pem"
    ca = x509.load_pem_x509_certificate(ca_path.read_bytes())
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    assert ca.public_key().curve.name == "secp256r1"
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    signed = [(keystore / "enclaves/governance.p7s", keystore / "enclaves/governance.xml")]
    for d in sorted(p.parent for p in (keystore / "enclaves").glob("**/cert.pem")):
        cert = x509.load_pem_x509_certificate((d / "cert.pem").read_bytes())
        cert.verify_directly_issued_by(ca)
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        proc = subprocess.run([_openssl(), "verify", "-CAfile", str(ca_path),
                               str(d / "cert.pem")], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        enclave = "/" + d.relative_to(keystore / "enclaves").as_posix()
        assert cert.subject.rfc4514_string() == f"CN={enclave}"
        signed.append((d / "permissions.p7s", d / "permissions.xml"))
    for p7s, xml in signed:
        proc = _smime_verify(p7s, keystore / "public/permissions_ca.cert.pem")
        assert proc.returncode == 0, proc.stderr.decode()
        assert proc.stdout.replace(b"\r\n", b"\n") == xml.read_bytes()
    assert verify_keystore(keystore) == []


def test_edit_node_may_publish_the_command_and_the_monitor_may_not(keystore):
    from edgerl_ros.security import permitted_topics

    def grants(enclave: str) -> tuple[set[str], set[str]]:
        # what the middleware reads: the signed copy, not the .xml beside it
        d = keystore / "enclaves" / enclave.strip("/")
        proc = _smime_verify(d / "permissions.p7s", keystore / "public/permissions_ca.cert.pem")
        assert proc.returncode == 0
        return permitted_topics(proc.stdout)

    edit_pub, edit_sub = grants("/edgerl/edit_policy")
    assert "rt/robot/command" in edit_pub
    assert {"rt/robot/joint_states", "rt/planner/chunk", "rt/robot/estop_reset",
            "rt/operator/intervention"} <= edit_sub
    mon_pub, mon_sub = grants("/edgerl/monitor")
    assert "rt/robot/command" not in mon_pub and "rt/robot/command" in mon_sub
    assert mon_pub & {"rt/robot/estop_reset", "rt/operator/intervention"} == set()
    op_pub, _ = grants("/edgerl/operator")
    assert {"rt/robot/estop_reset", "rt/operator/intervention"} <= op_pub
    publishers = {e for e in ENCLAVES_SIM if "rt/robot/command" in grants(e)[0]}
    assert publishers == {"/edgerl/edit_policy", "/edgerl/robot_edit"}
    resetters = {e for e in ENCLAVES_SIM if "rt/robot/estop_reset" in grants(e)[0]}
    assert resetters == {"/edgerl/operator"}
    # ROS's own plumbing, as sros2's node profile grants it
    assert {"rt/rosout", "rt/parameter_events",
            "rr/edit_policy_node/get_parametersReply",
            "rr/edit_policy_node/change_stateReply"} <= edit_pub
    assert "rq/edit_policy_node/set_parametersRequest" in edit_sub
    assert not any(t.startswith("rr/planner_node/") for t in edit_pub)


def test_tampering_fails_verification(keystore, tmp_path):
    from edgerl_ros.security import (
        KeystoreError,
        create_keystore,
        verify_keystore,
        verify_signed,
    )

    ks = _copy(keystore, tmp_path)
    ca = ks / "public/permissions_ca.cert.pem"
    mon = ks / "enclaves/edgerl/monitor"
    # the .xml beside the signature grants the monitor the command topic
    xml = (mon / "permissions.xml").read_text()
    (mon / "permissions.xml").write_text(
        xml.replace("<topic>rt/planner/instruction</topic>",
                    "<topic>rt/planner/instruction</topic><topic>rt/robot/command</topic>", 1))
    assert any("monitor/permissions.xml: differs" in p for p in verify_keystore(ks))
    # the signed copy itself edited: the signature breaks
    p7s = (mon / "permissions.p7s").read_bytes()
    assert b"rt/planner/instruction" in p7s
    (mon / "permissions.p7s").write_bytes(p7s.replace(b"rt/planner/instruction",
                                                      b"rt/robot/command\r\n", 1))
    assert _smime_verify(mon / "permissions.p7s", ca).returncode != 0
    with pytest.raises(KeystoreError, match="does not verify"):
        verify_signed(mon / "permissions.p7s", ca)
    # signed anew with the enclave's own key: its certificate chains to the CA, but only
    # the permissions CA itself may grant permissions
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from edgerl_ros.security import smime_sign

    planner = ks / "enclaves/edgerl/planner"
    forged = smime_sign(xml.encode(), x509.load_pem_x509_certificate(
        (planner / "cert.pem").read_bytes()), serialization.load_pem_private_key(
        (planner / "key.pem").read_bytes(), None))
    (planner / "permissions.p7s").write_bytes(forged)
    with pytest.raises(KeystoreError, match="signed by CN=/edgerl/planner, not by the CA"):
        verify_signed(planner / "permissions.p7s", ca)
    # a certificate from another CA
    other = create_keystore(tmp_path / "other")
    shutil.copy(other.enclave_dir("/edgerl/planner") / "cert.pem",
                ks / "enclaves/edgerl/planner/cert.pem")
    problems = verify_keystore(ks)
    assert any("/edgerl/planner: cert.pem is not issued by the identity CA" in p
               for p in problems)
    assert any("/edgerl/planner: key.pem does not match" in p for p in problems)


# --- creating over something ----------------------------------------------------------------
def test_existing_keystore_is_replaced_only_with_force(keystore, tmp_path, capsys):
    ks = _copy(keystore, tmp_path)
    ca_before = (ks / "public/ca.cert.pem").read_bytes()
    capsys.readouterr()
    assert main(["ros-keystore", str(ks)]) == 1
    err = capsys.readouterr().err
    assert "already holds a keystore" in err and "--force" in err
    assert (ks / "public/ca.cert.pem").read_bytes() == ca_before
    assert main(["ros-keystore", str(ks), "--force", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {e["enclave"] for e in out["enclaves"]} == ENCLAVES_SIM
    assert (ks / "public/ca.cert.pem").read_bytes() != ca_before
    assert not list(tmp_path.glob(".keystore.*"))  # no staging or old copy left behind
    from edgerl_ros.security import verify_keystore

    assert verify_keystore(ks) == []


def test_a_file_or_a_foreign_directory_is_refused(tmp_path, capsys, rclpy_ok):
    target = tmp_path / "notadir"
    target.write_text("keep me")
    assert main(["ros-keystore", str(target), "--force"]) == 1
    assert "is not a directory" in capsys.readouterr().err
    assert target.read_text() == "keep me"
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["ros-keystore", str(foreign), "--force"]) == 1
    assert "not a keystore" in capsys.readouterr().err
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["ros-keystore", str(empty), "--domain-id", "7"]) == 0
    meta = json.loads((empty / "edgerl_keystore.json").read_text())
    assert meta["domains"] == [7, 7]
    assert "<id>7</id>" in (empty / "enclaves/governance.xml").read_text()


# --- the table against the node code --------------------------------------------------------
_CREATE = {"create_publisher": 0, "create_lifecycle_publisher": 0, "create_subscription": 1}
#: Topic arguments the code computes, per node: the ros2_control bridge's parameters.
_DYNAMIC = {"ros2_control_bridge_node": {"p['joint_states_topic']": "controller_states",
                                         "topic": "controller_command",
                                         "aux_topic": "observation_sources"}}


def _code_topics(node: str) -> tuple[set[str], set[str]]:
    """(publishes, subscribes) as topic keys, read from the ``create_*`` calls in the
    modules of ``node``'s class and its edgerl_ros bases (``NodeDiagnostics`` publishes
    diagnostics; ``subscribe_commands`` subscribes the command)."""
    from edgerl_ros.common import TOPICS
    from edgerl_ros.executables import NODE_MODULES
    from edgerl_ros.security import EXTRA_TOPICS

    by_name = {v: k for k, v in {**TOPICS, **EXTRA_TOPICS}.items()}
    mod = importlib.import_module(NODE_MODULES[node])
    cls = next(o for o in vars(mod).values() if inspect.isclass(o)
               and o.__module__ == mod.__name__ and hasattr(o, "create_subscription"))
    modules = {sys.modules[c.__module__] for c in cls.__mro__
               if c.__module__.startswith("edgerl_ros.")}
    found: tuple[set[str], set[str]] = (set(), set())
    for m in modules:
        for call in ast.walk(ast.parse(inspect.getsource(m))):
            if not isinstance(call, ast.Call):
                continue
            fn = call.func.attr if isinstance(call.func, ast.Attribute) else \
                getattr(call.func, "id", "")
            if fn == "NodeDiagnostics":
                found[0].add("diagnostics")
            elif fn == "subscribe_commands":
                found[1].add("command")
            elif fn in _CREATE:
                arg = call.args[1]
                text = ast.unparse(arg)
                if isinstance(arg, ast.Subscript) and ast.unparse(arg.value) == "TOPICS":
                    key = ast.literal_eval(arg.slice)
                elif isinstance(arg, ast.Name) and isinstance(getattr(m, arg.id, None), str) \
                        and getattr(m, arg.id) in by_name:
                    key = by_name[getattr(m, arg.id)]
                else:
                    key = _DYNAMIC.get(node, {}).get(text, f"<unknown: {text}>")
                found[_CREATE[fn]].add(key)
    return found


@pytest.mark.parametrize("node", ["sim_robot_node", "serial_bridge_node",
                                  "ros2_control_bridge_node", "planner_node",
                                  "edit_policy_node"])
def test_access_table_is_what_the_node_code_opens(node, rclpy_ok):
    from edgerl_ros.security import NODE_ACCESS

    pub, sub = _code_topics(node)
    assert (set(NODE_ACCESS[node][0]), set(NODE_ACCESS[node][1])) == (pub, sub)


def test_monitor_access_is_what_deploy_records(rclpy_ok):
    from edgerl_ros.monitor import GraphMonitor
    from edgerl_ros.security import MONITOR_NODE, NODE_ACCESS

    assert set(NODE_ACCESS[MONITOR_NODE][1]) == set(GraphMonitor.RECORDED)
    assert NODE_ACCESS[MONITOR_NODE][0] == ("instruction",)


# --- can this install enforce it? -----------------------------------------------------------
def _venv_fastdds() -> list[Path]:
    return sorted(p for p in Path(sys.prefix, "lib").glob("libfastdds.so*") if p.is_file())


def test_security_supported_says_no_here_with_the_reason(rclpy_ok):
    from edgerl_ros.security import fastdds_has_security, security_supported

    libs = _venv_fastdds()
    if not libs or any(fastdds_has_security(p) for p in libs):
        pytest.skip("not the pip Fast DDS without security plugins")
    security_supported.cache_clear()
    ok, reason = security_supported()
    assert ok is False
    assert "built without DDS security" in reason
    assert "ROS_SECURITY_STRATEGY=Enforce failed to start" in reason  # the probe ran
    assert "install ROS 2 from the distribution packages" in reason
    assert str(libs[0].parent) in reason


def test_fastdds_security_scan_finds_the_plugin_marks(tmp_path):
    from edgerl_ros.security import fastdds_has_security

    lib = tmp_path / "libfastdds.so.9"
    lib.write_bytes(b"\0" * ((1 << 20) - 5) + b"dds.sec.auth.plugin" + b"\0" * 100)
    assert fastdds_has_security(lib)  # across the read chunk boundary
    lib.write_bytes(b"\0" * 4096 + b"dds.sec" + b"\0" * 100)
    assert not fastdds_has_security(lib)


def _processes_with_env(text: str) -> list[int]:
    """PIDs of live processes whose environment mentions ``text``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if text.encode() in (entry / "environ").read_bytes() \
                    and "State:\tZ" not in (entry / "status").read_text():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_deploy_with_a_keystore_fails_before_starting_anything(
        keystore, session_bundle, ros_domain, monkeypatch, capsys):
    from edgerl_ros.processes import GraphProcesses
    from edgerl_ros.security import fastdds_has_security, security_supported
    from edgerl_ros.session import MonitorSession

    libs = _venv_fastdds()
    if not libs or any(fastdds_has_security(p) for p in libs):
        pytest.skip("not the pip Fast DDS without security plugins")
    started = []
    monkeypatch.setattr(GraphProcesses, "_spawn",
                        lambda self, name, *a: started.append(name) or pytest.fail(name))
    monkeypatch.setattr(MonitorSession, "__enter__",
                        lambda self: started.append("monitor") or pytest.fail("monitor"))
    security_supported.cache_clear()
    rc = main(["deploy", "--bundle", str(session_bundle), "--robot", "sim",
               "--keystore", str(keystore), "--domain-id", str(ros_domain),
               "--duration", "2"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "--keystore: this ROS 2 middleware was built without DDS security" in err
    assert "install ROS 2 from the distribution packages" in err
    assert started == []
    assert _processes_with_env(str(keystore.resolve())) == []


def test_graph_security_gives_each_process_its_enclave(keystore, monkeypatch, rclpy_ok):
    from edgerl_ros import security

    monkeypatch.setattr(security, "security_supported", lambda: (True, "test"))
    sec, domain = security.graph_security(keystore, "sim",
                                          ["sim_robot_node", "planner_node",
                                           "edit_policy_node"], None)
    assert domain is None  # every domain granted: deploy picks one
    env = sec.process_env("planner_node")
    assert env == {"ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Enforce",
                   "ROS_SECURITY_KEYSTORE": str(keystore.resolve()),
                   "ROS_SECURITY_ENCLAVE_OVERRIDE": "/edgerl/planner"}
    assert sec.process_env("robot_edit_container")["ROS_SECURITY_ENCLAVE_OVERRIDE"] \
        == "/edgerl/robot_edit"
    saved = os.environ.get("ROS_SECURITY_ENABLE")
    with sec.monitor_environ():
        assert os.environ["ROS_SECURITY_ENCLAVE_OVERRIDE"] == "/edgerl/monitor"
        assert os.environ["ROS_SECURITY_STRATEGY"] == "Enforce"
    assert os.environ.get("ROS_SECURITY_ENABLE") == saved
    with pytest.raises(security.KeystoreError, match="made for --robot sim, not serial"):
        security.graph_security(keystore, "serial", ["serial_bridge_node"], None)
    monkeypatch.setattr(security, "security_supported", lambda: (False, "no plugins"))
    with pytest.raises(security.KeystoreError, match="no plugins"):
        security.graph_security(keystore, "sim", ["planner_node"], None)
