"""Access control for edgerl's node graph the ROS 2 way: SROS2 keystores (DDS Security).

Without it any participant on the ROS domain may publish ``robot/command``, re-arm the e-stop
(``robot/estop_reset``) or inject an operator intervention. DDS Security binds each process to
an *enclave*: an identity certificate signed by the keystore's CA plus a ``permissions.xml``,
signed by the same CA, that lists the DDS topics it may publish and subscribe. With
``ROS_SECURITY_STRATEGY=Enforce`` a participant whose enclave is missing or invalid does not
start, and a writer or reader its permissions do not grant is refused, locally and by every
remote participant.

:func:`create_keystore` writes the layout ``ros2 security create_keystore`` /
``create_enclave`` produce (so ``ros2 security`` tools read it)::

    DIR/public/ca.cert.pem                 the CA (ECDSA P-256, self-signed)
    DIR/public/{identity,permissions}_ca.cert.pem -> ca.cert.pem
    DIR/private/ca.key.pem                 (0600; private/{identity,permissions}_ca.key.pem links)
    DIR/enclaves/governance.xml, governance.p7s   (S/MIME, signed by the permissions CA)
    DIR/enclaves/edgerl/<name>/            one enclave per process (:data:`ENCLAVES`):
        cert.pem, key.pem, identity_ca.cert.pem, permissions_ca.cert.pem, governance.p7s,
        permissions.xml, permissions.p7s
    DIR/edgerl_keystore.json               which robot and domains it was made for

The permissions come from one table, :data:`NODE_ACCESS` (what each node publishes and
subscribes, read off the node code; ``tests/ros2_ws/test_security.py`` checks it against the
``create_publisher`` / ``create_subscription`` calls), plus every node's own ROS plumbing as
sros2's common node profile grants it (``rosout``, ``parameter_events``, ``clock``, its
parameter and type-description services, a lifecycle node's state services,
``ros_discovery_info``). Everything else is denied (``<default>DENY</default>``).

:func:`security_supported` says whether this install can enforce any of it: the pip wheels
of Fast DDS are built without the security plugins, and then ``edgerl deploy --keystore``
refuses to start (:func:`graph_security`) instead of running unprotected.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ENCLAVES", "MONITOR_ENCLAVE", "MONITOR_NODE", "NODE_ACCESS", "OPERATOR_NODE",
           "PROCESS_ENCLAVES", "GraphSecurity", "Keystore", "KeystoreError",
           "create_keystore", "dds_permissions", "graph_security", "load_keystore",
           "security_supported", "verify_keystore", "verify_signed"]

log = logging.getLogger(__name__)

#: The node of ``edgerl deploy``'s own process (records, measures, sets the instruction).
MONITOR_NODE = "edgerl_deploy_monitor"
#: The node name an operator tool runs under in the ``/edgerl/operator`` enclave.
OPERATOR_NODE = "edgerl_operator"
MONITOR_ENCLAVE = "/edgerl/monitor"

# --- who may publish and subscribe what ------------------------------------------------------
#: Topic keys besides :data:`edgerl_ros.common.TOPICS`: the serial bridge's e-stop line
#: (``serial_bridge_node.ESTOP_TOPIC``) and the ros2_control bridge's controller side, whose
#: names are that node's parameters (resolved by :func:`topic_names` from a parameter file).
EXTRA_TOPICS = {"estop": "robot/estop",
                "controller_states": "{joint_states_topic}",
                "controller_command": "{command_topic}",
                "observation_sources": "{observation_map topics}"}

#: node -> (topics it publishes, topics it subscribes), as keys of ``TOPICS`` /
#: :data:`EXTRA_TOPICS`. The one table the permissions come from: review changes here.
#: A subscription a parameter switches off (the planner's expert chunks, the edit node's
#: state and episode when composed) is listed: the node may open it.
NODE_ACCESS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sim_robot_node": (("state", "expert", "episode", "diagnostics"), ("command",)),
    "serial_bridge_node": (("state", "diagnostics"), ("command", "estop", "estop_reset")),
    "ros2_control_bridge_node": (("state", "controller_command", "diagnostics"),
                                 ("command", "controller_states", "observation_sources")),
    "planner_node": (("chunk", "diagnostics"), ("state", "instruction", "expert", "episode")),
    "edit_policy_node": (("command", "diagnostics"),
                         ("state", "chunk", "episode", "estop_reset", "intervention")),
    # edgerl deploy's process: reads everything it records, writes only the instruction
    MONITOR_NODE: (("instruction",), ("state", "command", "chunk", "instruction", "episode",
                                      "intervention", "diagnostics")),
    # an operator's tool: the e-stop, its re-arm and interventions; reads /diagnostics
    # (where a latched e-stop shows)
    OPERATOR_NODE: (("estop_reset", "intervention", "estop"), ("diagnostics",)),
}
#: Lifecycle nodes (their state services and ``transition_event`` are granted too).
LIFECYCLE_NODES = ("edit_policy_node",)
#: ``--robot`` -> the node that speaks for the robot (the ``/edgerl/robot`` enclave).
ROBOT_NODES = {"sim": "sim_robot_node", "serial": "serial_bridge_node",
               "ros2_control": "ros2_control_bridge_node"}
#: Robots whose node can host the edit node in one process (``edgerl deploy --compose``).
COMPOSABLE = ("sim", "serial")

#: enclave -> the nodes running in it; ``"robot"`` stands for the ``--robot`` node.
ENCLAVES: dict[str, tuple[str, ...]] = {
    "/edgerl/robot": ("robot",),
    "/edgerl/planner": ("planner_node",),
    "/edgerl/edit_policy": ("edit_policy_node",),
    "/edgerl/robot_edit": ("robot", "edit_policy_node"),  # composed (one participant)
    MONITOR_ENCLAVE: (MONITOR_NODE,),
    "/edgerl/operator": (OPERATOR_NODE,),
}
#: process ``edgerl deploy`` starts -> its enclave (``ROS_SECURITY_ENCLAVE_OVERRIDE``).
PROCESS_ENCLAVES = {"sim_robot_node": "/edgerl/robot", "serial_bridge_node": "/edgerl/robot",
                    "ros2_control_bridge_node": "/edgerl/robot",
                    "planner_node": "/edgerl/planner", "edit_policy_node": "/edgerl/edit_policy",
                    "robot_edit_container": "/edgerl/robot_edit",
                    "serial_edit_container": "/edgerl/robot_edit"}

#: Parameter services every rclpy node serves (sros2's common ``node/parameters.xml``).
PARAMETER_SERVICES = ("describe_parameters", "get_parameter_types", "get_parameters",
                      "list_parameters", "set_parameters", "set_parameters_atomically")
#: Services a lifecycle node serves (sros2's common ``lifecycle_node.xml``).
LIFECYCLE_SERVICES = ("change_state", "get_available_states", "get_available_transitions",
                      "get_state", "get_transition_graph")
#: ROS domains a keystore grants by default: all of them (``edgerl deploy`` picks one at
#: random); ``--domain-id`` pins one.
ALL_DOMAINS = (0, 232)

META_FILE = "edgerl_keystore.json"
CA_COMMON_NAME = "edgerlCA"
CERT_DAYS = 3650
SECURITY_ENV = ("ROS_SECURITY_ENABLE", "ROS_SECURITY_STRATEGY", "ROS_SECURITY_KEYSTORE",
                "ROS_SECURITY_ENCLAVE_OVERRIDE")


class KeystoreError(RuntimeError):
    """A keystore cannot be made, read or used here (the message says why)."""


# --- topic names -----------------------------------------------------------------------------
def topic_names(robot: str = "sim", params: Mapping[str, Mapping[str, Any]] | None = None
                ) -> dict[str, str | tuple[str, ...]]:
    """Every topic key of :data:`NODE_ACCESS` -> its ROS name (a tuple of names for
    ``observation_sources``), the ros2_control bridge's from ``params`` (``{node: {name:
    value}}``, as ``graph_config.load_params_yaml`` returns) when ``robot`` is
    ``ros2_control``."""
    from edgerl_ros.common import TOPICS

    names: dict[str, str | tuple[str, ...]] = {**TOPICS, **EXTRA_TOPICS,
                                               "observation_sources": ()}
    if robot == "ros2_control":
        from edgerl_ros.ros2_control_bridge_node import DEFAULT_COMMAND_TOPICS, PARAMS
        from edgerl_ros.ros2_control_maps import source_topics

        p = {s.name: s.default for s in PARAMS}
        p.update((params or {}).get("ros2_control_bridge_node", {}))
        names["controller_states"] = str(p["joint_states_topic"])
        names["controller_command"] = str(p["command_topic"]
                                          or DEFAULT_COMMAND_TOPICS[p["command_interface"]])
        names["observation_sources"] = source_topics(str(p.get("observation_map") or ""))
    return names


def _as_names(value: str | tuple[str, ...]) -> tuple[str, ...]:
    """A :func:`topic_names` value as a tuple of ROS names."""
    return (value,) if isinstance(value, str) else tuple(value)


def _fqn(name: str) -> str:
    """A topic or service name as the graph resolves it (every edgerl node runs in ``/``)."""
    return name if name.startswith("/") else "/" + name


def dds_topic(name: str, kind: str = "rt") -> str:
    """The DDS topic of a ROS name: ``rt/robot/command`` (``rq``/``rr``: a service's
    request/reply, ``Request``/``Reply`` appended)."""
    suffix = {"rt": "", "rq": "Request", "rr": "Reply"}[kind]
    return f"{kind}{_fqn(name)}{suffix}"


def ros_plumbing(node: str) -> tuple[set[str], set[str]]:
    """What any rclpy node ``node`` publishes and subscribes on its own (DDS names), as
    sros2's common node profile grants it: ``rosout``, ``parameter_events`` (both ways),
    ``clock``, its parameter services (reply and request), ``get_type_description``,
    a lifecycle node's services and ``transition_event``, and ``ros_discovery_info``."""
    pub = {dds_topic("rosout"), dds_topic("parameter_events"), "ros_discovery_info"}
    sub = {dds_topic("parameter_events"), dds_topic("clock"), "ros_discovery_info"}
    services = [*PARAMETER_SERVICES, "get_type_description"]
    if node in LIFECYCLE_NODES:
        services += LIFECYCLE_SERVICES
        pub.add(dds_topic(f"{node}/transition_event"))
    for srv in services:
        name = f"{node}/{srv}"
        pub |= {dds_topic(name, "rr"), dds_topic(name, "rq")}
        sub |= {dds_topic(name, "rq"), dds_topic(name, "rr")}
    return pub, sub


@dataclass(frozen=True)
class EnclaveGrant:
    """One enclave's grant: the nodes in it and the DDS topics it may publish / subscribe
    (sorted), ``topics_*`` the ROS topics of the graph among them (for people)."""

    name: str
    nodes: tuple[str, ...]
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    topics_published: tuple[str, ...]
    topics_subscribed: tuple[str, ...]


def enclave_grants(robot: str = "sim", params: Mapping[str, Mapping[str, Any]] | None = None
                   ) -> dict[str, EnclaveGrant]:
    """The enclaves of a keystore for ``robot`` (``sim``, ``serial``, ``ros2_control``) with
    what each may publish and subscribe, from :data:`NODE_ACCESS`; ``/edgerl/robot_edit``
    only where the robot composes with the edit node."""
    if robot not in ROBOT_NODES:
        raise KeystoreError(f"robot {robot!r}: choose one of {', '.join(ROBOT_NODES)}")
    names = topic_names(robot, params)
    grants = {}
    for enclave, nodes in ENCLAVES.items():
        if enclave == "/edgerl/robot_edit" and robot not in COMPOSABLE:
            continue
        nodes = tuple(ROBOT_NODES[robot] if n == "robot" else n for n in nodes)
        ros_pub = sorted({_fqn(t) for n in nodes for k in NODE_ACCESS[n][0]
                          for t in _as_names(names[k])})
        ros_sub = sorted({_fqn(t) for n in nodes for k in NODE_ACCESS[n][1]
                          for t in _as_names(names[k])})
        pub = {dds_topic(t) for t in ros_pub}
        sub = {dds_topic(t) for t in ros_sub}
        for n in nodes:
            p, s = ros_plumbing(n)
            pub |= p
            sub |= s
        grants[enclave] = EnclaveGrant(enclave, nodes, tuple(sorted(pub)), tuple(sorted(sub)),
                                       tuple(ros_pub), tuple(ros_sub))
    return grants


# --- XML documents ---------------------------------------------------------------------------
_XSI = "http://www.w3.org/2001/XMLSchema-instance"
_OMG = "http://www.omg.org/spec/DDS-SECURITY/20170901/omg_shared_ca_{}.xsd"


def _domains(parent: ET.Element, domains: tuple[int, int]) -> None:
    el = ET.SubElement(parent, "domains")
    if domains[0] == domains[1]:
        ET.SubElement(el, "id").text = str(domains[0])
    else:
        rng = ET.SubElement(el, "id_range")
        ET.SubElement(rng, "min").text = str(domains[0])
        ET.SubElement(rng, "max").text = str(domains[1])


def _document(root: ET.Element) -> bytes:
    ET.indent(root, space="  ")
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8") \
        + b"\n"


def _dds_root(schema: str) -> ET.Element:
    ET.register_namespace("xsi", _XSI)
    return ET.Element("dds", {f"{{{_XSI}}}noNamespaceSchemaLocation": _OMG.format(schema)})


def dds_governance(domains: tuple[int, int]) -> bytes:
    """governance.xml: sros2's default rule (no unauthenticated participants, join access
    control, discovery and liveliness encrypted, RTPS signed; on every topic read and write
    access control with encrypted data and metadata) for ``domains`` (min, max)."""
    dds = _dds_root("governance")
    rule = ET.SubElement(ET.SubElement(dds, "domain_access_rules"), "domain_rule")
    _domains(rule, domains)
    for tag, text in (("allow_unauthenticated_participants", "false"),
                      ("enable_join_access_control", "true"),
                      ("discovery_protection_kind", "ENCRYPT"),
                      ("liveliness_protection_kind", "ENCRYPT"),
                      ("rtps_protection_kind", "SIGN")):
        ET.SubElement(rule, tag).text = text
    topic = ET.SubElement(ET.SubElement(rule, "topic_access_rules"), "topic_rule")
    for tag, text in (("topic_expression", "*"), ("enable_discovery_protection", "true"),
                      ("enable_liveliness_protection", "true"),
                      ("enable_read_access_control", "true"),
                      ("enable_write_access_control", "true"),
                      ("metadata_protection_kind", "ENCRYPT"),
                      ("data_protection_kind", "ENCRYPT")):
        ET.SubElement(topic, tag).text = text
    return _document(dds)


def dds_permissions(grant: EnclaveGrant, domains: tuple[int, int],
                    not_before: datetime.datetime, not_after: datetime.datetime) -> bytes:
    """permissions.xml of one enclave: subject ``CN=<enclave>``, valid like its certificate,
    one allow rule with exactly ``grant``'s topics, everything else denied."""
    dds = _dds_root("permissions")
    g = ET.SubElement(ET.SubElement(dds, "permissions"), "grant", {"name": grant.name})
    ET.SubElement(g, "subject_name").text = f"CN={grant.name}"
    validity = ET.SubElement(g, "validity")
    ET.SubElement(validity, "not_before").text = _iso(not_before)
    ET.SubElement(validity, "not_after").text = _iso(not_after)
    rule = ET.SubElement(g, "allow_rule")
    _domains(rule, domains)
    for tag, topics in (("publish", grant.publish), ("subscribe", grant.subscribe)):
        if topics:
            el = ET.SubElement(ET.SubElement(rule, tag), "topics")
            for t in topics:
                ET.SubElement(el, "topic").text = t
    ET.SubElement(g, "default").text = "DENY"
    return _document(dds)


def _iso(t: datetime.datetime) -> str:
    return t.astimezone(datetime.timezone.utc).replace(tzinfo=None, microsecond=0).isoformat()


def permitted_topics(permissions_xml: bytes | str) -> tuple[set[str], set[str]]:
    """(DDS topics published, subscribed) that the allow rules of a permissions.xml grant."""
    root = ET.fromstring(permissions_xml)
    pub = {t.text or "" for t in root.iterfind("permissions/grant/allow_rule/publish/topics/topic")}
    sub = {t.text or ""
           for t in root.iterfind("permissions/grant/allow_rule/subscribe/topics/topic")}
    return pub, sub


# --- certificates and signatures -------------------------------------------------------------
def _key_and_cert(subject: str, *, ca: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
    """An ECDSA P-256 key (DDS Security's prime256v1) and its certificate, CN ``subject``:
    self-signed CA (``ca`` None, path length 1) or signed by ``ca`` = (ca cert, ca key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    builder = (x509.CertificateBuilder()
               .subject_name(name)
               .issuer_name(name if ca is None else ca[0].subject)
               .serial_number(x509.random_serial_number())
               # a day early, like sros2: a peer whose clock lags still accepts it
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
               .public_key(key.public_key())
               .add_extension(x509.BasicConstraints(ca=ca is None,
                                                    path_length=1 if ca is None else None),
                              critical=ca is None))
    cert = builder.sign(key if ca is None else ca[1], hashes.SHA256())
    return key, cert


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def smime_sign(data: bytes, cert: Any, key: Any) -> bytes:
    """``data`` as S/MIME (multipart/signed, text/plain, detached SHA-256 signature by
    ``cert``/``key``): the form DDS Security reads governance and permissions in."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.serialization import pkcs7

    return (pkcs7.PKCS7SignatureBuilder().set_data(data).add_signer(cert, key, hashes.SHA256())
            .sign(serialization.Encoding.SMIME,
                  [pkcs7.PKCS7Options.Text, pkcs7.PKCS7Options.DetachedSignature]))


def verify_signed(p7s: Path, ca_cert: Path) -> bytes:
    """Check the S/MIME file ``p7s`` was signed by ``ca_cert`` itself (``openssl smime
    -verify``, and the signer is that certificate, not merely one it issued: an enclave's
    own key must not pass for the permissions CA) and return the signed text.

    Raises:
        KeystoreError: no ``openssl`` on PATH, or the signature does not verify.
    """
    from cryptography import x509

    exe = shutil.which("openssl")
    if exe is None:
        raise KeystoreError("openssl is not on PATH: cannot verify S/MIME signatures")
    with tempfile.TemporaryDirectory(prefix="edgerl-smime-") as tmp:
        signer = Path(tmp) / "signer.pem"
        proc = subprocess.run([exe, "smime", "-verify", "-text", "-in", str(p7s), "-CAfile",
                               str(ca_cert), "-purpose", "any", "-signer", str(signer)],
                              capture_output=True, timeout=30)
        signers = x509.load_pem_x509_certificates(signer.read_bytes()) \
            if proc.returncode == 0 else []
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise KeystoreError(f"{p7s}: signature does not verify against {ca_cert}: "
                            f"{err[0] if err else 'openssl exit ' + str(proc.returncode)}")
    ca = x509.load_pem_x509_certificate(Path(ca_cert).read_bytes())
    if signers != [ca]:
        names = ", ".join(c.subject.rfc4514_string() for c in signers) or "nobody"
        raise KeystoreError(f"{p7s}: signed by {names}, not by the CA {ca_cert} itself")
    return proc.stdout.replace(b"\r\n", b"\n")


# --- the keystore ----------------------------------------------------------------------------
@dataclass
class Keystore:
    """A keystore made by :func:`create_keystore`: its directory, the robot its
    ``/edgerl/robot`` enclave is for, the ROS domains (min, max) it grants, and each
    enclave's grant (read back by :func:`load_keystore`: the nodes and graph topics only;
    the DDS topic lists live in the signed permissions).
    """

    root: Path
    robot: str
    domains: tuple[int, int]
    grants: dict[str, EnclaveGrant] = field(default_factory=dict)

    def enclave_dir(self, enclave: str) -> Path:
        return self.root / "enclaves" / enclave.strip("/")

    def summary(self) -> list[dict[str, Any]]:
        """One row per enclave: its nodes and the graph topics it may publish / read."""
        return [{"enclave": g.name, "nodes": ", ".join(g.nodes),
                 "publishes": ", ".join(g.topics_published) or "-",
                 "subscribes": ", ".join(g.topics_subscribed) or "-"}
                for g in self.grants.values()]


def _is_keystore(path: Path) -> bool:
    return (path / "public" / "ca.cert.pem").is_file() \
        or (path / "enclaves" / "governance.p7s").is_file()


def create_keystore(root: str | Path, robot: str = "sim", *,
                    params: Mapping[str, Mapping[str, Any]] | None = None,
                    domain_id: int | None = None, force: bool = False) -> Keystore:
    """Write an SROS2 keystore for edgerl's graph at ``root`` (layout: module docstring).

    It is built beside ``root`` and moved into place only when complete, so a failure never
    leaves half a keystore, and with ``force`` the old one is replaced in one rename.

    Args:
        root: Keystore directory (absent or empty, or an existing keystore with ``force``).
        robot: The robot side the ``/edgerl/robot`` enclave is for (:data:`ROBOT_NODES`).
        params: Parameters ``{node: {name: value}}`` (the ros2_control bridge's topics).
        domain_id: Grant only this ROS domain (default: every domain, 0..232).
        force: Replace an existing keystore (a new CA: every old enclave stops working).

    Raises:
        KeystoreError: ``root`` is a file, an existing keystore without ``force``, or a
            non-empty directory that is not a keystore; unknown robot; bad domain.
    """
    root = Path(root)
    if root.is_symlink():
        raise KeystoreError(f"{root} is a symbolic link; give the directory it points to")
    if root.exists() and not root.is_dir():
        raise KeystoreError(f"{root} exists and is not a directory")
    if domain_id is not None and not 0 <= domain_id <= ALL_DOMAINS[1]:
        raise KeystoreError(f"domain id must be in 0..{ALL_DOMAINS[1]}, got {domain_id}")
    occupied = root.is_dir() and any(root.iterdir())
    if occupied and not _is_keystore(root):
        raise KeystoreError(f"{root} is a non-empty directory that is not a keystore; "
                            "choose another directory (not even --force replaces it)")
    if occupied and not force:
        raise KeystoreError(f"{root} already holds a keystore; pass --force to replace it "
                            "(a new CA: enclaves copied elsewhere stop working)")
    domains = ALL_DOMAINS if domain_id is None else (domain_id, domain_id)
    grants = enclave_grants(robot, params)
    root.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{root.name}.new-", dir=root.parent))
    try:
        _write_keystore(stage, robot, domains, grants)
        if root.is_dir() and not occupied:
            root.rmdir()
        if occupied:
            old = Path(tempfile.mkdtemp(prefix=f".{root.name}.old-", dir=root.parent))
            old.rmdir()
            root.rename(old)
            stage.rename(root)
            shutil.rmtree(old, ignore_errors=True)
        else:
            stage.rename(root)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    log.info("keystore %s: %d enclaves for robot %s", root, len(grants), robot)
    return Keystore(root, robot, domains, grants)


def _link(dst: Path, target: Path) -> None:
    """``dst`` -> ``target`` (a relative link, so the keystore can move)."""
    dst.symlink_to(os.path.relpath(target, dst.parent))


def _write_keystore(root: Path, robot: str, domains: tuple[int, int],
                    grants: Mapping[str, EnclaveGrant]) -> None:
    public, private, enclaves = root / "public", root / "private", root / "enclaves"
    public.mkdir()
    private.mkdir(mode=0o700)
    enclaves.mkdir()
    ca_key, ca_cert = _key_and_cert(CA_COMMON_NAME)
    (public / "ca.cert.pem").write_bytes(_pem_cert(ca_cert))
    _write_private(private / "ca.key.pem", _pem_key(ca_key))
    for role in ("identity_ca", "permissions_ca"):  # one CA plays both roles, as in sros2
        _link(public / f"{role}.cert.pem", public / "ca.cert.pem")
        _link(private / f"{role}.key.pem", private / "ca.key.pem")
    governance = dds_governance(domains)
    (enclaves / "governance.xml").write_bytes(governance)
    (enclaves / "governance.p7s").write_bytes(smime_sign(governance, ca_cert, ca_key))
    for grant in grants.values():
        d = enclaves / grant.name.strip("/")
        d.mkdir(parents=True)
        for role in ("identity_ca", "permissions_ca"):
            _link(d / f"{role}.cert.pem", public / f"{role}.cert.pem")
        _link(d / "governance.p7s", enclaves / "governance.p7s")
        key, cert = _key_and_cert(grant.name, ca=(ca_cert, ca_key))
        (d / "cert.pem").write_bytes(_pem_cert(cert))
        _write_private(d / "key.pem", _pem_key(key))
        perms = dds_permissions(grant, domains, cert.not_valid_before_utc,
                                cert.not_valid_after_utc)
        (d / "permissions.xml").write_bytes(perms)
        (d / "permissions.p7s").write_bytes(smime_sign(perms, ca_cert, ca_key))
    meta = {"robot": robot, "domains": list(domains),
            "enclaves": {g.name: {"nodes": list(g.nodes), "publishes": list(g.topics_published),
                                  "subscribes": list(g.topics_subscribed)}
                         for g in grants.values()}}
    (root / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")


def load_keystore(root: str | Path) -> Keystore:
    """Read a keystore :func:`create_keystore` wrote and check every file DDS Security opens
    is there (not their signatures: :func:`verify_keystore`; the middleware checks them).

    Raises:
        KeystoreError: not a directory, not an edgerl keystore, or a file missing.
    """
    root = Path(root)
    if not root.is_dir():
        raise KeystoreError(f"keystore {root}: not a directory")
    try:
        meta = json.loads((root / META_FILE).read_text())
        robot, (lo, hi) = str(meta["robot"]), (int(d) for d in meta["domains"])
        enclaves = dict(meta["enclaves"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise KeystoreError(f"keystore {root}: no readable {META_FILE} ({exc}); make it with "
                            "`edgerl ros-keystore`") from None
    grants = {}
    for name, body in enclaves.items():
        d = root / "enclaves" / name.strip("/")
        missing = [f for f in ("cert.pem", "key.pem", "identity_ca.cert.pem",
                               "permissions_ca.cert.pem", "governance.p7s", "permissions.p7s")
                   if not (d / f).is_file()]
        if missing:
            raise KeystoreError(f"keystore {root}: enclave {name} lacks {', '.join(missing)}")
        grants[name] = EnclaveGrant(name, tuple(body.get("nodes", ())), (), (),
                                    tuple(body.get("publishes", ())),
                                    tuple(body.get("subscribes", ())))
    return Keystore(root, robot, (lo, hi), grants)


def verify_keystore(root: str | Path) -> list[str]:
    """Everything wrong with a keystore, as DDS Security would see it (empty: all good):
    each enclave's certificate is issued by the identity CA with subject ``CN=<enclave>``
    and matches its key; governance.p7s and each permissions.p7s verify against the
    permissions CA and sign exactly the .xml beside them (the middleware reads the signed
    copy, so an .xml edited after signing is reported rather than silently ignored); each
    permissions grant names its enclave's subject. Needs ``openssl`` for the S/MIME checks.
    """
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import NameOID

    root = Path(root)
    problems: list[str] = []
    try:
        ks = load_keystore(root)
        id_ca = x509.load_pem_x509_certificate((root / "public/identity_ca.cert.pem").read_bytes())
    except (KeystoreError, OSError, ValueError) as exc:
        return [str(exc)]
    perm_ca = root / "public" / "permissions_ca.cert.pem"
    signed = [(root / "enclaves/governance.p7s", root / "enclaves/governance.xml")]
    for name in ks.grants:
        d = ks.enclave_dir(name)
        try:
            cert = x509.load_pem_x509_certificate((d / "cert.pem").read_bytes())
            key = serialization.load_pem_private_key((d / "key.pem").read_bytes(), None)
        except (OSError, ValueError) as exc:
            problems.append(f"{name}: {exc}")
            continue
        try:
            cert.verify_directly_issued_by(id_ca)
        except (InvalidSignature, ValueError, TypeError) as exc:
            problems.append(f"{name}: cert.pem is not issued by the identity CA ({exc!r})")
        cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        if not cn or cn[0].value != name:
            problems.append(f"{name}: cert.pem subject is {cert.subject.rfc4514_string()}")
        if key.public_key() != cert.public_key():
            problems.append(f"{name}: key.pem does not match cert.pem")
        try:
            subject = ET.parse(d / "permissions.xml").findtext("permissions/grant/subject_name")
        except (OSError, ET.ParseError) as exc:
            problems.append(f"{name}: permissions.xml: {exc}")
        else:
            if subject != f"CN={name}":
                problems.append(f"{name}: permissions.xml grants {subject!r}, not CN={name}")
        signed.append((d / "permissions.p7s", d / "permissions.xml"))
    for p7s, xml in signed:
        try:
            text = verify_signed(p7s, perm_ca)
        except KeystoreError as exc:
            problems.append(str(exc))
            continue
        if text != xml.read_bytes():
            problems.append(f"{xml}: differs from the text signed in {p7s.name}")
    return problems


# --- can this install enforce it? ------------------------------------------------------------
#: Strings any Fast DDS built with -DSECURITY=ON carries (its builtin plugins' properties).
_FASTDDS_SECURITY_MARKS = (b"dds.sec.auth", b"builtin.PKI-DH")

_PROBE = r"""
import json, sys
out = {"ok": False, "error": "", "libs": []}
try:
    import rclpy
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        rclpy.create_node(sys.argv[1], context=ctx).destroy_node()
        out["ok"] = True
    finally:
        ctx.try_shutdown()
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
with open("/proc/self/maps") as fh:
    out["libs"] = sorted({line.split()[-1] for line in fh
                          if "libfastdds" in line or "libfastrtps" in line})
print("EDGERL_PROBE " + json.dumps(out), flush=True)
"""


def fastdds_has_security(lib: Path) -> bool:
    """Whether the Fast DDS library ``lib`` was built with its security plugins (it holds
    their property names); reads the file in chunks."""
    keep = max(map(len, _FASTDDS_SECURITY_MARKS))
    tail = b""
    with open(lib, "rb") as fh:
        while chunk := fh.read(1 << 20):
            buf = tail + chunk
            if any(m in buf for m in _FASTDDS_SECURITY_MARKS):
                return True
            tail = buf[-keep:]
    return False


def _probe_enforce(timeout_s: float = 60.0) -> dict[str, Any]:
    """Start one node with ``ROS_SECURITY_STRATEGY=Enforce`` on a throwaway keystore in a
    child process; returns ``{ok, error, libs, stderr}`` (``libs``: the Fast DDS libraries
    it mapped)."""
    with tempfile.TemporaryDirectory(prefix="edgerl-sros2-probe-") as tmp:
        ks = create_keystore(Path(tmp) / "keystore")
        env = {**os.environ, **security_env(ks.root, MONITOR_ENCLAVE),
               "ROS_DOMAIN_ID": str(random.randint(1, 200)),
               "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
        try:
            proc = subprocess.run([sys.executable, "-c", _PROBE, MONITOR_NODE], env=env,
                                  capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {"ok": False, "error": f"a secure node did not start in {timeout_s:g} s",
                    "libs": [], "stderr": ""}
    result = {"ok": False, "error": f"probe exited with status {proc.returncode}", "libs": []}
    for line in proc.stdout.splitlines():
        if line.startswith("EDGERL_PROBE "):
            result = json.loads(line[len("EDGERL_PROBE "):])
    result["stderr"] = proc.stderr
    return result


def _first_lines(text: str, words: tuple[str, ...] = ("security", "Security", "SECURITY"),
                 n: int = 2) -> str:
    lines = [ln.strip() for ln in text.splitlines() if any(w in ln for w in words)]
    return "; ".join(lines[:n])


_INSTALL_HINT = ("install ROS 2 from the distribution packages (e.g. apt install "
                 "ros-kilted-ros-base), whose Fast DDS has the security plugins, or build Fast "
                 "DDS with -DSECURITY=ON")


@functools.lru_cache(maxsize=1)
def security_supported() -> tuple[bool, str]:
    """Whether this install can run edgerl's graph with DDS Security enforced, and why.

    Two checks: a child process starts one node with ``ROS_SECURITY_ENABLE=true``,
    ``ROS_SECURITY_STRATEGY=Enforce`` on a keystore just made; and the Fast DDS libraries
    it loaded must carry the security plugins (a node that starts on a Fast DDS without
    them would run unprotected). Cached for the process (``security_supported.cache_clear()``).
    """
    probe = _probe_enforce()
    rmw = os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    libs = [Path(p) for p in probe.get("libs", []) if Path(p).is_file()]
    plain = [p for p in libs if not fastdds_has_security(p)]
    static = (f"{', '.join(map(str, plain))} has no DDS security plugins "
              f"(no {_FASTDDS_SECURITY_MARKS[0].decode()!r} in it)" if plain else "")
    if not probe["ok"]:
        said = " ".join(probe["error"].split())[:400] \
            or _first_lines(probe.get("stderr", "")) or "no reason given"
        if plain or "security libraries" in said:
            what = "this ROS 2 middleware was built without DDS security"
        else:
            what = "a node could not start with DDS security enforced"
        detail = "; ".join(x for x in (static, f"a node with ROS_SECURITY_STRATEGY=Enforce "
                                               f"failed to start ({rmw}): {said}") if x)
        return False, f"{what}: {detail}; {_INSTALL_HINT}"
    if plain:
        return False, (f"this ROS 2 middleware was built without DDS security: {static}, so a "
                       f"node started with ROS_SECURITY_STRATEGY=Enforce ran unprotected; "
                       f"{_INSTALL_HINT}")
    where = f" ({', '.join(map(str, libs))})" if libs else ""
    return True, f"DDS security is enforced by {rmw}{where}"


# --- using it in edgerl deploy ---------------------------------------------------------------
def security_env(keystore: str | Path, enclave: str | None = None) -> dict[str, str]:
    """The variables that make a ROS 2 process use ``keystore`` with security enforced, in
    ``enclave`` (``ROS_SECURITY_ENCLAVE_OVERRIDE``; rcl's ``--enclave`` otherwise)."""
    env = {"ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Enforce",
           "ROS_SECURITY_KEYSTORE": str(Path(keystore).resolve())}
    if enclave is not None:
        env["ROS_SECURITY_ENCLAVE_OVERRIDE"] = enclave
    return env


@dataclass(frozen=True)
class GraphSecurity:
    """The security settings of one ``edgerl deploy``: which keystore, each process's
    enclave (:data:`PROCESS_ENCLAVES`), the monitor's."""

    keystore: Keystore

    def process_env(self, process: str) -> dict[str, str]:
        """Extra environment of the node process (or container) ``process``."""
        return security_env(self.keystore.root, PROCESS_ENCLAVES[process])

    @contextlib.contextmanager
    def monitor_environ(self) -> Iterator[None]:
        """``os.environ`` of this process set for the monitor's enclave while inside (rcl
        reads it when the monitor's context starts), restored after."""
        env = security_env(self.keystore.root, MONITOR_ENCLAVE)
        saved = {k: os.environ.get(k) for k in SECURITY_ENV}
        os.environ.update(env)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def graph_security(keystore: str | Path, robot: str, processes: list[str],
                   domain_id: int | None) -> tuple[GraphSecurity, int | None]:
    """Check ``keystore`` can secure a graph of ``processes`` for ``robot`` on
    ``domain_id`` here, before anything starts; returns the settings and the domain to use
    (the keystore's, when it grants only one and ``domain_id`` is None).

    Raises:
        KeystoreError: DDS security is not available on this install (first, with the
            reason from :func:`security_supported`), the keystore is unusable, made for
            another robot, lacks an enclave, or does not grant ``domain_id``.
    """
    ok, reason = security_supported()
    if not ok:
        raise KeystoreError(reason)
    ks = load_keystore(keystore)
    if robot in ROBOT_NODES and ks.robot != robot:
        raise KeystoreError(f"keystore {ks.root} was made for --robot {ks.robot}, not {robot}; "
                            f"make one with `edgerl ros-keystore DIR --robot {robot}`")
    for process in processes:
        enclave = PROCESS_ENCLAVES.get(process)
        if enclave is None or enclave not in ks.grants:
            raise KeystoreError(f"keystore {ks.root} has no enclave for {process}")
    if MONITOR_ENCLAVE not in ks.grants:
        raise KeystoreError(f"keystore {ks.root} has no enclave {MONITOR_ENCLAVE}")
    lo, hi = ks.domains
    if domain_id is None and lo == hi:
        domain_id = lo
    if domain_id is not None and not lo <= domain_id <= hi:
        raise KeystoreError(f"keystore {ks.root} grants ROS domains {lo}..{hi}, not {domain_id}")
    return GraphSecurity(ks), domain_id
