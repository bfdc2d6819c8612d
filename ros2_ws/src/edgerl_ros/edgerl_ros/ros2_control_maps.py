"""The ros2_control bridge's observation map: which message field feeds each observation.

An ``observation_map`` entry is ``obs_name=SOURCE``; ``SOURCE`` is one of

* ``joint:field`` -- a joint of ``/joint_states`` (``field``: ``position | velocity |
  effort``), e.g. ``cart_x=slider:position``;
* ``/topic:Type[i]`` -- element ``i`` (0-based) of a ``std_msgs/Float64MultiArray`` on
  ``/topic``, e.g. ``goal_x=/goal:Float64MultiArray[0]``;
* ``/topic:Type.path`` -- a field of a ``geometry_msgs/PointStamped`` (``point.x|y|z``) or
  ``geometry_msgs/PoseStamped`` (``pose.position.x|y|z``, ``pose.orientation.x|y|z|w``), e.g.
  ``goal_x=/goal_pose:PoseStamped.pose.position.x``.

A source starting with ``/`` is a topic (topic names are absolute); ``Type`` may carry its
package (``std_msgs/Float64MultiArray``). The extra topics' newest values are held by
:class:`AuxValues`; the observation is composed when a ``/joint_states`` arrives. Plain
classes, tested without ROS.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgerl_ros.messages import BadMessage

__all__ = ["JOINT_FIELDS", "TOPIC_TYPES", "AuxValues", "JointMap", "TopicElement",
           "parse_observation_map", "split_names"]

JOINT_FIELDS = ("position", "velocity", "effort")

# short type name -> (package, field paths allowed; () = indexed by [i])
TOPIC_TYPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "Float64MultiArray": ("std_msgs", ()),
    "PointStamped": ("geometry_msgs", ("point.x", "point.y", "point.z")),
    "PoseStamped": ("geometry_msgs", ("pose.position.x", "pose.position.y", "pose.position.z",
                                      "pose.orientation.x", "pose.orientation.y",
                                      "pose.orientation.z", "pose.orientation.w")),
}

_TOPIC_SOURCE = re.compile(r"^(?P<topic>/[^:\s]+):(?P<type>[A-Za-z_][A-Za-z0-9_/]*)"
                           r"(?P<access>\[[^\]]*\]|\.[A-Za-z0-9_.]+)?$")


def split_names(text: str) -> list[str]:
    """``'a, b,,c'`` -> ``['a', 'b', 'c']``."""
    return [n.strip() for n in text.split(",") if n.strip()]


def source_topics(text: str) -> tuple[str, ...]:
    """The topics an ``observation_map`` reads besides ``/joint_states`` (sorted; entries
    checked as :func:`parse_topic_source` does), for a grant that must list them."""
    topics = set()
    for entry in (e.strip() for e in text.split(",")):
        target = entry.partition("=")[2].strip()
        if target.startswith("/"):
            topics.add(parse_topic_source(entry, target).topic)
    return tuple(sorted(topics))


def message_class(type_name: str) -> type:
    """The rclpy message class of a :data:`TOPIC_TYPES` short name (imported on use)."""
    if type_name == "Float64MultiArray":
        from std_msgs.msg import Float64MultiArray
        return Float64MultiArray
    from geometry_msgs.msg import PointStamped, PoseStamped
    return {"PointStamped": PointStamped, "PoseStamped": PoseStamped}[type_name]


@dataclass(frozen=True)
class TopicElement:
    """One value read from a message on ``topic``: ``data[index]`` of a Float64MultiArray, or
    the attribute ``path`` (dotted) of a PointStamped / PoseStamped."""

    topic: str
    msg_type: str  # a TOPIC_TYPES key
    index: int = -1  # Float64MultiArray element; -1 for a field path
    path: str = ""

    @property
    def spec(self) -> str:
        """The element as written in ``observation_map`` (for messages)."""
        return f"{self.topic}:{self.msg_type}" + (f"[{self.index}]" if not self.path
                                                   else f".{self.path}")

    def read(self, msg: Any) -> float:
        """The element's value in ``msg`` (a message of ``msg_type``).

        Raises:
            BadMessage: the array is too short (``short``) or the value is not finite
                (``non_finite``).
        """
        if not self.path:
            data = msg.data
            if self.index >= len(data):
                raise BadMessage(f"short: {self.topic} has {len(data)} values, "
                                 f"{self.spec} needs {self.index + 1}")
            v = float(data[self.index])
        else:
            obj = msg
            for part in self.path.split("."):
                obj = getattr(obj, part)
            v = float(obj)
        if not np.isfinite(v):
            raise BadMessage(f"non_finite: {self.spec} = {v}")
        return v


def parse_topic_source(entry: str, source: str) -> TopicElement:
    """``/topic:Type[i]`` or ``/topic:Type.path`` -> :class:`TopicElement`.

    Raises:
        ValueError: malformed, unknown type, bad index or field path (naming the entry).
    """
    m = _TOPIC_SOURCE.match(source)
    if m is None:
        raise ValueError(f"observation_map entry {entry!r}: expected obs_name=/topic:Type[i] "
                         "or obs_name=/topic:Type.field")
    pkg, _, type_name = m["type"].rpartition("/")
    known = TOPIC_TYPES.get(type_name)
    if known is None or (pkg and pkg != known[0]):
        raise ValueError(f"observation_map entry {entry!r}: unknown type {m['type']!r} (one of "
                         + ", ".join(f"{p}/{t}" for t, (p, _) in TOPIC_TYPES.items()) + ")")
    access = m["access"] or ""
    paths = known[1]
    if not paths:  # indexed
        text = access[1:-1].strip() if access.startswith("[") else None
        if text is None or not text.isdigit():
            raise ValueError(f"observation_map entry {entry!r}: bad index {access!r}: "
                             f"{type_name} needs [i], i = 0, 1, ...")
        return TopicElement(m["topic"], type_name, index=int(text))
    path = access[1:] if access.startswith(".") else ""
    if path not in paths:
        raise ValueError(f"observation_map entry {entry!r}: field {access!r} of {type_name} is "
                         f"not one of {', '.join('.' + p for p in paths)}")
    return TopicElement(m["topic"], type_name, path=path)


@dataclass(frozen=True)
class JointMap:
    """Observation ``i`` = ``/joint_states`` joint ``joints[i]``, field ``fields[i]``, or,
    where ``topics[i]`` is set (``joints[i]`` and ``fields[i]`` empty), that topic element."""

    names: tuple[str, ...]
    joints: tuple[str, ...]
    fields: tuple[str, ...]
    topics: tuple[TopicElement | None, ...] = ()

    def elements(self) -> list[tuple[int, TopicElement]]:
        """``(observation index, element)`` of each observation read from an extra topic."""
        return [(k, t) for k, t in enumerate(self.topics) if t is not None]

    def observation(self, msg: Any, aux: Mapping[int, float] | None = None) -> np.ndarray:
        """``(len(names),)`` float32 observation from a ros2_control ``JointState`` and the
        extra topics' values ``aux`` (observation index -> value, :meth:`AuxValues.values`).

        Raises:
            BadMessage: a mapped joint is absent (``missing_joint``), a field has the wrong
                length (``wrong_length``) or a value is not finite (``non_finite``).
        """
        index = {n: i for i, n in enumerate(msg.name)}
        out = np.empty(len(self.names), dtype=np.float32)
        for k, (joint, fld) in enumerate(zip(self.joints, self.fields)):
            if not joint:
                out[k] = (aux or {})[k]
                continue
            i = index.get(joint)
            if i is None:
                raise BadMessage(f"missing_joint: {joint!r} (for {self.names[k]}) not in "
                                 "/joint_states")
            values = getattr(msg, fld)
            if len(values) != len(msg.name):
                raise BadMessage(f"wrong_length: {len(msg.name)} names but {len(values)} "
                                 f"{fld} values")
            v = float(values[i])
            if not np.isfinite(v):
                raise BadMessage(f"non_finite: {joint}.{fld} = {v}")
            out[k] = v
        return out


def parse_observation_map(text: str, obs_names: Sequence[str]) -> JointMap:
    """Parse ``obs=joint:field, obs=/topic:Type[i], ...`` (module docstring); every
    observation name must appear exactly once and a topic has one type.

    Raises:
        ValueError: malformed entry, unknown field, type or observation, bad index, duplicate
            or missing names, a topic given two types.
    """
    pairs: dict[str, tuple[str, str, TopicElement | None]] = {}
    types: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, target = entry.partition("=")
        name, target = name.strip(), target.strip()
        if target.startswith("/"):
            element: TopicElement | None = parse_topic_source(entry, target)
            joint = fld = ""
            sep2 = ":"
        else:
            element = None
            joint, sep2, fld = target.partition(":")
            joint, fld = joint.strip(), fld.strip()
        if not sep or not sep2 or not name or not (joint or element):
            raise ValueError(f"observation_map entry {entry!r}: expected obs_name=joint:field "
                             "or obs_name=/topic:Type[i]")
        if element is None and fld not in JOINT_FIELDS:
            raise ValueError(f"observation_map entry {entry!r}: field {fld!r} is not one of "
                             f"{', '.join(JOINT_FIELDS)}")
        if name not in obs_names:
            raise ValueError(f"observation_map: {name!r} is not an observation of the bundle "
                             f"({', '.join(obs_names)})")
        if name in pairs:
            raise ValueError(f"observation_map: {name!r} is mapped twice")
        if element is not None and \
                types.setdefault(element.topic, element.msg_type) != element.msg_type:
            raise ValueError(f"observation_map: topic {element.topic} given as "
                             f"{types[element.topic]} and {element.msg_type}")
        pairs[name] = (joint, fld, element)
    missing = [n for n in obs_names if n not in pairs]
    if missing:
        raise ValueError(f"observation_map: no joint for {', '.join(missing)} (map each "
                         "observation to a /joint_states joint:field or a /topic:Type element)")
    return JointMap(tuple(obs_names), tuple(pairs[n][0] for n in obs_names),
                    tuple(pairs[n][1] for n in obs_names),
                    tuple(pairs[n][2] for n in obs_names))


@dataclass
class AuxValues:
    """The newest value of each extra-topic observation, with its receipt time.

    ``update`` stores a topic's message (all its elements, or none when one is bad); ``values``
    returns them for a ``/joint_states`` arriving at ``now_s`` (monotonic seconds) or says why
    not: a topic with no message yet (``waiting_for <topic>``) or one received more than
    ``max_age_s`` seconds ago (``stale <topic>``).
    """

    elements: list[tuple[int, TopicElement]]
    max_age_s: float = 1.0
    latest: dict[int, float] = field(default_factory=dict)
    received_s: dict[str, float] = field(default_factory=dict)

    def topics(self) -> dict[str, str]:
        """Each extra topic -> its type (short name), in map order."""
        return {t.topic: t.msg_type for _, t in self.elements}

    def update(self, topic: str, msg: Any, now_s: float) -> None:
        """Keep ``msg``'s values for ``topic`` (received at ``now_s``, monotonic s).

        Raises:
            BadMessage: an element is missing or not finite (the previous values stay).
        """
        values = {k: t.read(msg) for k, t in self.elements if t.topic == topic}
        self.latest.update(values)
        self.received_s[topic] = now_s

    def values(self, now_s: float) -> dict[int, float]:
        """Observation index -> newest value, when every topic has a fresh one.

        Raises:
            BadMessage: ``waiting_for <topic>`` or ``stale <topic>`` (the first such topic).
        """
        for topic in self.topics():
            t = self.received_s.get(topic)
            if t is None:
                raise BadMessage(f"waiting_for {topic}: no message yet")
            if now_s - t > self.max_age_s:
                raise BadMessage(f"stale {topic}: last message {now_s - t:.3g} s ago "
                                 f"(aux_max_age_s {self.max_age_s:g})")
        return dict(self.latest)
