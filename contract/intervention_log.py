"""Intervention recordings: MCAP files with the loop's per-tick transitions and the operator's
records, and the reader that turns them back into arrays for learning.

Channels (``json`` message encoding, ``jsonschema`` schemas, readable by Foxglove and
``mcap.reader``):

* ``loop/tick``: one message per logged tick, the fields of
  :data:`edgerl.runtime.transition_log.TRANSITION_FIELDS` (``edit_obs`` (D,), ``policy_out``,
  ``residual``, ``chunk_row``, ``command`` (A,), ``intervened``, ``start``, ``episode``,
  ``t`` s; format 1 recordings have no ``residual``: it reads as NaN);
* ``operator/intervention``: ``{"stamp_s", "kind", "command"}`` per applied record.

The metadata record ``edgerl.recording`` carries ``format`` (:data:`RECORDING_FORMAT`, 2: the
``residual`` field; a file without the record is format 1). A newer format than this reader
knows is refused.

:func:`read_recording` gives the ticks as arrays; :func:`control_steps` collapses the ticks
that saw one plant state (a state-triggered loop ticks on every state echo) into one
transition per control step, which :func:`load_transitions` concatenates over files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.intervention import Intervention

__all__ = ["INTERVENTION_TOPIC", "RECORDING_FORMAT", "TICK_TOPIC", "InterventionRecorder",
           "control_steps", "load_transitions", "read_recording", "recording_format"]

#: The recording format this module writes (1: no ``residual`` field; 2: ``residual``).
RECORDING_FORMAT = 2
_FORMAT_RECORD = "edgerl.recording"

TICK_TOPIC = "loop/tick"
INTERVENTION_TOPIC = "operator/intervention"
_VECTORS = ("edit_obs", "policy_out", "residual", "chunk_row", "command")
_SCHEMAS = {
    TICK_TOPIC: {"type": "object", "properties": {
        **{k: {"type": "array", "items": {"type": "number"}} for k in _VECTORS},
        "intervened": {"type": "boolean"}, "start": {"type": "boolean"},
        "episode": {"type": "integer"}, "t": {"type": "number"}}},
    INTERVENTION_TOPIC: {"type": "object", "properties": {
        "stamp_s": {"type": "number"}, "kind": {"type": "string"},
        "command": {"type": "array", "items": {"type": "number"}}}},
}


class InterventionRecorder:
    """Writes a recording (``with InterventionRecorder(path) as rec: ...``).

    Args:
        path: Output ``.mcap`` file (parent directories are created).
        metadata: String key/values stored as the file's ``edgerl`` metadata record (e.g.
            the bundle and the operator's settings).
    """

    def __init__(self, path: str | Path, metadata: dict[str, str] | None = None) -> None:
        from mcap.writer import CompressionType, Writer

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "wb")  # noqa: SIM115 -- closed in close()
        self._writer = Writer(self._fh, compression=CompressionType.ZSTD)
        self._writer.start(profile="", library="edgerl")
        self._channels = {}
        for topic, schema in _SCHEMAS.items():
            sid = self._writer.register_schema(name=topic, encoding="jsonschema",
                                               data=json.dumps(schema).encode())
            self._channels[topic] = self._writer.register_channel(
                topic=topic, message_encoding="json", schema_id=sid)
        self._writer.add_metadata(_FORMAT_RECORD, {"format": str(RECORDING_FORMAT)})
        if metadata:
            self._writer.add_metadata("edgerl", {k: str(v) for k, v in metadata.items()})
        self.ticks = 0
        self.interventions = 0
        self._closed = False

    def _add(self, topic: str, msg: dict[str, Any], t_s: float) -> None:
        ns = max(int(t_s * 1e9), 0)
        self._writer.add_message(channel_id=self._channels[topic], log_time=ns,
                                 publish_time=ns, data=json.dumps(msg).encode())

    def write_intervention(self, iv: Intervention) -> None:
        """One applied operator record."""
        self._add(INTERVENTION_TOPIC, {"stamp_s": iv.stamp_s, "kind": iv.kind,
                                       "command": np.asarray(iv.command).tolist()}, iv.stamp_s)
        self.interventions += 1

    def write_ticks(self, rows: dict[str, np.ndarray]) -> None:
        """Rows as :meth:`TransitionLog.drain` returns them."""
        for i in range(len(rows["t"])):
            msg = {k: rows[k][i].tolist() for k in _VECTORS}
            msg.update(intervened=bool(rows["intervened"][i]), start=bool(rows["start"][i]),
                       episode=int(rows["episode"][i]), t=float(rows["t"][i]))
            self._add(TICK_TOPIC, msg, msg["t"])
            self.ticks += 1

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._closed

    def close(self) -> None:
        """Finish the file (idempotent)."""
        if not self._closed:
            self._closed = True
            self._writer.finish()
            self._fh.close()

    def __enter__(self) -> InterventionRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def recording_format(path: str | Path) -> int:
    """The recording format of the file at ``path`` (1 where it has no format record).
    ``ValueError`` naming the file for a format newer than :data:`RECORDING_FORMAT`."""
    from mcap.reader import make_reader

    with open(path, "rb") as fh:
        for record in make_reader(fh).iter_metadata():
            if record.name == _FORMAT_RECORD:
                fmt = int(record.metadata.get("format", "1"))
                if fmt > RECORDING_FORMAT:
                    raise ValueError(f"{path}: recording format {fmt} is newer than this "
                                     f"reader's {RECORDING_FORMAT}; upgrade edgerl")
                return fmt
    return 1


def read_recording(path: str | Path) -> tuple[dict[str, np.ndarray], list[Intervention]]:
    """``(ticks, interventions)`` of one recording: ``ticks`` keyed like
    :meth:`TransitionLog.drain` (float32 vectors, bool flags), in file order. Raises
    ``ValueError`` naming the file when it has no ``loop/tick`` messages or a newer format."""
    from mcap.reader import make_reader

    recording_format(path)
    cols: dict[str, list] = {k: [] for k in (*_VECTORS, "intervened", "start", "episode", "t")}
    ivs: list[Intervention] = []
    with open(path, "rb") as fh:
        for _, channel, message in make_reader(fh).iter_messages():
            msg = json.loads(message.data)
            if channel.topic == TICK_TOPIC:
                if "residual" not in msg:  # format 1
                    msg["residual"] = [float("nan")] * len(msg["policy_out"])
                for k in cols:
                    cols[k].append(msg[k])
            elif channel.topic == INTERVENTION_TOPIC:
                ivs.append(Intervention(msg["kind"], float(msg["stamp_s"]),
                                        np.asarray(msg["command"], np.float32)))
    if not cols["t"]:
        raise ValueError(f"{path}: no {TICK_TOPIC} messages (not an intervention recording?)")
    ticks = {k: np.asarray(cols[k], np.float32) for k in _VECTORS}
    ticks.update(intervened=np.asarray(cols["intervened"], bool),
                 start=np.asarray(cols["start"], bool),
                 episode=np.asarray(cols["episode"], np.int64),
                 t=np.asarray(cols["t"], np.float64))
    return ticks, ivs


def control_steps(ticks: dict[str, np.ndarray], fast_dim: int) -> dict[str, np.ndarray]:
    """One row per control step: consecutive ticks of one episode whose observation segment
    (the first ``fast_dim`` elements of ``edit_obs``) is the same collapse into their last
    tick (the command in force when the plant stepped); ``start`` is true if any of them
    started an override, ``intervened`` if the last one ran under one. Adds ``done`` (the
    episode's last step)."""
    obs, ep = ticks["edit_obs"][:, :fast_dim], ticks["episode"]
    n = len(ep)
    if n == 0:
        raise ValueError("no ticks to collapse")
    last = np.ones(n, bool)  # the last tick of its group
    last[:-1] = (ep[1:] != ep[:-1]) | np.any(obs[1:] != obs[:-1], axis=1)
    group = np.concatenate(([0], np.cumsum(last[:-1])))
    start = np.zeros(int(group[-1]) + 1, bool)
    np.logical_or.at(start, group, ticks["start"])
    out = {k: v[last] for k, v in ticks.items()}
    out["start"] = start
    e = out["episode"]
    out["done"] = np.append(e[1:] != e[:-1], True)
    return out


def load_transitions(paths: list[str | Path], fast_dim: int) -> dict[str, np.ndarray]:
    """:func:`control_steps` of every recording, concatenated; episode indices are made
    unique across files. Rows with a non-finite policy output or observation are dropped."""
    parts = []
    offset = 0
    for p in paths:
        steps = control_steps(read_recording(p)[0], fast_dim)
        steps["episode"] = steps["episode"] - steps["episode"].min() + offset
        offset = int(steps["episode"].max()) + 1
        parts.append(steps)
    out = {k: np.concatenate([s[k] for s in parts]) for k in parts[0]}
    ok = np.isfinite(out["edit_obs"]).all(1) & np.isfinite(out["policy_out"]).all(1)
    return {k: v[ok] for k, v in out.items()}
